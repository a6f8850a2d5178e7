"""The capacity preflight: will the GPU-holding servers of a `pulumi up` fit the nodes the stack may hold?

Pulumi creates new resources before it deletes the ones they replace (pulumi/pulumi#9979), so during an update
every server of the old shape and every new one can exist at once. A stack's servers are the baseline and its
candidate slots (sglab/sweep/arms.py): a sweep wave, the next wave and the confirmation A/B all use the
same `parallel-arms` slots, so moving between them replaces servers in place and the most that can ever exist
at once is the baseline plus every slot. That many servers, each `placement.nodes` whole GPU nodes, must fit in
`placement.max-nodes` (or what the caller is told), or new servers stay Pending on `Insufficient nvidia.com/gpu`
while the old ones are never deleted.

A serving stack (`sglab:serving`, sglab/serving/objects.py) holds its standing control and an Argo Rollouts
Rollout. With the Gateway API traffic router the stable pods all stay until the canary is promoted
(`dynamicStableScale: false`: an abort reloads nothing), so at full promotion the new revision's `replicas`
run beside the old one's: twice `replicas`. Routed by replica count, Argo keeps at most `replicas +
max-surge` pods.

The driver check: the servers' image is a CUDA build (the pinned release's is CUDA 13, `ImageRef.cuda_major`), and
a CUDA major runs only on an NVIDIA driver at least MIN_DRIVER_MAJOR. A server scheduled on an older driver
never starts, so the GPU nodes the servers could land on (node selector, tolerations, whole GPU nodes) are read
before anything is declared, and one whose GPU Feature Discovery label says an older driver stops `pulumi up`.
A node without the label, an image that names no CUDA build, or nodes that cannot be read (a namespace-scoped
deployer may not list nodes) are warnings: not checked, said.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sglab.config.arms import baseline_arm, candidate_arm
from sglab.config.placement import Placement, Toleration
from sglab.config.stack import StackConfig
from sglab.sglang.flags import CUDA12_IMAGE, parse_image
from sglab.sweep.arms import slot_count
from sglab.core.errors import ConfigError
from sglab.core.paths import stack_path

KEY = "placement.max-nodes"
# CUDA major -> the oldest NVIDIA driver branch that runs it (NVIDIA's CUDA minor-version compatibility table,
# docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html: 13.x >= 580, 12.x >= 525)
MIN_DRIVER_MAJOR = {13: 580, 12: 525}
# GPU Feature Discovery's driver-major labels: the current one, then the deprecated one an older GFD sets alone
# (NVIDIA/k8s-device-plugin internal/lm/nvml.go sets both)
DRIVER_MAJOR_LABELS = ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver.major")
GPU_RESOURCE = "nvidia.com/gpu"  # what a server requests, gpus-per-node of it
# An init container with restartPolicy Always (the benchmark Job's disruption guard) runs as a sidecar from 1.29.
NATIVE_SIDECAR = (1, 29)
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")  # PreferNoSchedule only steers the scheduler
NAMED_NODES = 10  # nodes named in a message; more are counted


@dataclass(frozen=True)
class Capacity:
    servers: int  # GPU-holding servers that may exist at once
    nodes_per_server: int
    max_nodes: int | None
    probe: bool  # the NCCL probe may ask for one more free node beside them

    @property
    def nodes(self) -> int:
        return self.servers * self.nodes_per_server

    def describe(self) -> str:
        line = (f"capacity: up to {self.servers} servers x {self.nodes_per_server} node"
                f"{'s' if self.nodes_per_server > 1 else ''} = {self.nodes} GPU nodes at once")
        if self.max_nodes is None:
            return line + f" ({KEY} unset: not checked)"
        return line + f" of {KEY} {self.max_nodes}"


def rollout_peak(serving) -> int:
    """The most pods of the serving Rollout that exist at once during a rollout (see the module docstring)."""
    if serving.traffic_router == "gateway-api":
        return 2 * serving.replicas
    return serving.replicas + serving.max_surge


def capacity(stack: StackConfig, max_nodes: int | None = None) -> Capacity | None:
    """The plan's peak, or None when the servers hold no GPUs (the simulator)."""
    if stack.placement.gpus_per_node == 0:
        return None
    if stack.serving is not None:
        servers = stack.serving.control.replicas + rollout_peak(stack.serving)
    else:
        servers = 1 + (slot_count(stack) if stack.sweep is not None else 1)
    return Capacity(servers, stack.placement.nodes, max_nodes or stack.placement.max_nodes, stack.probe.enabled)


def check_capacity(stack: StackConfig, stack_name: str,
                   max_nodes: int | None = None) -> tuple[Capacity | None, list[str]]:
    """The capacity and its warnings; raises ConfigError (exit 2) for a plan that could deadlock."""
    cap = capacity(stack, max_nodes)
    if cap is None or cap.max_nodes is None:
        return cap, []
    if cap.nodes > cap.max_nodes:
        if stack.sweep is not None:
            fit = cap.max_nodes // cap.nodes_per_server - 1
            fix = (f"set sweep.parallel-arms to at most {fit} (the baseline takes one server), or raise {KEY} if "
                   "the pool has the nodes" if fit >= 1 else f"raise {KEY}: even one slot beside the baseline "
                   "needs more nodes")
        elif stack.serving is not None:
            fix = (f"give the stack {cap.nodes} GPU nodes ({KEY}); or lower serving.replicas, or route by replica "
                   "count (serving.traffic-router: replicas, whose peak is replicas + serving.max-surge)")
        else:
            fix = f"give the stack {cap.nodes} GPU nodes ({KEY}), or use a smaller placement"
        why = ("during a rollout Argo Rollouts runs the new revision beside the stable one (the standing control "
               "too), so the canary's pods would stay Pending and the rollout would never finish"
               if stack.serving is not None else
               "Pulumi creates new servers before deleting old ones, so the new ones would stay Pending and the old "
               "ones would never be deleted")
        raise ConfigError(stack_path(stack_name), KEY,
                          f"the servers need {cap.nodes} GPU nodes at once ({cap.servers} servers of "
                          f"{cap.nodes_per_server} node{'s' if cap.nodes_per_server > 1 else ''}), more than "
                          f"{KEY} {cap.max_nodes}: {why}", fix)
    warnings = []
    if cap.probe and cap.nodes + 1 > cap.max_nodes:
        warnings.append(f"the NCCL probe needs a free GPU node beside the {cap.servers} servers, and {KEY} "
                        f"{cap.max_nodes} leaves none: a probe requested (probe.rerun) while the servers run waits "
                        "until probe.timeout-min and fails (the servers are not affected); run it on a fresh "
                        "deploy, or with `sglab probe nccl --stack S | kubectl apply -f -` while a node is free")
    return cap, warnings


@dataclass(frozen=True)
class Taint:
    key: str
    value: str | None
    effect: str


@dataclass(frozen=True)
class Node:
    """A cluster node as the driver check reads it."""

    name: str
    labels: Mapping[str, str]
    gpus: int = 0  # allocatable nvidia.com/gpu
    taints: tuple[Taint, ...] = ()

    @property
    def driver_major(self) -> int | None:
        for label in DRIVER_MAJOR_LABELS:
            value = self.labels.get(label, "")
            if value.isdigit():
                return int(value)
        return None


def _tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' matching: an empty key with Exists tolerates every taint; an effect, if given, must match."""
    if toleration.effect is not None and toleration.effect != taint.effect:
        return False
    if toleration.key is None:
        return toleration.operator == "Exists"
    return toleration.key == taint.key and (toleration.operator == "Exists"
                                            or (toleration.value or "") == (taint.value or ""))


def landing_nodes(placement: Placement, nodes: Sequence[Node]) -> list[Node]:
    """The nodes a server could be scheduled on: every node-selector label, gpus-per-node allocatable GPUs, and
    no NoSchedule/NoExecute taint the stack does not tolerate."""
    return [n for n in nodes
            if all(n.labels.get(k) == v for k, v in placement.node_selector.items())
            and n.gpus >= placement.gpus_per_node
            and all(any(_tolerates(t, taint) for t in placement.tolerations)
                    for taint in n.taints if taint.effect in BLOCKING_EFFECTS)]


def _named(names: Sequence[str]) -> str:
    more = len(names) - NAMED_NODES
    return ", ".join(names[:NAMED_NODES]) + (f" and {more} more" if more > 0 else "")


def check_drivers(stack: StackConfig, stack_name: str, nodes: Sequence[Node]) -> tuple[str | None, list[str]]:
    """The driver check's summary (None when nothing was checked) and warnings; raises ConfigError (exit 2) when
    a node the servers could land on runs a driver older than their image's CUDA build needs."""
    if stack.placement.gpus_per_node == 0:
        return None, []
    warnings: list[str] = []
    builds: dict[str, int] = {}  # image -> CUDA major
    for image in sorted({baseline_arm(stack).image, candidate_arm(stack).image}):
        cuda = parse_image(image).cuda_major
        if cuda in MIN_DRIVER_MAJOR:
            builds[image] = cuda
        else:
            warnings.append(f"driver: image {image} names no CUDA build this check knows (a -cu130 or -cu129 tag, "
                            "or the pinned release's plain tag): the nodes' driver is not checked for it")
    if not builds:
        return None, warnings
    image = max(builds, key=lambda i: MIN_DRIVER_MAJOR[builds[i]])
    cuda = builds[image]
    minimum = MIN_DRIVER_MAJOR[cuda]
    landing = landing_nodes(stack.placement, nodes)
    if not landing:
        warnings.append("driver: no node the servers may land on is there now (node-selector, tolerations, "
                        "gpus-per-node GPUs; a pool scaled to zero, say): not checked")
        return None, warnings
    old = [n for n in landing if n.driver_major is not None and n.driver_major < minimum]
    if old:
        key = "image" if image == stack.image else "candidate.confounds.image"
        newest = max(n.driver_major or 0 for n in old)
        fixes = [f"upgrade the driver on those nodes to R{minimum} or newer (the GPU Operator's driver.version)"]
        if cuda != 12 and newest >= MIN_DRIVER_MAJOR[12]:
            fixes.append(f"or use the image built for CUDA 12, which R{MIN_DRIVER_MAJOR[12]} and newer run "
                         f"({CUDA12_IMAGE})")
        fixes.append("or keep the servers off them with placement.node-selector (a label only the newer nodes carry)")
        raise ConfigError(stack_path(stack_name), key,
                          f"{len(old)} of {len(landing)} GPU nodes the servers may land on run an NVIDIA driver "
                          f"older than R{minimum}, the oldest that runs CUDA {cuda} (image {image}): "
                          f"{_named([f'{n.name} (R{n.driver_major})' for n in old])}; a server scheduled there "
                          "cannot start (CUDA finds the driver too old)", "; ".join(fixes))
    unlabelled = [n.name for n in landing if n.driver_major is None]
    if unlabelled:
        warnings.append(f"driver: not checked on {len(unlabelled)} of {len(landing)} GPU nodes the servers may land "
                        f"on ({_named(unlabelled)}): no {' or '.join(DRIVER_MAJOR_LABELS)} label (GPU Feature "
                        f"Discovery sets them; GKE's managed driver does not); CUDA {cuda} needs R{minimum} or newer")
    return (f"driver: {len(landing) - len(unlabelled)} of {len(landing)} GPU nodes the servers may land on run "
            f"R{minimum} or newer (CUDA {cuda}, image {image})"), warnings


def _load_kubeconfig(context: str | None, kubeconfig: str | None) -> None:
    """The kubeconfig Pulumi's Kubernetes provider uses (`kubernetes:kubeconfig`, a path or the file's contents,
    else $KUBECONFIG or ~/.kube/config; `kubernetes:context`)."""
    import yaml
    from kubernetes import config

    if kubeconfig and not Path(kubeconfig).expanduser().is_file():
        config.load_kube_config_from_dict(yaml.safe_load(kubeconfig), context=context)
    else:
        config.load_kube_config(config_file=kubeconfig and str(Path(kubeconfig).expanduser()), context=context)


def read_cluster_version(context: str | None = None, kubeconfig: str | None = None) -> str:
    """The API server's gitVersion (`/version`: any authenticated deployer may read it)."""
    from kubernetes import client

    _load_kubeconfig(context, kubeconfig)
    return str(client.VersionApi().get_code(_request_timeout=30).git_version)


def read_cluster_nodes(context: str | None = None, kubeconfig: str | None = None) -> list[Node]:
    """Every node's labels, allocatable GPUs and taints, through the kubeconfig Pulumi's Kubernetes provider uses.
    Listing nodes needs cluster-scoped `list nodes`; the caller turns any failure into "not checked"."""
    from kubernetes import client

    _load_kubeconfig(context, kubeconfig)
    return [Node(n.metadata.name, dict(n.metadata.labels or {}),
                 int((n.status.allocatable or {}).get(GPU_RESOURCE, "0")),
                 tuple(Taint(t.key, t.value, t.effect) for t in (n.spec.taints or ())))
            for n in client.CoreV1Api().list_node(_request_timeout=30).items]


def kubernetes_version(git_version: str) -> tuple[int, int] | None:
    """(major, minor) of an API server's gitVersion (`v1.28.15-gke.1020000`, `v1.31.2+k3s1`), or None."""
    parts = git_version.strip().lstrip("v").split(".")
    if len(parts) < 2 or not parts[0].isdigit():
        return None
    minor = "".join(itertools.takewhile(str.isdigit, parts[1]))
    return (int(parts[0]), int(minor)) if minor else None


def check_native_sidecar(stack: StackConfig, stack_name: str, git_version: str) -> None:
    """Raise ConfigError (exit 2) when the benchmark Job's guard is a native sidecar the cluster predates: an API
    server before 1.29 drops an init container's restartPolicy (1.28: behind an alpha feature gate), so the guard
    would be a plain init container that never ends, and the benchmark would never start."""
    version = kubernetes_version(git_version)
    if not stack.benchmark_runs_guard or version is None or version >= NATIVE_SIDECAR:
        return
    need = ".".join(map(str, NATIVE_SIDECAR))
    raise ConfigError(stack_path(stack_name), "benchmark-job",
                      f"the cluster's API server is {git_version} ({version[0]}.{version[1]}), and the benchmark "
                      f"Job's disruption guard is a native sidecar, which Kubernetes runs from {need}: before it, "
                      "the guard would never end and the benchmark never start",
                      f"run on Kubernetes {need} or newer; or drop the guard: disruption-budget.hold-during-benchmark:"
                      " false and benchmark-job.scale-arms-to-zero: false (a drain may then evict a server "
                      "mid-run, and the GPUs stay held after it)")
