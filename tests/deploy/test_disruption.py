"""Disruption that fits the lifecycle: budgets that let a drain proceed outside a benchmark, never
block on an unhealthy server, and are held at 0 only while the benchmark Job measures (its guard sidecar, on a
lease a reaper CronJob enforces when the guard died without letting go)."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.benchmark_job import benchmark_plan
from sglab.deploy.disruption_guard import LEASE_S
from sglab.deploy.objects import support_pod_placement
from sglab.deploy.render import render_stack
from pulumi_harness import shipped_stacks

K8S = ("1.31", kubernetes_validate.latest_version())


def stack_with(name: str, **sections):
    loaded = load_stack(name)
    return load_mapping(name, loaded.path, {**json.loads(json.dumps(loaded.raw)), **sections})


@pytest.mark.parametrize("name", shipped_stacks())
def test_every_rendered_budget_lets_unhealthy_pods_go_and_a_drain_proceed(name):
    loaded = load_stack(name)
    objects = render_stack(loaded).objects
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert budgets, name
    for pdb in budgets:
        assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"  # a crash-looping server never blocks
        assert pdb["spec"]["maxUnavailable"] >= 1  # outside a benchmark a drain / node upgrade may evict it
        assert pdb["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"  # Pulumi takes it back from a guard
        for version in K8S:
            kubernetes_validate.validate(pdb, version, strict=True)


def test_production_lets_a_drain_proceed():
    (pdb, *_) = [o for o in render_stack(load_stack("production")).objects if o["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_the_benchmark_job_holds_exactly_the_arms_budgets_while_it_runs():
    stack = load_stack("eagle-nccl-ll").config
    plan = benchmark_plan(stack, "eagle-nccl-ll")
    pod = plan.job["spec"]["template"]["spec"]
    (guard,) = pod["initContainers"]
    assert guard["restartPolicy"] == "Always"  # a native sidecar: stopped after the benchmark container
    assert guard["startupProbe"]["exec"]["command"][:2] == ["test", "-f"]  # the benchmark starts once held
    command = guard["command"]
    assert command[:3] == ["python", "-m", "sglab.deploy.disruption_guard"]
    held = [command[i + 1] for i, part in enumerate(command) if part == "--pdb"]
    assert held == ["sglang-baseline", "sglang-candidate"]  # the chart names each budget after its release
    assert command[command.index("--release-to") + 1] == str(stack.disruption_budget.max_unavailable)
    assert command[command.index("--lease-s") + 1] == str(LEASE_S)  # the hold's lease, renewed while it runs
    assert guard["securityContext"]["allowPrivilegeEscalation"] is False
    assert guard["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    (budget_rule,) = [r for r in plan.role["rules"] if r["resources"] == ["poddisruptionbudgets"]]
    assert budget_rule == {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"],
                           "resourceNames": held, "verbs": ["get", "patch"]}
    for version in K8S:
        kubernetes_validate.validate(plan.job, version, strict=True)
        kubernetes_validate.validate(plan.role, version, strict=True)


def test_a_reaper_cronjob_releases_the_holds_a_dead_guard_left_with_a_role_for_exactly_that():
    loaded = stack_with("eagle-nccl-ll", **{"image-pull-secrets": ["registry-cred"]})
    stack = loaded.config
    plan = benchmark_plan(stack, "eagle-nccl-ll")
    reaper = plan.reaper
    assert [m["kind"] for m in reaper.manifests()] == ["ServiceAccount", "Role", "RoleBinding", "CronJob"]
    assert all(m["metadata"]["namespace"] == stack.namespace for m in reaper.manifests())  # namespaced only
    cron = reaper.cron_job["spec"]
    assert cron["schedule"] == "*/10 * * * *" and cron["concurrencyPolicy"] == "Forbid"
    assert cron["successfulJobsHistoryLimit"] <= 3 and cron["failedJobsHistoryLimit"] <= 3
    job = cron["jobTemplate"]["spec"]
    assert job["ttlSecondsAfterFinished"] > 0 and job["backoffLimit"] == 0
    pod, bench_pod = job["template"]["spec"], plan.job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (guard,) = bench_pod["initContainers"]
    command = container["command"]
    assert command[:4] == ["python", "-m", "sglab.deploy.disruption_guard", "--reap"]
    assert [command[i + 1] for i, part in enumerate(command) if part == "--pdb"] == [
        "sglang-baseline", "sglang-candidate"]
    assert command[command.index("--release-to") + 1] == str(stack.disruption_budget.max_unavailable)
    # what the Job's pod gets: its image, pull secrets, placement, tolerations and security context
    assert (container["image"], container["imagePullPolicy"]) == (guard["image"], guard["imagePullPolicy"])
    assert container["securityContext"] == guard["securityContext"]
    assert pod["securityContext"] == bench_pod["securityContext"]
    for key, value in support_pod_placement(stack).items():
        assert pod[key] == bench_pod[key] == value, key
    assert pod["imagePullSecrets"] == [{"name": "registry-cred"}] and pod["restartPolicy"] == "Never"
    assert container["resources"] == guard["resources"]  # small: a few API calls every ten minutes
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}  # no emptyDir: no disk of its own
    # its own account: get/patch exactly the held budgets, get (no list) pods, nothing else
    account = reaper.service_account["metadata"]["name"]
    assert pod["serviceAccountName"] == account != plan.service_account["metadata"]["name"]
    assert reaper.service_account["automountServiceAccountToken"] is False and pod["automountServiceAccountToken"]
    assert reaper.role["rules"] == [
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"],
         "resourceNames": ["sglang-baseline", "sglang-candidate"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    assert reaper.role_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                              "name": reaper.role["metadata"]["name"]}
    assert reaper.role_binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                                "namespace": stack.namespace}]
    rendered = render_stack(loaded).objects
    for manifest in reaper.manifests():
        assert manifest in rendered
        for version in K8S:
            kubernetes_validate.validate(manifest, version, strict=True)


def test_a_sweep_wave_holds_the_baseline_and_every_slot():
    loaded = load_stack("eagle-sweep")
    sweep = {**json.loads(json.dumps(loaded.raw["sweep"])), "wave": 1}
    plan = benchmark_plan(stack_with("eagle-sweep", sweep=sweep).config, "eagle-sweep")
    command = plan.job["spec"]["template"]["spec"]["initContainers"][0]["command"]
    held = [command[i + 1] for i, part in enumerate(command) if part == "--pdb"]
    assert held == ["sglang-baseline", *(f"sglang-slot-{i}" for i in range(1, 5))]
    assert plan.reaper.role["rules"][0]["resourceNames"] == held  # the reaper watches the wave's budgets


@pytest.mark.parametrize("budget", [{"hold-during-benchmark": False}, {"enabled": False}])
def test_no_hold_no_guard_and_no_rights(budget):
    stack = stack_with("eagle-nccl-ll", **{"disruption-budget": budget},
                       **{"benchmark-job": {"scale-arms-to-zero": False}}).config
    plan = benchmark_plan(stack, "eagle-nccl-ll")
    assert "initContainers" not in plan.job["spec"]["template"]["spec"]
    assert plan.reaper is None and "CronJob" not in [m["kind"] for m in plan.manifests()]  # nothing to reap
    # no rights over budgets (the Services and pods: the machine in the evidence, sglab/load/targets.py; the
    # Deployments: the crossover's moves, sglab/load/design.py)
    assert [r["resources"] for r in plan.role["rules"]] == [["configmaps"], ["deployments"], ["services"], ["pods"]]
    if budget.get("enabled") is False:
        assert not [o for o in render_stack(stack_with("eagle-nccl-ll", **{"disruption-budget": budget})).objects
                    if o["kind"] == "PodDisruptionBudget"]
