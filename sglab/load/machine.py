"""What served each arm, recorded with the evidence (ArmInfo.machine): the server's own description and, in
the cluster, the pod behind the arm's Service and its node.

- /get_server_info: the simulator carries its `sglab_sim` block (producer 'simulator', its time scale),
  anything else is a real server ('sglang'); `version` is the version the server reports.
- The image: in the cluster the pod's container image and the digest the kubelet pulled (`imageID`),
  elsewhere the stack's image (its `@sha256:` digest when it names one). A simulator sglab starts runs
  no image.
- In the cluster (the benchmark Job, target 'in-cluster'): the Service named by the arm's URL, the pods
  its selector picks, the node of the first ready one and that node's GPU labels (NVIDIA GPU Feature
  Discovery: nvidia.com/gpu.*, nvidia.com/cuda.*, nvidia.com/mig.*; GKE: cloud.google.com/gke-*). The
  Job's Role may get the two Services and list pods; a ClusterRole lets it get nodes, only where the stack opts
  in (benchmark-job.read-node-labels, sglab/deploy/benchmark_job.py). Whatever cannot be read is a note, never
  a failed run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from sglab.core.untrusted import printable
from sglab.schema.result import ArmMachine
from sglab.sglang.client import ServerInfo

# Node labels kept: the GPU, its driver and CUDA (GFD publishes both `cuda.driver.*` and the newer
# `cuda.driver-version.*`), MIG, and the cloud's accelerator labels.
NODE_LABEL_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig.", "cloud.google.com/gke-accelerator",
                       "cloud.google.com/gke-gpu", "node.kubernetes.io/instance-type")
NODE_LABELS_SKIPPED = ("nvidia.com/gfd.timestamp",)
SIM_BLOCK = "sglab_sim"


def server_identity(info: ServerInfo) -> dict[str, Any]:
    """producer, server_version and (a simulator's) time_scale and node_name from a server's /get_server_info."""
    block = info.raw.get(SIM_BLOCK)
    simulator = isinstance(block, dict) and block.get("simulator") is True
    scale = block.get("time_scale") if simulator else None
    version = info.version
    out = {"producer": "simulator" if simulator else "sglang",
           "server_version": str(version) if isinstance(version, (str, int, float)) and version != "" else None,
           "time_scale": float(scale) if isinstance(scale, (int, float)) and not isinstance(scale, bool) else None}
    node = block.get("node") if simulator else None
    if isinstance(node, str) and node:
        out["node_name"] = printable(node, limit=63)  # the simulated node it reports (untrusted text)
    return out


def image_digest(image: str | None) -> str | None:
    """'sha256:...' of an image reference or a kubelet imageID (`docker-pullable://repo@sha256:...`)."""
    if not image or "@" not in image:
        return image if image and image.startswith("sha256:") else None
    digest = image.rsplit("@", 1)[1]
    return digest if digest.startswith("sha256:") else None


def gpu_labels(labels: dict[str, str] | None) -> dict[str, str]:
    return {k: str(v) for k, v in sorted((labels or {}).items())
            if k.startswith(NODE_LABEL_PREFIXES) and k not in NODE_LABELS_SKIPPED}


def _service_of(url: str, namespace: str) -> tuple[str, str] | None:
    """(service, namespace) of an in-cluster Service URL: `http://NAME[.NAMESPACE[.svc...]]:PORT`."""
    host = urlparse(url).hostname or ""
    parts = host.split(".")
    if not parts[0] or host.replace(".", "").isdigit():
        return None
    return parts[0], parts[1] if len(parts) > 1 and parts[1] != "svc" else namespace


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions or []) if pod.status is not None else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def cluster_placement(url: str, *, core_api: Any = None, namespace: str | None = None) -> dict[str, Any]:
    """pod, node_name, image, image_digest, node_labels and notes of the arm behind `url` (in the cluster)."""
    notes: list[str] = []
    try:
        core, namespace = _api(core_api, namespace)
    except Exception as exc:  # not in a cluster, or no credentials: nothing to read
        return {"notes": [f"the Kubernetes API is not reachable ({type(exc).__name__}: {exc})"]}
    found = _service_of(url, namespace)
    if found is None:
        return {"notes": [f"{url} does not name a Service, so its pods are not known"]}
    service, namespace = found
    step = "get Service"
    try:
        selector = core.read_namespaced_service(service, namespace).spec.selector or {}
        step = "list pods"
        pods = core.list_namespaced_pod(namespace, label_selector=",".join(f"{k}={v}" for k, v in
                                                                            sorted(selector.items()))).items
        chosen = sorted((p for p in pods if _ready(p)), key=lambda p: p.metadata.name) or \
            sorted(pods, key=lambda p: p.metadata.name)
        if not chosen:
            return {"notes": [f"no pod behind Service {namespace}/{service}"]}
        pod = chosen[0]
        if len(chosen) > 1:
            notes.append(f"{len(chosen)} pods behind Service {namespace}/{service}; recorded {pod.metadata.name}")
        out: dict[str, Any] = {"pod": pod.metadata.name, "node_name": pod.spec.node_name}
        statuses = (pod.status.container_statuses or []) if pod.status is not None else []
        if statuses:
            out["image"], out["image_source"] = statuses[0].image, "pod"
            out["image_digest"] = image_digest(statuses[0].image_id) or image_digest(statuses[0].image)
        if pod.spec.node_name:
            try:
                out["node_labels"] = gpu_labels(core.read_node(pod.spec.node_name).metadata.labels)
            except Exception as exc:  # no node reader (a tenant-scoped stack): the node's name is still recorded
                reason = getattr(exc, "reason", None) or type(exc).__name__
                notes.append(f"cannot get node {pod.spec.node_name} for its GPU labels: {reason} (the stack "
                             "grants it with benchmark-job.read-node-labels: true)")
        out["notes"] = notes
        return out
    except Exception as exc:  # Forbidden, NotFound, timeouts: a note, the run goes on
        reason = getattr(exc, "reason", None) or type(exc).__name__
        return {"notes": notes + [f"cannot {step} for {url}: {reason} (the benchmark Job's RBAC reads the arms' "
                                  "Services, pods and nodes)"]}


def _api(core_api: Any, namespace: str | None) -> tuple[Any, str]:
    if core_api is not None:
        return core_api, namespace or "default"
    from kubernetes import client, config

    from sglab.results.sink import current_namespace

    config.load_incluster_config()
    return client.CoreV1Api(), namespace or current_namespace()


def arm_machine(*, url: str | None, target_kind: str, declared_image: str,
                info: ServerInfo | None, info_error: str | None = None,
                placement: Callable[[str], dict[str, Any]] = cluster_placement) -> ArmMachine:
    """One arm's machine record: the server's identity, and its image and node as far as they are known."""
    fields: dict[str, Any] = {"notes": []}
    if info is not None:
        fields.update(server_identity(info))
    elif info_error:
        fields["notes"].append(f"cannot read server info: {info_error}")
    if target_kind == "sim":
        fields["producer"] = "simulator"  # sglab started it: whatever it says, no image runs it
    else:
        fields.update(image=declared_image, image_source="stack", image_digest=image_digest(declared_image))
    if target_kind == "in-cluster" and url:
        found = placement(url)
        fields["notes"] += found.pop("notes", [])
        fields.update(found)
    return ArmMachine(**fields)
