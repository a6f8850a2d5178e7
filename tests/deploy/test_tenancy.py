"""Tenant-scoped by default: a stack renders no cluster-scoped RBAC unless it opts in."""

from __future__ import annotations

import pytest

from sglab.config.loader import load_stack
from sglab.deploy.benchmark_job import benchmark_plan
from sglab.deploy.render import render_stack
from sglab.core.paths import stacks_dir

SHIPPED = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir().glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack_name", SHIPPED)
def test_no_shipped_stack_grants_cluster_wide_rbac(stack_name):
    kinds = {o["kind"] for o in render_stack(load_stack(stack_name)).objects}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}


def test_the_node_reader_is_an_opt_in():
    stack = load_stack("sim").config
    assert benchmark_plan(stack, "sim").node_role is None
    opted = stack.model_copy(update={"benchmark_job": stack.benchmark_job.model_copy(
        update={"read_node_labels": True})})
    plan = benchmark_plan(opted, "sim")
    assert plan.node_role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    assert plan.node_role_binding["kind"] == "ClusterRoleBinding"
