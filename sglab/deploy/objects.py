"""The plain Kubernetes objects and pod pieces sglab declares outside the charts: common labels, Secrets, and what
the result-writing Jobs (the benchmark Job, the NCCL probe Job) and the CPU-only support pods share.

Returned as manifests so the Pulumi program (typed resources built from the same fields) and `sglab render` (which
prints them) cannot disagree. Each result-writing Job has a ServiceAccount with no token of its own, a Role that
may only get and update the Job's pre-created result ConfigMaps (index and parts: `create` cannot be limited by
name), its RoleBinding, and those ConfigMaps. A pod whose only API client is one container gets the API token
through a projected volume mounted in that container alone, instead of `automountServiceAccountToken` for every
container.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from sglab.config.stack import StackConfig
from sglab.deploy.naming import HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY, PART_OF
from sglab.results.sink import PART, RESULT_LABEL

MANAGED_BY = "pulumi"


def common_labels(stack_name: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/managed-by": MANAGED_BY, "sglab/stack": stack_name}


def hf_token_secret_manifest(stack: StackConfig, stack_name: str, token: Any) -> dict[str, Any] | None:
    """The Secret holding HF_TOKEN, or None when the stack sets no hf-token. `token` may be a Pulumi Output."""
    if stack.hf_token is None:
        return None
    return secret_manifest(stack, stack_name, HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY, token)


def secret_manifest(stack: StackConfig, stack_name: str, name: str, key: str, value: Any) -> dict[str, Any]:
    """An Opaque Secret with one key in the stack's namespace; `value` may be a Pulumi Output."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": stack.namespace, "labels": common_labels(stack_name)},
        "stringData": {key: value},
    }

Meta = Callable[..., dict[str, Any]]  # meta(name, extra_labels=None) -> object metadata
TOKEN_VOLUME = "api-token"
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"  # where the kubernetes client looks in-cluster
TOKEN_EXPIRATION_S = 3600  # the kubelet refreshes it before it expires


@dataclass(frozen=True)
class JobAccess:
    """The manifests `declare_job_access` (benchmark_job.py) applies for a result-writing Job."""

    service_account: dict[str, Any]
    role: dict[str, Any]
    role_binding: dict[str, Any]
    result_configmaps: list[dict[str, Any]]


def job_access(meta: Meta, namespace: str, service_account: str, result_names: list[str], *, index_label: str,
               job: str) -> JobAccess:
    """ServiceAccount (no automount), Role (get/update of exactly `result_names`), RoleBinding, result ConfigMaps."""
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(service_account),
          "automountServiceAccountToken": False}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(service_account),
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": list(result_names),
                       "verbs": ["get", "update"]}]}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(service_account),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": service_account},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    }
    results = [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {**meta(part, {RESULT_LABEL: index_label if i == 0 else PART}), "annotations": {"sglab/job": job}}}
        for i, part in enumerate(result_names)
    ]
    return JobAccess(sa, role, binding, results)


def node_reader(meta_labels: dict[str, str], namespace: str,
                service_account: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ClusterRole that may only get nodes (their GPU Feature Discovery labels: nodes are cluster-scoped, so a
    Role cannot grant it; `get` needs the name, which the pod gives) and its binding to the Job's account."""
    name = f"{namespace}-{service_account}-nodes"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": meta_labels},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name, "labels": meta_labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]}
    return role, binding


def api_token_volume() -> dict[str, Any]:
    """The API credentials the kubelet would automount (token, cluster CA, namespace), as a volume to mount
    only where the API is called."""
    return {"name": TOKEN_VOLUME, "projected": {"defaultMode": 0o444, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_EXPIRATION_S}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]}}


def api_token_mount() -> dict[str, Any]:
    return {"name": TOKEN_VOLUME, "mountPath": TOKEN_MOUNT, "readOnly": True}


LOCKED_DOWN = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
               "seccompProfile": {"type": "RuntimeDefault"}}


def server_image_security(
        security: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """A container running the servers' image as sglab:pod-security runs the servers (the probe, the preflight):
    its securityContext, its writable mounts and their emptyDirs, from the server chart's `security` values."""
    context: dict[str, Any] = {**LOCKED_DOWN, "readOnlyRootFilesystem": security["readOnlyRootFilesystem"]}
    if security["runAsUser"] != "":
        uid = security["runAsUser"]
        context.update({"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid})
    mounts = [{"name": f"writable-{i}", "mountPath": path} for i, path in enumerate(security["writablePaths"])]
    volumes = [{"name": f"writable-{i}", "emptyDir": {"sizeLimit": security["writableSizeLimit"]}}
               for i in range(len(security["writablePaths"]))]
    return context, mounts, volumes


def toleration_manifest(tol: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": tol.operator}
    for key, value in (("key", tol.key), ("value", tol.value), ("effect", tol.effect),
                       ("tolerationSeconds", tol.toleration_seconds)):
        if value is not None:
            out[key] = value
    return out


# What the GPU operator's feature discovery labels every GPU node with.
GPU_NODE_LABEL = "nvidia.com/gpu.present"


def support_pod_placement(stack: Any) -> dict[str, Any]:
    """Pod spec fields of the CPU-only pods sglab runs beside the servers (benchmark Job, Locust, preflight, the
    live judge, the watch): the stack's tolerations and priority class (a tainted pool must still schedule them),
    placement's loadgen-node-selector, the image pull secrets, and a node affinity that keeps them off GPU nodes
    (a pod there holds CPU and memory a GPU server's scheduling needs) unless placement.cpu-pods-on-gpu-nodes."""
    placement = stack.placement
    spec: dict[str, Any] = {}
    if placement.loadgen_node_selector:
        spec["nodeSelector"] = dict(placement.loadgen_node_selector)
    if not placement.cpu_pods_on_gpu_nodes:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": GPU_NODE_LABEL, "operator": "NotIn", "values": ["true"]}]}]}}}
    if placement.tolerations:
        spec["tolerations"] = [toleration_manifest(t) for t in placement.tolerations]
    if placement.priority_class_name:
        spec["priorityClassName"] = placement.priority_class_name
    if stack.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in stack.image_pull_secrets]
    return spec
