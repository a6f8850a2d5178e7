"""The benchmark that runs after every `pulumi up`: a Kubernetes Job running `sglab bench` against both arms.

The Job is named after a hash of what the comparison depends on (both arms' effective configs, the
load plan, the policy, the `benchmark-job.rerun` token) and of the measuring instrument (the Job's
image, CPU/memory, namespace, pod labels: everything its immutable pod template holds). So it is
created again exactly when one of those changes, and an unrelated change (tolerations, probes,
timeouts, Locust) leaves the finished Job alone.

The pod reads the stack file from a ConfigMap (the validated config, secrets as markers: the Job
needs none, and the arms hash exactly as in the program), and writes its result into ConfigMaps the
program pre-creates (sglab/results/sink.py); its Role may only get and update those, by name. After the Job
completes, the program reads back the result's summary and exports the verdict.

For a sweep wave (sglab:sweep.wave, sglab/sweep/arms.py) the pod runs `sglab sweep` against the
baseline and the wave's arm Services instead, and the read-back exports the wave's ranking and leader.

The pod runs as the project image's non-root user on a read-only root; it schedules where the stack's placement
lets it (tolerations and priority class: on a tainted GPU-only pool it must still run), pulls with the stack's
image pull secrets, and carries the label the servers' NetworkPolicy admits. The guard (a native sidecar,
sglab/deploy/disruption_guard.py) holds the arms' PodDisruptionBudgets at 0 while the benchmark runs, on a lease;
a CronJob beside the Job (the guard's reaper, with a Role of its own) releases a hold whose guard died without
letting go. The stack outputs (the verdict, per-level gains with their intervals, the break-even numbers) are read
back from the result summary the Job stored.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from ruamel.yaml import YAML

from sglab.config.arms import baseline_arm, candidate_arm
from sglab.config.loader import NAMESPACE, load_stack, promotion_target_path
from sglab.config.stack import StackConfig
from sglab.core.paths import stacks_dir
from sglab.deploy.disruption_guard import LEASE_S, READY_DIR, READY_FILE
from sglab.deploy.naming import (BENCH_SERVICE_ACCOUNT, PENDING, PROJECT_IMAGE_UID,  # noqa: F401 (re-exported)
                                 RESULT_CONFIGMAP_FLAG, SECRET_KEYS, arm_url)
from sglab.deploy.objects import LOCKED_DOWN, common_labels, job_access, node_reader, support_pod_placement
from sglab.deploy.pulumi_config import SECRET_MARKER
from sglab.results.sink import INDEX, RESULT_PARTS, SUMMARY_KEY, part_names, read_summary
from sglab.sglang.client import ADMIN_API_KEY_ENV, API_KEY_ENV
from sglab.sweep.arms import Wave, next_step, plan_wave, summarize_sweep, sweep_command

HASH_CHARS = 12
COMPARISON_LABEL = "sglab/comparison"
# Past the Job's own deadline, so a slow run fails with the Job's DeadlineExceeded, not a Pulumi timeout.
AWAIT_SLACK_MIN = 5


# The Job's pod: `sglab bench` (or a wave's `sglab sweep`) against the arms' Services, with the disruption guard
# beside it, and the Role both need.
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
    return list(releases) if stack.benchmark_holds_budgets else []


def scaled_arms(stack: StackConfig, releases: list[str]) -> list[str]:
    """The arms' Deployments the Job scales to 0 when it ends (StackConfig.benchmark_scales_arms_down)."""
    return list(releases) if stack.benchmark_scales_arms_down else []


def moved_arms(stack: StackConfig, releases: list[str]) -> list[str]:
    """The arms' Deployments the Job pins to a node or stops to carry out policy.design (sglab/load/design.py):
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


def guard_command(stack: StackConfig, budgets: list[str], *flags: str) -> list[str]:
    command = ["python", "-m", "sglab.deploy.disruption_guard", *flags, "--release-to",
               str(stack.disruption_budget.max_unavailable)]
    for name in budgets:
        command += ["--pdb", name]
    return command


def guard_container(stack: StackConfig, budgets: list[str], scaled: list[str]) -> dict[str, Any]:
    """The native sidecar (restartPolicy Always): the benchmark container starts once its startup probe sees the
    budgets held; the kubelet stops it after the benchmark container, and it lets the budgets go."""
    # No hold limit of its own: when the Job ends (done, failed, or past activeDeadlineSeconds) the kubelet stops
    # the sidecar with SIGTERM, and it lets go (timeout-min stays out of the immutable pod template).
    command = [*guard_command(stack, budgets), "--lease-s", str(LEASE_S)]
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


def pod_security() -> dict[str, Any]:
    """The pod's securityContext: the project image's non-root user, the runtime's seccomp profile."""
    return {"runAsNonRoot": True, "runAsUser": PROJECT_IMAGE_UID, "runAsGroup": PROJECT_IMAGE_UID,
            "seccompProfile": {"type": "RuntimeDefault"}}


def bench_pod_template(stack: StackConfig, stack_name: str, *, command: list[str], stack_configmap: str,
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
        "serviceAccountName": BENCH_SERVICE_ACCOUNT,
        "automountServiceAccountToken": True,
        "restartPolicy": "Never",
        "securityContext": pod_security(),
        "containers": [container],
        "volumes": [{"name": "stack", "configMap": {"name": stack_configmap}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}}],
        **support_pod_placement(stack),
    }
    if budgets or scaled:
        spec["initContainers"] = [guard_container(stack, budgets, scaled or [])]
        spec["volumes"].append({"name": "guard", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
    return {"metadata": {"labels": pod_labels(stack, stack_name)}, "spec": spec}


# The guard's reaper: a CronJob beside the Job that releases a hold whose guard died without letting go (its pod
# force-deleted, its node lost: disruption_guard.py, "lease"). One per namespace, not per comparison: a hold left
# by an earlier Job is as stuck as one left by this Job.
REAPER = "sglab-guard-reaper"
REAPER_SCHEDULE = "*/10 * * * *"
REAPER_DEADLINE_S = 120  # a few API calls; a hung one is cut off and the next run tries again
REAPER_TTL_S = 24 * 3600  # a failed run stays a day to be read (the history limits keep fewer anyway)


@dataclass(frozen=True)
class GuardReaper:
    service_account: dict[str, Any]
    role: dict[str, Any]
    role_binding: dict[str, Any]
    cron_job: dict[str, Any]

    def manifests(self) -> list[dict[str, Any]]:
        return [self.service_account, self.role, self.role_binding, self.cron_job]


def reaper_rules(budgets: list[str]) -> list[dict[str, Any]]:
    """get/patch exactly the held budgets; get pods (the holder's name is only known from the budget, so it cannot
    be granted by name; no list)."""
    return [{"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "resourceNames": list(budgets),
             "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]


def guard_reaper(stack: StackConfig, stack_name: str, budgets: list[str]) -> GuardReaper | None:
    """Its ServiceAccount, Role, RoleBinding and CronJob, or None when no guard holds anything. The pod is the
    Job's in image, pull secrets, placement and security; it carries no load generator label."""
    if not budgets:
        return None
    ns = stack.namespace
    labels = {**common_labels(stack_name), "app.kubernetes.io/component": "disruption-guard"}

    def meta(name: str) -> dict[str, Any]:
        return {"name": name, "namespace": ns, "labels": dict(labels)}

    container = {
        "name": "reaper",
        "image": job_image(stack),
        "imagePullPolicy": stack.image_pull_policy,
        "command": guard_command(stack, budgets, "--reap"),
        "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": GUARD_CPU, "memory": GUARD_MEMORY}, "limits": {"memory": GUARD_MEMORY}},
        "securityContext": _restricted(),
    }
    own_labels = {"app.kubernetes.io/name": REAPER, "app.kubernetes.io/component": "disruption-guard",
                  "app.kubernetes.io/part-of": "sglab", "sglab/stack": stack_name}
    pod = {"metadata": {"labels": own_labels},
           "spec": {"serviceAccountName": REAPER, "automountServiceAccountToken": True, "restartPolicy": "Never",
                    "securityContext": pod_security(), "containers": [container], **support_pod_placement(stack)}}
    cron_job = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(REAPER), "spec": {
        "schedule": REAPER_SCHEDULE, "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 300,
        "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
        "jobTemplate": {"spec": {"backoffLimit": 0, "activeDeadlineSeconds": REAPER_DEADLINE_S,
                                 "ttlSecondsAfterFinished": REAPER_TTL_S, "template": pod}}}}
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(REAPER),
                       "automountServiceAccountToken": False}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(REAPER),
            "rules": reaper_rules(budgets)}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(REAPER),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": REAPER},
               "subjects": [{"kind": "ServiceAccount", "name": REAPER, "namespace": ns}]}
    return GuardReaper(service_account, role, binding, cron_job)


# The Job's stack outputs, read back from the result summary it stored.
def _level_rows(verdict: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    metric = verdict.get("metric") or "decode_tok_per_s"
    gains, economics = [], []
    for level in verdict.get("levels") or []:
        if not isinstance(level, dict):
            continue
        gain = level.get("decode" if metric == "decode_tok_per_s" else "output") or {}
        gains.append({"concurrency": level.get("concurrency"), "gating": level.get("gating"),
                      "outcome": level.get("outcome"), "metric": metric, "gain": gain.get("estimate"),
                      "ci_low": gain.get("low"), "ci_high": gain.get("high"), "rounds": gain.get("rounds")})
        econ = level.get("economics") or {}
        economics.append({key: econ.get(key) for key in ("concurrency", "baseline_step_ms", "verify_cycle_ms",
                                                          "accept_length", "break_even_accept_length",
                                                          "accept_margin")})
    return gains, economics


def summarize_result(summary_json: str | None) -> dict[str, Any]:
    """Stack outputs from the result summary the Job wrote (results/sink.summary_of); `pending` while there is
    none, `invalid` if it is not one (the outputs say why instead of failing the deployment)."""
    empty = {"verdict": PENDING, "sentence": "", "run_id": "", "levels": [], "break_even": []}
    summary = read_summary(summary_json)
    if summary is None:
        return empty
    if isinstance(summary, str):
        return {**empty, "verdict": "invalid", "sentence": summary}
    verdict = summary.get("verdict") if isinstance(summary.get("verdict"), dict) else {}
    outcome = verdict.get("outcome")
    gains, economics = _level_rows(verdict)
    return {"verdict": outcome if isinstance(outcome, str) else PENDING,
            "sentence": str(verdict.get("sentence") or ""), "run_id": summary["run_id"],
            "levels": gains, "break_even": economics}


def comparison_identity(stack: StackConfig, stack_name: str = "") -> dict[str, Any]:
    """What the comparison itself depends on (the Job's instrument is its pod template, hashed too). A sweep
    wave compares the baseline with the wave's arms under the sweep's bounds."""
    job = stack.benchmark_job
    identity = {
        "baseline": baseline_arm(stack).config_hash,
        "candidate": candidate_arm(stack).config_hash,
        "load": stack.load.model_dump(mode="json"),
        "policy": stack.policy.model_dump(mode="json"),
        "quick": job.quick,
        "rerun": job.rerun,
    }
    wave = plan_wave(stack, stack_name) if stack.sweep is not None else None
    if wave is not None:
        del identity["candidate"]
        identity["sweep"] = {"wave": wave.number, "arms": {a.arm.name: a.arm.config_hash for a in wave.arms},
                             "max-rounds": stack.sweep.max_rounds}
    return identity


@dataclass(frozen=True)
class BenchmarkNames:
    comparison: str
    job: str
    result_configmap: str
    stack_configmap: str

    @classmethod
    def of(cls, digest: str) -> "BenchmarkNames":
        return cls(digest, f"sglab-bench-{digest}", f"sglab-result-{digest}", f"sglab-stack-{digest}")


_PLACEHOLDER = BenchmarkNames.of("{comparison}")


def comparison_hash(stack: StackConfig, stack_name: str) -> str:
    """sha256 over the comparison and the Job's pod template (with placeholder names): whatever would make
    Kubernetes replace the Job (its template is immutable) renames it instead."""
    payload = json.dumps({"comparison": comparison_identity(stack, stack_name),
                          "pod_template": pod_template(stack, stack_name, _PLACEHOLDER)},
                         sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:HASH_CHARS]


def names(stack: StackConfig, stack_name: str) -> BenchmarkNames:
    return BenchmarkNames.of(comparison_hash(stack, stack_name))


def stack_file_text(stack: StackConfig) -> str:
    """The stack file the pod loads: the validated config under `sglab:`, secrets as markers."""
    # promote-to only where the stack sets it: the default target may be absent, which the pod's bench then says
    dumped = stack.model_dump(mode="json", by_alias=True,
                              exclude=None if "promote_to" in stack.model_fields_set else {"promote_to"})
    config = {}
    for key, value in dumped.items():
        if key in SECRET_KEYS:
            if value is None:
                continue
            value = {"secure": SECRET_MARKER}
        config[f"{NAMESPACE}:{key}"] = value
    buffer = io.StringIO()
    buffer.write("# Rendered by the sglab Pulumi program from the validated stack config (secrets omitted).\n")
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.dump({"config": config}, buffer)
    return buffer.getvalue()


def stack_files(stack: StackConfig, stack_name: str) -> dict[str, str]:
    """The pod's stacks/: its own stack file and its promotion target's (sglab:promote-to), so the bench in the
    cluster runs the gate the evidence is going to, as `sglab bench` does on a checkout (sglab/bench/sequential.py).
    A default target that does not exist is left out (the bench then says it runs only the stack's own gate)."""
    files = {f"Pulumi.{stack_name}.yaml": stack_file_text(stack)}
    path = promotion_target_path(stack, stack_name, stacks_dir(), f"stack {stack_name}")
    if path is not None:
        files[path.name] = stack_file_text(load_stack(stack.promote_to, path=path).config)
    return files


def bench_command(stack: StackConfig, stack_name: str, result_configmap: str) -> list[str]:
    wave = plan_wave(stack, stack_name) if stack.sweep is not None else None
    if wave is not None:
        return sweep_command(stack, stack_name, result_configmap, wave)
    base, cand = baseline_arm(stack), candidate_arm(stack)
    command = [
        "sglab", "bench", "--stack", stack_name, "--target", "in-cluster",
        "--baseline-url", arm_url(stack, "baseline", base.port),
        "--candidate-url", arm_url(stack, "candidate", cand.port),
        RESULT_CONFIGMAP_FLAG, result_configmap,
    ]
    for arm, deployment in zip(("baseline", "candidate"), arm_moved(stack, stack_name)):
        command += ["--deployment", f"{arm}={deployment}"]
    if stack.benchmark_job.quick:
        command.append("--quick")
    return command


@dataclass(frozen=True)
class BenchmarkPlan:
    """The Job and its companions as manifests (what `sglab render` prints, what the program applies)."""

    names: BenchmarkNames
    service_account: dict[str, Any]
    role: dict[str, Any]
    role_binding: dict[str, Any]
    stack_configmap: dict[str, Any]
    result_configmaps: list[dict[str, Any]]
    job: dict[str, Any]
    await_timeout_min: int
    wave: Wave | None = None  # a sweep wave: the Job runs `sglab sweep` against its arms
    node_role: dict[str, Any] | None = None  # ClusterRole + binding: get nodes (the arms' GPU labels)
    node_role_binding: dict[str, Any] | None = None
    reaper: GuardReaper | None = None  # the guard's reaper CronJob and its RBAC, where the guard holds budgets

    @property
    def result_configmap(self) -> dict[str, Any]:
        """The index: the one the Job names and the program reads back."""
        return self.result_configmaps[0]

    def manifests(self) -> list[dict[str, Any]]:
        nodes = [m for m in (self.node_role, self.node_role_binding) if m is not None]
        return [self.service_account, self.role, *nodes, self.role_binding, self.stack_configmap,
                *self.result_configmaps, self.job, *(self.reaper.manifests() if self.reaper else [])]


def arm_read_rules(services: list[str]) -> list[dict[str, Any]]:
    """For the machine in the evidence (sglab/load/targets.py): get the arms' Services by name and list the pods
    they select; no other verb, no other resource."""
    return [{"apiGroups": [""], "resources": ["services"], "resourceNames": list(services), "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]


KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def kueue_labels(stack: StackConfig) -> dict[str, str]:
    """The label that puts a workload in the stack's Kueue LocalQueue (placement.kueue-queue), or none."""
    queue = stack.placement.kueue_queue
    return {KUEUE_QUEUE_LABEL: queue} if queue else {}


def benchmark_plan(stack: StackConfig, stack_name: str) -> BenchmarkPlan:
    n = names(stack, stack_name)
    ns = stack.namespace
    job_cfg = stack.benchmark_job
    labels = {**common_labels(stack_name), "app.kubernetes.io/component": "benchmark", COMPARISON_LABEL: n.comparison}

    def meta(name: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
        return {"name": name, "namespace": ns, "labels": {**labels, **(extra or {})}}

    access = job_access(meta, ns, BENCH_SERVICE_ACCOUNT, part_names(n.result_configmap, RESULT_PARTS),
                        index_label=INDEX, job=n.job)  # sglab/deploy/objects.py: shared with the probe Job
    stack_configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(n.stack_configmap),
                       "data": stack_files(stack, stack_name)}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**meta(n.job, kueue_labels(stack)),
                     "annotations": {"sglab/result-configmap": n.result_configmap}},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": job_cfg.timeout_min * 60,
            "template": pod_template(stack, stack_name, n),
        },
    }
    wave = plan_wave(stack, stack_name) if stack.sweep is not None else None
    budgets = arm_budgets(stack, stack_name)
    access.role["rules"] = role_rules(n.result_configmap, budgets, arm_scaled(stack, stack_name),
                                      arm_moved(stack, stack_name))
    from sglab.deploy.plan import arm_releases  # the arms' Services are named after their releases

    # what served each arm, a wave's slots included: the node of every arm is in the evidence (a sweep's race
    # compares arms across slot nodes)
    access.role["rules"] += arm_read_rules([r.release for r in arm_releases(stack, stack_name)])
    from sglab.sweep.arms import calibration_read_rules  # a calibrated wave reads the calibration step's block

    access.role["rules"] += calibration_read_rules(stack, wave)
    nodes, nodes_binding = node_reader(labels, ns, BENCH_SERVICE_ACCOUNT) if job_cfg.read_node_labels else (None, None)
    return BenchmarkPlan(n, access.service_account, access.role, access.role_binding, stack_configmap,
                         access.result_configmaps, job, job_cfg.timeout_min + AWAIT_SLACK_MIN, wave, nodes,
                         nodes_binding, guard_reaper(stack, stack_name, budgets))


def arm_budgets(stack: StackConfig, stack_name: str) -> list[str]:
    """The PodDisruptionBudgets of the arms this Job measures (named after their releases), held while it runs."""
    from sglab.deploy.plan import arm_releases

    return held_budgets(stack, [r.release for r in arm_releases(stack, stack_name)])


def arm_scaled(stack: StackConfig, stack_name: str) -> list[str]:
    """The arms' Deployments (named after their releases) the Job scales to 0 when it ends."""
    from sglab.deploy.plan import arm_releases

    return scaled_arms(stack, [r.release for r in arm_releases(stack, stack_name)])


def arm_moved(stack: StackConfig, stack_name: str) -> list[str]:
    """The arms' Deployments (baseline, candidate) the Job moves to carry out policy.design; none for a wave."""
    from sglab.deploy.plan import arm_releases

    if plan_wave(stack, stack_name) is not None:
        return []
    return moved_arms(stack, [r.release for r in arm_releases(stack, stack_name)])


def pod_template(stack: StackConfig, stack_name: str, n: BenchmarkNames) -> dict[str, Any]:
    return bench_pod_template(stack, stack_name, command=bench_command(stack, stack_name, n.result_configmap),
                              stack_configmap=n.stack_configmap, budgets=arm_budgets(stack, stack_name),
                              scaled=arm_scaled(stack, stack_name))


def declare_job_access(parent: pulumi.Resource, name: str, plan: Any,
                       foundation: list[pulumi.Resource]) -> list[pulumi.Resource]:
    """A result-writing Job's ServiceAccount (no token unless the pod asks), Role, RoleBinding and its
    pre-created result ConfigMaps. `plan` has service_account, role, role_binding and result_configmaps.
    The ConfigMaps are kept when the comparison changes (history for `sglab results pull`); their data
    belongs to the Job."""
    child = pulumi.ResourceOptions(parent=parent, depends_on=foundation)
    sa = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=plan.service_account["metadata"],
                                    automount_service_account_token=False, opts=child)
    role = k8s.rbac.v1.Role(f"{name}-role", metadata=plan.role["metadata"], rules=plan.role["rules"], opts=child)
    binding = k8s.rbac.v1.RoleBinding(f"{name}-rolebinding", metadata=plan.role_binding["metadata"],
                                      role_ref=plan.role_binding["roleRef"],
                                      subjects=plan.role_binding["subjects"], opts=child)
    results = [
        k8s.core.v1.ConfigMap(
            f"{name}-result" + (f"-{i}" if i else ""), metadata=manifest["metadata"],
            opts=pulumi.ResourceOptions(parent=parent, depends_on=foundation, retain_on_delete=True,
                                        ignore_changes=["data", "binaryData", "metadata.annotations"]))
        for i, manifest in enumerate(plan.result_configmaps)
    ]
    return [sa, role, binding, *results]


def declare_reaper(name: str, reaper: GuardReaper, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The guard's reaper: its ServiceAccount (no token unless the pod asks), Role, RoleBinding and CronJob."""
    sa = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=reaper.service_account["metadata"],
                                    automount_service_account_token=False, opts=opts)
    role = k8s.rbac.v1.Role(f"{name}-role", metadata=reaper.role["metadata"], rules=reaper.role["rules"], opts=opts)
    binding = k8s.rbac.v1.RoleBinding(f"{name}-rolebinding", metadata=reaper.role_binding["metadata"],
                                      role_ref=reaper.role_binding["roleRef"],
                                      subjects=reaper.role_binding["subjects"], opts=opts)
    cron = k8s.batch.v1.CronJob(name, metadata=reaper.cron_job["metadata"], spec=reaper.cron_job["spec"],
                                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                                    depends_on=[sa, role, binding])))
    return [sa, role, binding, cron]


class InClusterBenchmark(pulumi.ComponentResource):
    """The benchmark Job, its minimal RBAC, its stack file and result ConfigMaps, and the read-back."""

    TYPE = "sglab:index:InClusterBenchmark"

    def __init__(self, name: str, plan: BenchmarkPlan, *, arms: list[pulumi.Resource],
                 foundation: list[pulumi.Resource] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        foundation = list(foundation or [])
        child = pulumi.ResourceOptions(parent=self, depends_on=foundation)
        self.plan = plan
        self.stack_name = plan.job["metadata"]["labels"]["sglab/stack"]
        access = declare_job_access(self, name, plan, foundation)
        if plan.node_role is not None:  # the arms' nodes, for the machine in the evidence
            access += [k8s.rbac.v1.ClusterRole(f"{name}-nodes", metadata=plan.node_role["metadata"],
                                               rules=plan.node_role["rules"], opts=child),
                       k8s.rbac.v1.ClusterRoleBinding(f"{name}-nodes-binding",
                                                      metadata=plan.node_role_binding["metadata"],
                                                      role_ref=plan.node_role_binding["roleRef"],
                                                      subjects=plan.node_role_binding["subjects"], opts=child)]
        stack_cm = k8s.core.v1.ConfigMap(f"{name}-stack", metadata=plan.stack_configmap["metadata"],
                                         data=plan.stack_configmap["data"], opts=child)
        if plan.reaper is not None:
            declare_reaper(f"{name}-reaper", plan.reaper, child)
        timeout = f"{plan.await_timeout_min}m"
        self.job = k8s.batch.v1.Job(
            f"{name}-job", metadata=plan.job["metadata"], spec=plan.job["spec"],
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*arms, *access, stack_cm],
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)))
        namespace = plan.result_configmap["metadata"]["namespace"]
        # Keyed on the Job's status: unknown in a preview that creates the Job, so the engine skips the read of
        # a ConfigMap that does not exist yet; known once the Job has completed (or is unchanged).
        result_id = self.job.status.apply(lambda _: f"{namespace}/{plan.names.result_configmap}")
        read = k8s.core.v1.ConfigMap.get(f"{name}-result-read", result_id,
                                         opts=pulumi.ResourceOptions(parent=self, depends_on=[self.job]))
        self.summary = read.data.apply(lambda data: summarize_result((data or {}).get(SUMMARY_KEY)))
        self.sweep = read.data.apply(lambda data: summarize_sweep((data or {}).get(SUMMARY_KEY)))
        self.job_name = pulumi.Output.from_input(plan.names.job)
        self.result_configmap = pulumi.Output.from_input(plan.names.result_configmap)
        self.register_outputs({"job": self.job_name, "result_configmap": self.result_configmap,
                               "summary": self.summary})

    def outputs(self) -> dict[str, Any]:
        """Stack outputs: verdict, per-level gain and CI, break-even numbers, where the result lives; for a
        sweep wave its status, ranking and leader instead of the A/B verdict."""
        if self.plan.wave is not None:
            return {
                "sweep_status": self.sweep.apply(lambda s: s["status"]),
                "sweep_sentence": self.sweep.apply(lambda s: s["sentence"]),
                "sweep_run_id": self.sweep.apply(lambda s: s["run_id"]),
                "sweep_ranking": self.sweep.apply(lambda s: s["ranking"]),
                "sweep_leader": self.sweep.apply(lambda s: s["leader"]),
                "sweep_leader_config_hash": self.sweep.apply(lambda s: s["leader_config_hash"]),
                "sweep_next": self.sweep.apply(lambda s: next_step(self.plan.wave, s, self.stack_name)),
                "benchmark_job": self.job_name,
                "benchmark_result_configmap": self.result_configmap,
            }
        return {
            "benchmark_verdict": self.summary.apply(lambda s: s["verdict"]),
            "benchmark_sentence": self.summary.apply(lambda s: s["sentence"]),
            "benchmark_run_id": self.summary.apply(lambda s: s["run_id"]),
            "benchmark_levels": self.summary.apply(lambda s: s["levels"]),
            "benchmark_break_even": self.summary.apply(lambda s: s["break_even"]),
            "benchmark_job": self.job_name,
            "benchmark_result_configmap": self.result_configmap,
        }


def build_benchmark_job(dep: Any) -> InClusterBenchmark:
    """Program builder: the Job after both arms (`dep` is program.Deployment)."""
    plan = benchmark_plan(dep.stack, dep.stack_name)
    bench = InClusterBenchmark("benchmark", plan, arms=list(dep.arms.values()), foundation=dep.foundation())
    for key, value in bench.outputs().items():
        dep.export(key, value)
    pulumi.log.info(phase_line(dep.stack, plan), resource=bench.job)
    return bench


def phase_line(stack: StackConfig, plan: BenchmarkPlan) -> str:
    """What `pulumi up` shows beside the Job while it waits: what runs, its bound, where its rounds are logged."""
    load = stack.load
    what = (f"sweep wave {plan.wave.number}/{plan.wave.count}: {len(plan.wave.arms)} arms against the baseline, "
            f"up to {stack.sweep.max_rounds} rounds per gated level" if plan.wave is not None and stack.sweep else
            f"A/B at concurrency {', '.join(map(str, load.concurrency))}, {load.rounds} rounds per gated level")
    return (f"phase 3/3 benchmark: {what}, at most benchmark-job.timeout-min {stack.benchmark_job.timeout_min} min; "
            f"each round is logged: kubectl -n {stack.namespace} logs -f job/{plan.names.job} -c bench")
