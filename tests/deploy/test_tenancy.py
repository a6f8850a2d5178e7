"""Tenant-scoped by default: a stack renders no cluster-scoped RBAC unless it opts in."""

from __future__ import annotations

import pytest

from sglab.cli import main
from sglab.config.loader import load_stack
from sglab.deploy.namespace import cluster_scoped
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


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


@pytest.mark.parametrize("stack_name", SHIPPED)
def test_the_stated_cluster_scoped_objects_are_what_renders(stack_name):
    loaded = load_stack(stack_name)
    rendered = sorted(f"{o['kind']} {o['metadata']['name']}" for o in render_stack(loaded).objects
                      if o["kind"] in CLUSTER_SCOPED)
    assert sorted(f"{kind} {name}" for kind, name, _ in cluster_scoped(loaded.config, stack_name)) == rendered


def test_validate_states_pod_security_cluster_scope_and_production_capacity(capsys):
    assert main(["validate", "--stack", "production"]) == 0
    out = capsys.readouterr().out
    assert "pod security: restricted" in out or "pod security: baseline" in out
    assert "existing namespace sglab-production" in out
    assert "cluster-scoped objects: none" in out
    assert "GPU nodes at once" in out
    assert "priority: inference-critical" in out and "preempt" in out
    assert "api keys: the servers read --api-key and --admin-api-key from Secret sglang-api-keys" in out


def test_validate_names_each_cluster_scoped_object_and_why(capsys):
    assert main(["validate", "--stack", "sim"]) == 0
    out = capsys.readouterr().out
    assert "cluster-scoped objects (1): Namespace sglab-sim (namespace.create)" in out


def _container_images(node) -> set[str]:
    """Every container image in a rendered object, wherever its pod template sits."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                found |= {c["image"] for c in value if isinstance(c, dict) and "image" in c}
            else:
                found |= _container_images(value)
    elif isinstance(node, list):
        for item in node:
            found |= _container_images(item)
    return found


@pytest.mark.parametrize("stack_name", SHIPPED)
def test_validate_states_every_image_the_render_runs_and_whether_a_digest_pins_it(stack_name, capsys):
    rendered = _container_images(render_stack(load_stack(stack_name)).objects)
    assert main(["validate", "--stack", stack_name]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("images")]
    assert rendered and all(image in line for image in rendered), (rendered, line)


def test_production_on_tags_is_told_to_pin_each_image_by_digest(capsys):
    assert main(["validate", "--stack", "production"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("images")]
    assert "lmsysorg/sglang:v0.5.23 (image): a tag" in line
    assert "pin each by digest" in line and "@sha256:" in line and "docker buildx imagetools inspect" in line


def test_images_pinned_by_digest_are_said_pinned(tmp_path, monkeypatch, capsys):
    digest = "sha256:" + "a" * 64
    text = (stacks_dir() / "Pulumi.production.yaml").read_text()
    tagged = "  sglab:image: lmsysorg/sglang:v0.5.23\n"
    assert tagged in text
    text = text.replace(tagged, f"  sglab:image: lmsysorg/sglang:v0.5.23@{digest}\n")
    (tmp_path / "Pulumi.production.yaml").write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    assert main(["validate", "--stack", "production"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("images")]
    assert f"lmsysorg/sglang:v0.5.23@{digest} (image): pinned by digest" in line
