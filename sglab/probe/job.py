"""The NCCL probe Job (`sglab:probe.enabled`): all-reduce timings on one of the stack's GPU nodes, on demand.

The probe must run with the servers' NCCL, CUDA and torch, so its pod runs the servers' image, placement
(node selector, tolerations, priority and runtime class, the arms' anti-affinity) and /dev/shm; the
probe's own modules (stdlib + torch + pydantic) come from a ConfigMap mounted on PYTHONPATH, with the run
spec beside them. Two steps in one pod: the probe as an init container holding all of a node's GPUs, then
the project image's `sglab probe store` writing the result into ConfigMaps the program pre-creates (the
same sink as the benchmark Job, so `sglab results pull` finds it); its Role may only get and update them.
Locked down like the servers: the probe step runs as sglab:pod-security says the servers run (no escalation,
no capabilities, seccomp, read-only root with its writable paths as emptyDirs), the store step as the project
image's user; no container but the store step gets an API token (a projected volume, no automount).
Named after a hash of its spec and `probe.rerun`: it runs on a fresh deploy, and again exactly when asked (a
new token) or when what it measures changes, never because of an image bump; nothing depends on it, so a probe
waiting for a free GPU node never holds the servers back (sglab/deploy/capacity.py warns when none can be free).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from sglab.config.arms import baseline_arm
from sglab.config.stack import StackConfig
from sglab.deploy.benchmark_job import declare_job_access
from sglab.deploy.objects import (LOCKED_DOWN, JobAccess, api_token_mount, api_token_volume, common_labels,
                                 job_access, server_image_security)
from sglab.deploy.naming import PROJECT_IMAGE_UID
from sglab.deploy.values import chart_values
from sglab.results.sink import part_names
from sglab.probe.plan import needs_nvls, probe_spec
from sglab.probe.result import PROBE_KIND
from sglab.probe.store import PROBE_RESULT_PARTS

HASH_CHARS = 12
SERVICE_ACCOUNT = "sglab-probe"
SOURCE_MOUNT = "/opt/sglab-probe"
RESULTS_DIR = "/probe-results"
RESULT_FILE = f"{RESULTS_DIR}/probe.json"
SPEC_KEY = "spec.json"
COMPONENT_LABEL = "sglab/probe"
# The probe's modules as they run inside the server image (sglab/probe/__init__.py documents the rule), and
# the one part of the SGLang contract they read (which NCCL variables SGLang sets itself).
SHIPPED_MODULES = ("__init__", "spec", "worker", "result", "nccl")
SHIPPED_CONTRACT = ("collectives",)
PACKAGE_INIT = '"""sglab: only the NCCL probe modules, mounted into the server image by the probe Job."""\n'
CONTRACT_INIT = '"""sglab.sglang: only what the NCCL probe reads, mounted into the server image by the probe Job."""\n'
STORE_CPU, STORE_MEMORY = "100m", "256Mi"
AWAIT_SLACK_MIN = 5
SERVER_CHART_NAME = "sglang-server"


@dataclass(frozen=True)
class ProbeNames:
    """The names of one probe's objects, all from its digest."""

    digest: str

    @classmethod
    def of(cls, digest: str) -> "ProbeNames":
        return cls(digest)

    job = property(lambda self: f"sglab-probe-{self.digest}")
    result_configmap = property(lambda self: f"sglab-probe-result-{self.digest}")
    source_configmap = property(lambda self: f"sglab-probe-src-{self.digest}")


_PLACEHOLDER = ProbeNames.of("{probe}")


def source_files() -> dict[str, str]:
    """ConfigMap key -> file text of the probe modules (keys cannot hold '/': items map them to paths)."""
    here = Path(__file__).resolve().parents[1]
    files = {"sglab.__init__.py": PACKAGE_INIT, "sglab.sglang.__init__.py": CONTRACT_INIT}
    for module in SHIPPED_MODULES:
        files[f"sglab.probe.{module}.py"] = (here / "probe" / f"{module}.py").read_text(encoding="utf-8")
    for module in SHIPPED_CONTRACT:
        files[f"sglab.sglang.{module}.py"] = (here / "sglang" / f"{module}.py").read_text(encoding="utf-8")
    return files


def _item_path(key: str) -> str:
    stem = key[:-len(".py")]
    return stem.replace(".", "/") + ".py"


def spec_json(stack: StackConfig, stack_name: str) -> str:
    return probe_spec(stack, stack_name, allow_nvls=needs_nvls(stack)).model_dump_json(indent=1)


def store_image(stack: StackConfig) -> str:
    return stack.benchmark_job.image or stack.project_image


def _server_anti_affinity(stack_name: str) -> dict[str, Any]:
    """As the arms have it: not on a node already running one of this stack's servers (its GPUs are taken)."""
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": SERVER_CHART_NAME,
                                          "app.kubernetes.io/part-of": "sglab", "sglab/stack": stack_name}}}]}}


def pod_labels(stack_name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "sglab-probe", "app.kubernetes.io/component": "probe",
            "app.kubernetes.io/part-of": "sglab", "sglab/stack": stack_name}


def probe_command(stack: StackConfig) -> list[str]:
    command = ["python3", "-m", "sglab.probe.nccl", "--spec", f"{SOURCE_MOUNT}/{SPEC_KEY}", "--out", RESULT_FILE,
               "--exit-zero"]
    if needs_nvls(stack):  # the servers themselves enable NVLink multicast; measure what they run
        command.append("--allow-nvls")
    return command


probe_security = server_image_security  # the servers' image runs the way the servers run it (sglab:pod-security)


def pod_template(stack: StackConfig, stack_name: str, n: ProbeNames) -> dict[str, Any]:
    arm = baseline_arm(stack)
    server = chart_values(stack, arm, stack_name=stack_name)  # the arms' own image and placement values
    resources: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    if server["gpus"] > 0:
        resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = server["gpus"]
    if server["resources"]["cpu"]:
        resources["requests"]["cpu"] = server["resources"]["cpu"]
    if server["resources"]["memory"]:
        resources["requests"]["memory"] = resources["limits"]["memory"] = server["resources"]["memory"]
    if server["security"]["ephemeralStorage"]:  # its writable emptyDirs
        resources["requests"]["ephemeral-storage"] = server["security"]["ephemeralStorage"]
    probe_context, writable_mounts, writable_volumes = probe_security(server["security"])
    probe = {
        "name": "probe",
        "image": server["image"]["name"],
        "imagePullPolicy": server["image"]["pullPolicy"],
        "command": probe_command(stack),
        "env": [{"name": "PYTHONPATH", "value": SOURCE_MOUNT}, {"name": "PYTHONUNBUFFERED", "value": "1"},
                {"name": "HOME", "value": "/tmp"}],
        "resources": {k: v for k, v in resources.items() if v},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": "probe-src", "mountPath": SOURCE_MOUNT, "readOnly": True},
                         {"name": "results", "mountPath": RESULTS_DIR}, *writable_mounts],
        "securityContext": probe_context,
    }
    store = {
        "name": "store",
        "image": store_image(stack),
        "imagePullPolicy": stack.image_pull_policy,
        "command": ["sglab", "probe", "store", "--file", RESULT_FILE, "--result-configmap", n.result_configmap],
        "env": [{"name": "HOME", "value": "/tmp"},
                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "resources": {"requests": {"cpu": STORE_CPU, "memory": STORE_MEMORY}, "limits": {"memory": STORE_MEMORY}},
        "volumeMounts": [{"name": "results", "mountPath": RESULTS_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}, api_token_mount()],
        "securityContext": {**LOCKED_DOWN, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                            "runAsUser": PROJECT_IMAGE_UID, "runAsGroup": PROJECT_IMAGE_UID},
    }
    spec: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        # Only the store step calls the API (its projected token); the probe runs in the servers' image.
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "initContainers": [probe],
        "containers": [store],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": server["shmSize"]}},
            {"name": "probe-src", "configMap": {"name": n.source_configmap, "items": [
                {"key": key, "path": _item_path(key)} for key in source_files()] + [
                {"key": SPEC_KEY, "path": SPEC_KEY}]}},
            {"name": "results", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            api_token_volume(),
            *writable_volumes,
        ],
    }
    if server["nodeSelector"]:
        spec["nodeSelector"] = dict(server["nodeSelector"])
    if server["tolerations"]:
        spec["tolerations"] = list(server["tolerations"])
    if server["priorityClassName"]:
        spec["priorityClassName"] = server["priorityClassName"]
    if server["runtimeClassName"]:
        spec["runtimeClassName"] = server["runtimeClassName"]
    if server["imagePullSecrets"]:
        spec["imagePullSecrets"] = [{"name": name} for name in server["imagePullSecrets"]]
    if server["antiAffinity"]["enabled"]:
        spec["affinity"] = _server_anti_affinity(stack_name)
    return {"metadata": {"labels": pod_labels(stack_name)}, "spec": spec}


def probe_hash(stack: StackConfig, stack_name: str) -> str:
    """What the probe measures (its spec: sizes, variants, samples) and the rerun token; not the image or the pod
    template: the probe runs on a fresh deploy and when asked, never again because of an image bump (a new probe
    Job needs a free GPU node, which the servers hold)."""
    payload = json.dumps({"spec": json.loads(spec_json(stack, stack_name)), "rerun": stack.probe.rerun,
                          "stack": stack_name}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:HASH_CHARS]


@dataclass(frozen=True)
class ProbePlan:
    """The probe Job and its companions as manifests (`sglab probe nccl` prints them, the program applies them)."""

    names: ProbeNames
    access: JobAccess
    source_configmap: dict[str, Any]
    job: dict[str, Any]
    await_timeout_min: int

    def manifests(self) -> list[dict[str, Any]]:
        a = self.access
        return [a.service_account, a.role, a.role_binding, self.source_configmap, *a.result_configmaps, self.job]


def probe_plan(stack: StackConfig, stack_name: str) -> ProbePlan:
    n = ProbeNames.of(probe_hash(stack, stack_name))
    labels = {**common_labels(stack_name), "app.kubernetes.io/component": "probe", COMPONENT_LABEL: n.digest}

    def meta(name: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
        return {"name": name, "namespace": stack.namespace, "labels": {**labels, **(extra or {})}}

    access = job_access(meta, stack.namespace, SERVICE_ACCOUNT, part_names(n.result_configmap, PROBE_RESULT_PARTS),
                        index_label=PROBE_KIND, job=n.job)
    source_configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(n.source_configmap),
                        "data": {**source_files(), SPEC_KEY: spec_json(stack, stack_name)}}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {**meta(n.job), "annotations": {"sglab/result-configmap": n.result_configmap}},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": stack.probe.timeout_min * 60,
                 "template": pod_template(stack, stack_name, n)},
    }
    return ProbePlan(n, access, source_configmap, job, stack.probe.timeout_min + AWAIT_SLACK_MIN)


class InClusterProbe(pulumi.ComponentResource):
    """The probe Job, its minimal RBAC, its source/spec ConfigMap and the pre-created result ConfigMaps."""

    TYPE = "sglab:index:NcclProbe"

    def __init__(self, name: str, plan: ProbePlan, *, foundation: list[pulumi.Resource] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        foundation = list(foundation or [])
        access = declare_job_access(self, name, plan.access, foundation)
        # What ran is kept as it ran: a later image or source change does not replace a finished probe (a Job's pod
        # template is immutable, so Pulumi would rerun it); a new probe.rerun token or spec is a new probe.
        source = k8s.core.v1.ConfigMap(f"{name}-src", metadata=plan.source_configmap["metadata"],
                                       data=plan.source_configmap["data"],
                                       opts=pulumi.ResourceOptions(parent=self, depends_on=foundation,
                                                                   ignore_changes=["data"]))
        timeout = f"{plan.await_timeout_min}m"
        self.job = k8s.batch.v1.Job(
            f"{name}-job", metadata=plan.job["metadata"], spec=plan.job["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*foundation, *access, source], ignore_changes=["spec"],
                                        custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)))
        self.job_name = pulumi.Output.from_input(plan.names.job)
        self.result_configmap = pulumi.Output.from_input(plan.names.result_configmap)
        self.register_outputs({"job": self.job_name, "result_configmap": self.result_configmap})


def build_probe_job(dep: Any) -> InClusterProbe:
    """Program builder (`dep` is program.Deployment): the probe on demand; nothing waits for it."""
    plan = probe_plan(dep.stack, dep.stack_name)
    probe = InClusterProbe("nccl-probe", plan, foundation=dep.foundation())
    dep.export("probe_job", probe.job_name)
    dep.export("probe_result_configmap", probe.result_configmap)
    return probe
