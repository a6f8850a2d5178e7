"""The benchmark that runs after every `pulumi up`: a Kubernetes Job running `sglab bench` against both arms.

The Job is named after a hash of what the comparison depends on (both arms' effective configs, the
load plan, the policy, the `benchmark-job.rerun` token) and of the measuring instrument (the Job's
image, CPU/memory, namespace, pod labels: everything its immutable pod template holds). So it is
created again exactly when one of those changes, and an unrelated change (tolerations, probes,
timeouts, Locust) leaves the finished Job alone.

The pod reads the stack file from a ConfigMap (the validated config, secrets as markers: the Job
needs none, and the arms hash exactly as in the program), and writes its result into ConfigMaps the
program pre-creates (result_sink.py); its Role may only get and update those, by name. After the Job
completes, the program reads back the result's summary and exports the verdict.

For a sweep wave (sglab:sweep.wave, sglab/sweep/arms.py) the pod runs `sglab sweep` against the
baseline and the wave's arm Services instead, and the read-back exports the wave's ranking and leader.
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
from sglab.deploy.benchmark_outputs import summarize_result
from sglab.deploy.benchmark_pod import (RESULTS_DIR, SERVICE_ACCOUNT, STACKS_MOUNT, held_budgets, job_image,  # noqa: F401
                                        pod_labels, pod_template as _pod_template, role_rules,
                                        moved_arms, scaled_arms)
from sglab.deploy.jobs import job_access
from sglab.deploy.naming import (PENDING, PROJECT_IMAGE_UID, RESULT_CONFIGMAP_FLAG, SECRET_KEYS,  # noqa: F401 (re-exported)
                                 arm_url)
from sglab.deploy.objects import common_labels
from sglab.deploy.pulumi_config import SECRET_MARKER
from sglab.deploy.result_sink import INDEX, RESULT_PARTS, SUMMARY_KEY, part_names
from sglab.sweep.arms import Wave, plan_wave
from sglab.sweep.job import next_step, summarize_sweep, sweep_command

HASH_CHARS = 12
COMPARISON_LABEL = "sglab/comparison"
# Past the Job's own deadline, so a slow run fails with the Job's DeadlineExceeded, not a Pulumi timeout.
AWAIT_SLACK_MIN = 5


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

    @property
    def result_configmap(self) -> dict[str, Any]:
        """The index: the one the Job names and the program reads back."""
        return self.result_configmaps[0]

    def manifests(self) -> list[dict[str, Any]]:
        nodes = [m for m in (self.node_role, self.node_role_binding) if m is not None]
        return [self.service_account, self.role, *nodes, self.role_binding, self.stack_configmap,
                *self.result_configmaps, self.job]


def arm_read_rules(services: list[str]) -> list[dict[str, Any]]:
    """For the machine in the evidence (sglab/load/machine.py): get the arms' Services by name and list the pods
    they select; no other verb, no other resource."""
    return [{"apiGroups": [""], "resources": ["services"], "resourceNames": list(services), "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]


def node_reader(meta_labels: dict[str, str], namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ClusterRole that may only get nodes (their GPU Feature Discovery labels: nodes are cluster-scoped, so a
    Role cannot grant it; `get` needs the name, which the pod gives) and its binding to the Job's account."""
    name = f"{namespace}-{SERVICE_ACCOUNT}-nodes"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": meta_labels},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name, "labels": meta_labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]}
    return role, binding


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

    access = job_access(meta, ns, SERVICE_ACCOUNT, part_names(n.result_configmap, RESULT_PARTS), index_label=INDEX,
                        job=n.job)  # sglab/deploy/jobs.py: shared with the probe Job
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
    nodes, nodes_binding = node_reader(labels, ns) if job_cfg.read_node_labels else (None, None)
    return BenchmarkPlan(n, access.service_account, access.role, access.role_binding, stack_configmap,
                         access.result_configmaps, job, job_cfg.timeout_min + AWAIT_SLACK_MIN, wave, nodes,
                         nodes_binding)


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
    return _pod_template(stack, stack_name, command=bench_command(stack, stack_name, n.result_configmap),
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
