"""No idle GPUs: a lab stack's benchmark Job ends by scaling its arms to 0 (the guard sidecar, at the Job's end),
its Role may patch exactly those Deployments' scale; a serving stack, a sweep or a multi-node server never."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from sglab.config.loader import load_stack
from sglab.deploy.benchmark_job import benchmark_plan
from sglab.deploy.disruption_guard import run

ARMS = ["sglang-baseline", "sglang-candidate"]


class FakePolicy:
    """The budgets as the guard reads and patches them: their annotations, as last patched."""

    def __init__(self) -> None:
        self.patched: list[tuple[str, dict]] = []
        self.annotations: dict[str, dict] = {}

    def patch_namespaced_pod_disruption_budget(self, name, namespace, body):
        self.patched.append((name, body))
        self.annotations[name] = {k: v for k, v in body["metadata"]["annotations"].items() if v is not None}

    def read_namespaced_pod_disruption_budget(self, name, namespace):
        return SimpleNamespace(metadata=SimpleNamespace(annotations=self.annotations.get(name), resource_version="1"))


class FakeApps:
    def __init__(self) -> None:
        self.scaled: list[tuple[str, str, dict]] = []

    def patch_namespaced_deployment_scale(self, name, namespace, body):
        self.scaled.append((namespace, name, body))


def test_the_guard_scales_the_arms_to_zero_after_releasing_their_budgets(tmp_path):
    policy, apps, stop = FakePolicy(), FakeApps(), threading.Event()
    stop.set()  # the benchmark container has already ended
    code = run(ARMS, 1, namespace="lab", ready_file=str(tmp_path / "held"), api=policy, apps_api=apps, stop=stop,
               scale_to_zero=ARMS)
    assert code == 0
    assert [name for name, body in policy.patched if body["spec"]["maxUnavailable"] == 1] == ARMS
    assert apps.scaled == [("lab", name, {"spec": {"replicas": 0}}) for name in ARMS]


def _pod_and_rules(stack):
    plan = benchmark_plan(stack, "sim")
    spec = plan.job["spec"]["template"]["spec"]
    return spec, plan.role["rules"]


def test_a_lab_benchmark_job_scales_its_arms_down_with_a_by_name_grant():
    spec, rules = _pod_and_rules(load_stack("sim").config)
    (guard,) = spec["initContainers"]
    command = guard["command"]
    assert [command[i + 1] for i, a in enumerate(command) if a == "--scale-to-zero"] == ARMS
    assert {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ARMS,
            "verbs": ["patch"]} in rules
    assert spec["restartPolicy"] == "Never"


def test_scaling_down_is_a_setting():
    stack = load_stack("sim").config
    kept = stack.model_copy(update={"benchmark_job": stack.benchmark_job.model_copy(
        update={"scale_arms_to_zero": False})})
    spec, rules = _pod_and_rules(kept)
    assert "--scale-to-zero" not in str(spec) and "deployments/scale" not in str(rules)
