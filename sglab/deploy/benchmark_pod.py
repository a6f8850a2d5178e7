"""The benchmark Job's pod: `sglab bench` (or a wave's `sglab sweep`) against the arms' Services, with the
disruption guard beside it, and the Role both need (sglab/deploy/benchmark_job.py declares the Job).

The pod runs as the project image's non-root user on a read-only root; it schedules where the stack's placement
lets it (tolerations and priority class: on a tainted GPU-only pool it must still run), pulls with the stack's
image pull secrets, and carries the label the servers' NetworkPolicy admits. The guard (a native sidecar,
sglab/deploy/disruption_guard.py) holds the arms' PodDisruptionBudgets at 0 while the benchmark runs.
"""

from __future__ import annotations

from typing import Any

from sglab.config.stack import StackConfig
from sglab.deploy.disruption_guard import READY_DIR, READY_FILE
from sglab.deploy.jobs import LOCKED_DOWN, support_pod_placement
from sglab.deploy.naming import PROJECT_IMAGE_UID
from sglab.results.sink import part_names
from sglab.sglang.client import ADMIN_API_KEY_ENV, API_KEY_ENV

SERVICE_ACCOUNT = "sglab-bench"
STACKS_MOUNT = "/etc/sglab/stacks"
RESULTS_DIR = "/tmp/sglab-results"
GUARD_CPU, GUARD_MEMORY = "50m", "128Mi"


def job_image(stack: StackConfig) -> str:
    return stack.benchmark_job.image or stack.project_image


def pod_labels(stack: StackConfig, stack_name: str) -> dict[str, str]:
    """The Job pod is a load generator: it carries the label the servers' NetworkPolicy admits."""
    return {
        "app.kubernetes.io/name": "sglab-bench",
        "app.kubernetes.io/component": "benchmark",
        "app.kubernetes.io/part-of": "sglab",
        "sglab/stack": stack_name,
        **stack.network_policy.allowed_from,
    }


# The bench's /tmp (its results before they are stored, matplotlib's cache): bounded, and requested so the
# scheduler counts it and the kubelet evicts no other pod for it.
TMP_SIZE = "4Gi"


def held_budgets(stack: StackConfig, releases: list[str]) -> list[str]:
    """The PodDisruptionBudgets the guard holds (the chart names each after its release), or none."""
    budget = stack.disruption_budget
    return list(releases) if budget.enabled and budget.hold_during_benchmark else []


def scaled_arms(stack: StackConfig, releases: list[str]) -> list[str]:
    """The arms' Deployments the Job scales to 0 when it ends (StackConfig.benchmark_scales_arms_down)."""
    return list(releases) if stack.benchmark_scales_arms_down else []


def moved_arms(stack: StackConfig, releases: list[str]) -> list[str]:
    """The arms' Deployments the Job pins to a node or stops to carry out policy.design (sglab/load/moves.py):
    an A/B of single-node servers outside serving (production traffic never moves); none for `parallel`."""
    movable = stack.serving is None and stack.placement.nodes == 1 and stack.policy.design != "parallel"
    return list(releases) if movable else []


def role_rules(result_configmap: str, budgets: list[str] | None = None,
               scaled: list[str] | None = None, moved: list[str] | None = None) -> list[dict[str, Any]]:
    """Minimal: read and overwrite the pre-created result ConfigMaps (index and parts), get/patch the arms'
    budgets the guard holds, patch the scale of the arms it scales down, and get/patch the Deployments it moves,
    each by name. No create (it cannot be limited by name), no list, no delete."""
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": part_names(result_configmap),
              "verbs": ["get", "update"]}]
    if budgets:
        rules.append({"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "resourceNames": list(budgets),
                      "verbs": ["get", "patch"]})
    if scaled:
        rules.append({"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": list(scaled),
                      "verbs": ["patch"]})
    if moved:
        rules.append({"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": list(moved),
                      "verbs": ["get", "patch"]})
    return rules


def _restricted(**extra: Any) -> dict[str, Any]:
    return {**LOCKED_DOWN, "readOnlyRootFilesystem": True, **extra}


def guard_container(stack: StackConfig, budgets: list[str], scaled: list[str]) -> dict[str, Any]:
    """The native sidecar (restartPolicy Always): the benchmark container starts once its startup probe sees the
    budgets held; the kubelet stops it after the benchmark container, and it lets the budgets go."""
    # No hold limit of its own: when the Job ends (done, failed, or past activeDeadlineSeconds) the kubelet stops
    # the sidecar with SIGTERM, and it lets go (timeout-min stays out of the immutable pod template).
    command = ["python", "-m", "sglab.deploy.disruption_guard", "--release-to",
               str(stack.disruption_budget.max_unavailable)]
    for name in budgets:
        command += ["--pdb", name]
    for name in scaled:
        command += ["--scale-to-zero", name]
    return {
        "name": "disruption-guard",
        "image": job_image(stack),
        "imagePullPolicy": stack.image_pull_policy,
        "restartPolicy": "Always",
        "command": command,
        "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "HOME", "value": "/tmp"}],
        "startupProbe": {"exec": {"command": ["test", "-f", READY_FILE]}, "periodSeconds": 2, "failureThreshold": 60},
        "resources": {"requests": {"cpu": GUARD_CPU, "memory": GUARD_MEMORY}, "limits": {"memory": GUARD_MEMORY}},
        "volumeMounts": [{"name": "guard", "mountPath": READY_DIR}],
        "securityContext": _restricted(),
    }


def api_key_env(stack: StackConfig) -> list[dict[str, Any]]:
    """The servers' keys from the stack's Secret, as the servers read them (serving.api-keys): with them the
    benchmark's requests pass SGLang's key middleware. Nothing for a stack whose servers take no key."""
    if stack.serving is None:
        return []
    keys = stack.serving.api_keys
    return [{"name": env, "valueFrom": {"secretKeyRef": {"name": keys.secret, "key": key}}}
            for env, key in ((API_KEY_ENV, keys.api_key_key), (ADMIN_API_KEY_ENV, keys.admin_api_key_key))]


def pod_template(stack: StackConfig, stack_name: str, *, command: list[str], stack_configmap: str,
                 budgets: list[str], scaled: list[str] | None = None) -> dict[str, Any]:
    """The Job's pod: the benchmark against the arms' Services, the stack file mounted, a read-only root."""
    container = {
        "name": "bench",
        "image": job_image(stack),
        "imagePullPolicy": stack.image_pull_policy,
        "command": command,
        "env": [
            {"name": "SGLAB_STACKS_DIR", "value": STACKS_MOUNT},
            {"name": "SGLAB_RESULTS_DIR", "value": RESULTS_DIR},
            {"name": "HOME", "value": "/tmp"},
            {"name": "MPLCONFIGDIR", "value": "/tmp/matplotlib"},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},  # who pinned an arm
            *api_key_env(stack),
        ],
        "resources": {"requests": {"cpu": stack.benchmark_job.cpu, "memory": stack.benchmark_job.memory,
                                   "ephemeral-storage": TMP_SIZE},
                      "limits": {"memory": stack.benchmark_job.memory}},
        "volumeMounts": [{"name": "stack", "mountPath": STACKS_MOUNT, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    spec: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": True,
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": PROJECT_IMAGE_UID, "runAsGroup": PROJECT_IMAGE_UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "stack", "configMap": {"name": stack_configmap}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}}],
        **support_pod_placement(stack),
    }
    if budgets or scaled:
        spec["initContainers"] = [guard_container(stack, budgets, scaled or [])]
        spec["volumes"].append({"name": "guard", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
    return {"metadata": {"labels": pod_labels(stack, stack_name)}, "spec": spec}
