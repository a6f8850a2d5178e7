"""The NCCL probe Job (`sglab:probe.enabled`): all-reduce timings on one of the stack's GPU nodes, before the arms.

The probe must run with the servers' NCCL, CUDA and torch, so its pod runs the servers' image, placement
(node selector, tolerations, priority and runtime class, the arms' anti-affinity) and /dev/shm; the
probe's own modules (stdlib + torch + pydantic) come from a ConfigMap mounted on PYTHONPATH, with the run
spec beside them. Two steps in one pod: the probe as an init container holding all of a node's GPUs, then
the project image's `sglab probe store` writing the result into ConfigMaps the program pre-creates (the
same sink as the benchmark Job, so `sglab results pull` finds it); its Role may only get and update them.
Named after a hash of the spec and the pod template: it runs again exactly when what it measures changes.
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
from sglab.config.models import StackConfig
from sglab.deploy.objects import common_labels
from sglab.deploy.result_sink import PART, RESULT_LABEL, part_names
from sglab.deploy.values import chart_values
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
# The probe's modules as they run inside the server image (sglab/probe/__init__.py documents the rule).
SHIPPED_MODULES = ("__init__", "sizes", "stats", "spec", "worker", "runner", "result", "table", "nccl")
PACKAGE_INIT = '"""sglab: only the NCCL probe modules, mounted into the server image by the probe Job."""\n'
STORE_CPU, STORE_MEMORY = "100m", "256Mi"
AWAIT_SLACK_MIN = 5
SERVER_CHART_NAME = "sglang-server"


@dataclass(frozen=True)
class ProbeNames:
    digest: str
    job: str
    result_configmap: str
    source_configmap: str

    @classmethod
    def of(cls, digest: str) -> "ProbeNames":
        return cls(digest, f"sglab-probe-{digest}", f"sglab-probe-result-{digest}", f"sglab-probe-src-{digest}")


_PLACEHOLDER = ProbeNames.of("{probe}")


def source_files() -> dict[str, str]:
    """ConfigMap key -> file text of the probe modules (keys cannot hold '/': items map them to paths)."""
    here = Path(__file__).resolve().parents[1] / "probe"
    files = {"sglab.__init__.py": PACKAGE_INIT}
    for module in SHIPPED_MODULES:
        files[f"sglab.probe.{module}.py"] = (here / f"{module}.py").read_text(encoding="utf-8")
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
                         {"name": "results", "mountPath": RESULTS_DIR}],
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
                         {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
    }
    spec: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": True,
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
    if server["antiAffinity"]["enabled"]:
        spec["affinity"] = _server_anti_affinity(stack_name)
    return {"metadata": {"labels": pod_labels(stack_name)}, "spec": spec}


def probe_hash(stack: StackConfig, stack_name: str) -> str:
    payload = json.dumps({"spec": json.loads(spec_json(stack, stack_name)), "rerun": stack.probe.rerun,
                          "sources": source_files(), "pod_template": pod_template(stack, stack_name, _PLACEHOLDER)},
                         sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:HASH_CHARS]


@dataclass(frozen=True)
class ProbePlan:
    names: ProbeNames
    service_account: dict[str, Any]
    role: dict[str, Any]
    role_binding: dict[str, Any]
    source_configmap: dict[str, Any]
    result_configmaps: list[dict[str, Any]]
    job: dict[str, Any]
    await_timeout_min: int

    def manifests(self) -> list[dict[str, Any]]:
        return [self.service_account, self.role, self.role_binding, self.source_configmap, *self.result_configmaps,
                self.job]


def probe_plan(stack: StackConfig, stack_name: str) -> ProbePlan:
    """The probe Job and its companions as manifests (`sglab probe nccl` prints them, the program applies them)."""
    n = ProbeNames.of(probe_hash(stack, stack_name))
    labels = {**common_labels(stack_name), "app.kubernetes.io/component": "probe", COMPONENT_LABEL: n.digest}

    def meta(name: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
        return {"name": name, "namespace": stack.namespace, "labels": {**labels, **(extra or {})}}

    results = part_names(n.result_configmap, PROBE_RESULT_PARTS)
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(SERVICE_ACCOUNT),
                       "automountServiceAccountToken": False}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(SERVICE_ACCOUNT),
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": results,
                       "verbs": ["get", "update"]}]}
    role_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(SERVICE_ACCOUNT),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SERVICE_ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": stack.namespace}],
    }
    source_configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(n.source_configmap),
                        "data": {**source_files(), SPEC_KEY: spec_json(stack, stack_name)}}
    result_configmaps = [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {**meta(part, {RESULT_LABEL: PROBE_KIND if i == 0 else PART}), "annotations": {"sglab/job": n.job}}}
        for i, part in enumerate(results)
    ]
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {**meta(n.job), "annotations": {"sglab/result-configmap": n.result_configmap}},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": stack.probe.timeout_min * 60,
                 "template": pod_template(stack, stack_name, n)},
    }
    return ProbePlan(n, service_account, role, role_binding, source_configmap, result_configmaps, job,
                     stack.probe.timeout_min + AWAIT_SLACK_MIN)


class InClusterProbe(pulumi.ComponentResource):
    """The probe Job, its minimal RBAC, its source/spec ConfigMap and the pre-created result ConfigMaps."""

    TYPE = "sglab:index:NcclProbe"

    def __init__(self, name: str, plan: ProbePlan, *, foundation: list[pulumi.Resource] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        foundation = list(foundation or [])
        child = pulumi.ResourceOptions(parent=self, depends_on=foundation)
        sa = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=plan.service_account["metadata"],
                                        automount_service_account_token=False, opts=child)
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=plan.role["metadata"], rules=plan.role["rules"], opts=child)
        binding = k8s.rbac.v1.RoleBinding(f"{name}-rolebinding", metadata=plan.role_binding["metadata"],
                                          role_ref=plan.role_binding["roleRef"],
                                          subjects=plan.role_binding["subjects"], opts=child)
        source = k8s.core.v1.ConfigMap(f"{name}-src", metadata=plan.source_configmap["metadata"],
                                       data=plan.source_configmap["data"], opts=child)
        results = [
            k8s.core.v1.ConfigMap(
                f"{name}-result" + (f"-{i}" if i else ""), metadata=manifest["metadata"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=foundation, retain_on_delete=True,
                                            ignore_changes=["data", "binaryData", "metadata.annotations"]))
            for i, manifest in enumerate(plan.result_configmaps)
        ]
        timeout = f"{plan.await_timeout_min}m"
        self.job = k8s.batch.v1.Job(
            f"{name}-job", metadata=plan.job["metadata"], spec=plan.job["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*foundation, sa, role, binding, source, *results],
                                        custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)))
        self.job_name = pulumi.Output.from_input(plan.names.job)
        self.result_configmap = pulumi.Output.from_input(plan.names.result_configmap)
        self.register_outputs({"job": self.job_name, "result_configmap": self.result_configmap})


def build_probe_job(dep: Any) -> InClusterProbe:
    """Program builder: the probe before the arms (`dep` is program.Deployment; the arms wait for it)."""
    plan = probe_plan(dep.stack, dep.stack_name)
    probe = InClusterProbe("nccl-probe", plan, foundation=dep.foundation())
    dep.export("probe_job", probe.job_name)
    dep.export("probe_result_configmap", probe.result_configmap)
    return probe
