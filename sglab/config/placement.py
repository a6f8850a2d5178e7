"""Where each arm runs and how it is rolled out: node placement, pod resources, probes, disruption, network."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sglab.config.base import (_DNS_SUBDOMAIN, CONTAINER_SYSTEM_DIRS, ByteQuantity, CpuQuantity, KeyedValueError,
                               Model, _check_labels, dir_problem)

_EXTENDED_RESOURCE = re.compile(r"^(?=.{1,253}/)[a-z0-9]([-a-z0-9.]*[a-z0-9])?/"
                                r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class Toleration(Model):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

    @model_validator(mode="after")
    def _kubernetes_rules(self) -> "Toleration":
        if self.operator == "Exists" and self.value:
            raise KeyedValueError("value", "operator Exists matches any value; remove value (or use operator: Equal)")
        if self.key is None and self.operator != "Exists":
            raise KeyedValueError("operator", "a toleration without key must use operator: Exists")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise KeyedValueError("toleration-seconds", "toleration-seconds only applies to effect: NoExecute")
        return self


class Rdma(Model):
    """`placement.rdma`: the fabric a multi-node server's ranks use, so NCCL runs over InfiniBand/RoCE instead of
    falling back to TCP sockets. Rendered into every pod of both arms' LeaderWorkerSet groups, identically.

    Two working shapes (docs/deploy.md "Multi-node servers"): a device plugin (the NVIDIA Network Operator's
    RDMA shared device plugin or SR-IOV) exposes `resource` (e.g. rdma/rdma_shared_device_a, count per pod) and a
    Multus NetworkAttachmentDefinition attaches the RDMA interfaces (`networks`); or `host-network: true` puts
    the pod on the node's own interfaces and mounts /dev/infiniband (hostPath: the Pod Security Standards call
    that privileged). Either way the container keeps `drop: [ALL]` and adds only IPC_LOCK (registering memory
    with the NIC needs an unlimited memlock)."""

    resource: str | None = None
    count: Annotated[int, Field(ge=1)] = 1
    networks: list[str] = Field(default_factory=list)
    host_network: bool = False
    # NCCL_IB_HCA (e.g. "=mlx5_0,mlx5_1" or "^mlx5_4"), NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME (the bootstrap
    # and Gloo interface), NCCL_IB_GID_INDEX (RoCE v2: usually 3).
    ib_hca: str | None = None
    socket_ifname: str | None = None
    ib_gid_index: Annotated[int, Field(ge=0)] | None = None

    @field_validator("resource")
    @classmethod
    def _resource_name(cls, value: str | None) -> str | None:
        if value is not None and not _EXTENDED_RESOURCE.match(value):
            raise ValueError(f"{value!r} is not an extended resource name; write <domain>/<name>, e.g. "
                             "rdma/rdma_shared_device_a or nvidia.com/hostdev")
        return value

    @field_validator("networks")
    @classmethod
    def _network_names(cls, names: list[str]) -> list[str]:
        for name in names:
            ns, _, attachment = name.rpartition("/")
            attachment = attachment.split("@", 1)[0]
            if (ns and not _DNS_SUBDOMAIN.match(ns)) or not _DNS_SUBDOMAIN.match(attachment):
                raise ValueError(f"{name!r} is not a NetworkAttachmentDefinition ([namespace/]name[@interface])")
        return names

    @model_validator(mode="after")
    def _one_shape(self) -> "Rdma":
        if self.host_network and self.networks:
            raise KeyedValueError("networks", "host-network puts the pod on the node's interfaces; secondary networks "
                                  "(Multus) do not apply to it; use one of the two")
        if not self.host_network and self.resource is None:
            raise KeyedValueError("resource", "without host-network the pod reaches the RDMA devices only through a "
                                  "device plugin; name its resource (e.g. rdma/rdma_shared_device_a), or set "
                                  "host-network: true")
        if self.socket_ifname is None:
            raise KeyedValueError("socket-ifname", "name the interface NCCL's bootstrap and Gloo use between the ranks "
                                  "(NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME; e.g. eth0, or net1 for a Multus "
                                  "attachment); NCCL would otherwise pick one itself, possibly the wrong one")
        return self

    def env(self) -> dict[str, str]:
        """The fabric's variables, the same in both arms' env (and so in their config hashes)."""
        out = {"NCCL_SOCKET_IFNAME": self.socket_ifname or "", "GLOO_SOCKET_IFNAME": self.socket_ifname or ""}
        if self.ib_hca is not None:
            out["NCCL_IB_HCA"] = self.ib_hca
        if self.ib_gid_index is not None:
            out["NCCL_IB_GID_INDEX"] = str(self.ib_gid_index)
        return dict(sorted(out.items()))


class Placement(Model):
    """Where each arm runs: whole 8-GPU nodes, never the same node for both arms."""

    gpus_per_node: Annotated[int, Field(ge=0)] = 8
    nodes: Annotated[int, Field(ge=1)] = 1
    # nodes > 1: each arm is a LeaderWorkerSet; rank 0 listens here for the other ranks (--dist-init-addr).
    dist_init_port: Annotated[int, Field(ge=1, le=65535)] = 20000
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    separate_nodes: bool = True
    priority_class_name: str | None = None
    runtime_class_name: str | None = None
    # GPU nodes this stack may hold at once (the capacity preflight, sglab/deploy/capacity.py); unset: unchecked.
    max_nodes: Annotated[int, Field(ge=1, le=10_000)] | None = None
    rdma: Rdma | None = None
    # The benchmark Job, Locust and the preflight get the tolerations and priority class above; a node selector of
    # their own (e.g. the CPU pool) only if given here.
    loadgen_node_selector: dict[str, str] = Field(default_factory=dict)
    # Those CPU-only pods (and the live judge, the watch) keep off nodes labelled nvidia.com/gpu.present=true
    # unless this is true (a cluster of GPU nodes only).
    cpu_pods_on_gpu_nodes: bool = False
    # A Kueue LocalQueue of the namespace: the servers' Deployments and the benchmark Job carry its
    # kueue.x-k8s.io/queue-name label, so the cluster's quota admits them (unset: no Kueue).
    kueue_queue: str | None = None

    @field_validator("loadgen_node_selector")
    @classmethod
    def _loadgen_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return _check_labels(labels)

    def fabric_env(self) -> dict[str, str]:
        return self.rdma.env() if self.rdma is not None else {}

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return _check_labels(labels)

    @field_validator("priority_class_name", "runtime_class_name", "kueue_queue")
    @classmethod
    def _object_name(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a valid Kubernetes object name (lowercase letters, digits, '-', '.')")
        return value


class Resources(Model):
    """Per server pod. Requests unset: cpu-per-gpu x GPUs and memory-per-gpu-gi x GPUs (an 8-GPU node:
    64 CPUs, 1024Gi, /dev/shm included). Memory is limited to its request.

    guaranteed (unset: on, except in a stack marked production): the CPU limit equals the request, so the pod
    is in the Guaranteed QoS class and, under the kubelet's static CPU manager, gets whole cores of its own (an
    integer CPU count is needed for that); a Burstable server shares cores with whatever else lands on the node,
    a noise source for an A/B. Off: no CPU limit unless cpu-limit says one."""

    shm_size: ByteQuantity = "64Gi"
    cpu: CpuQuantity | None = None
    memory: ByteQuantity | None = None
    cpu_limit: CpuQuantity | None = None
    cpu_per_gpu: Annotated[int, Field(ge=1)] = 8
    memory_per_gpu_gi: Annotated[int, Field(ge=1)] = 128
    guaranteed: bool | None = None

    @model_validator(mode="after")
    def _guaranteed(self) -> "Resources":
        if self.guaranteed and self.cpu_limit is not None and self.cpu_limit != self.cpu:
            raise KeyedValueError("cpu-limit", f"guaranteed is true, so the CPU limit is the request; cpu-limit "
                                  f"{self.cpu_limit} differs from cpu {self.cpu}; remove cpu-limit (or set "
                                  "guaranteed: false)")
        if self.guaranteed and self.cpu is not None and not self.cpu.isdigit():
            raise KeyedValueError("cpu", f"guaranteed is true but cpu is {self.cpu}: the static CPU manager gives "
                                  "exclusive cores only to a whole number of CPUs; use an integer (e.g. 64)")
        return self


class PodSecurity(Model):
    """Server pods' security context. The image's user is kept unless run-as-user names a non-root uid
    (lmsysorg/sglang runs as root with its caches under /root). The root filesystem is read-only; each
    writable path is an emptyDir: /tmp (SGLang's ZMQ ipc sockets, temp files), /root/.cache (the SGLang
    JIT root, torch compile, FlashInfer JIT, HF modules of --trust-remote-code), /root/.triton (Triton)."""

    run_as_user: int | None = None
    read_only_root_filesystem: bool = True
    writable_paths: list[str] = Field(default_factory=lambda: ["/tmp", "/root/.cache", "/root/.triton"])
    writable_size_limit: ByteQuantity = "64Gi"

    @field_validator("run_as_user", mode="before")
    @classmethod
    def _non_root(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{value!r} is not a non-root uid (0 is root); set an integer >= 1, or leave "
                             "run-as-user unset to keep the image's user")
        return value

    @field_validator("writable_paths")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path.startswith("/") or path == "/" or any(c.isspace() for c in path):
                raise ValueError(f"{path!r} is not an absolute directory path; write it like /tmp or /root/.cache")
            problem = dir_problem(path, CONTAINER_SYSTEM_DIRS, "/tmp or /root/.cache")
            if problem:  # an emptyDir there would hide the image's own files
                raise ValueError(problem)
        if len(set(paths)) != len(paths):
            raise ValueError(f"{paths} lists a path twice; list each directory once")
        return paths

    @property
    def writable_storage(self) -> str:
        """The ephemeral storage the writable emptyDirs may fill together (each up to writable-size-limit): what
        a server pod requests, so the scheduler counts it and the kubelet evicts no neighbour for it."""
        number, unit = re.fullmatch(r"([0-9.]+)(\D*)", self.writable_size_limit).groups()  # type: ignore[union-attr]
        total = Decimal(number) * len(self.writable_paths)
        return f"{total.normalize():f}{unit}"


class Rollout(Model):
    """Probes and timeouts sized for very large models (loading 1T params can take 20+ minutes)."""

    startup_timeout_min: Annotated[int, Field(ge=1)] = 60
    probe_period_s: Annotated[int, Field(ge=1)] = 10
    readiness_path: str = "/health_generate"
    liveness_path: str = "/health"
    # Above SGLang's own 20 s SGLANG_HEALTH_CHECK_TIMEOUT, so a slow /health_generate is not a probe failure.
    probe_timeout_s: Annotated[int, Field(ge=1)] = 25
    liveness_failure_threshold: Annotated[int, Field(ge=1)] = 6
    pulumi_timeout_min: Annotated[int, Field(ge=1)] = 90
    # How long a stopping server may finish its requests after SIGTERM (a streamed reply can run for minutes).
    termination_grace_period_s: Annotated[int, Field(ge=1, le=86_400)] = 60
    # Seconds the pod keeps serving after it is marked for deletion, before SIGTERM: the Services' endpoints and
    # the gateway drop it meanwhile, so no new request reaches a server that is shutting down (0: none).
    pre_stop_drain_s: Annotated[int, Field(ge=0, le=3_600)] = 0

    @field_validator("readiness_path", "liveness_path")
    @classmethod
    def _http_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} is not an HTTP path; start it with / (e.g. /health_generate)")
        return value

    @property
    def progress_deadline_s(self) -> int:
        """The Deployment's progressDeadlineSeconds: as long as Pulumi waits (never below the startup timeout), so
        neither Kubernetes nor an Argo CD health check calls a loading server stuck at the default 600 s."""
        return self.pulumi_timeout_min * 60

    @property
    def startup_failure_threshold(self) -> int:
        """Startup probe failures allowed so that failures x period covers startup-timeout-min."""
        return -(-self.startup_timeout_min * 60 // self.probe_period_s)

    @model_validator(mode="after")
    def _timeouts(self) -> "Rollout":
        if self.pulumi_timeout_min < self.startup_timeout_min:
            raise KeyedValueError(
                "pulumi-timeout-min",
                f"pulumi-timeout-min ({self.pulumi_timeout_min}) is shorter than startup-timeout-min "
                f"({self.startup_timeout_min}): pulumi up would give up while the model is still loading; "
                "raise pulumi-timeout-min"
            )
        if self.pre_stop_drain_s >= self.termination_grace_period_s:
            raise KeyedValueError(
                "pre-stop-drain-s",
                f"pre-stop-drain-s ({self.pre_stop_drain_s}) is not shorter than termination-grace-period-s "
                f"({self.termination_grace_period_s}): the drain would use up the whole grace period and the server "
                "would be killed without a clean shutdown; raise termination-grace-period-s"
            )
        return self


class DisruptionBudget(Model):
    """A PodDisruptionBudget per arm, shaped to the lifecycle: outside a benchmark `max-unavailable` (1: a drain, a
    node upgrade, the autoscaler or a GPU-driver rollout may evict the server); while the benchmark Job measures,
    its guard (sglab/deploy/disruption_guard.py) holds the budget at 0 so a drain waits for the run, then lowers
    it again. unhealthyPodEvictionPolicy is always AlwaysAllow: a server that is not ready never blocks a drain."""

    enabled: bool = True
    max_unavailable: Annotated[int, Field(ge=0)] = 1
    hold_during_benchmark: bool = True


class NetworkPolicySpec(Model):
    enabled: bool = True
    allowed_from: dict[str, str] = Field(default_factory=lambda: {"sglab/role": "loadgen"})

    @field_validator("allowed_from")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return _check_labels(labels)

    @model_validator(mode="after")
    def _someone_allowed(self) -> "NetworkPolicySpec":
        if self.enabled and not self.allowed_from:
            raise KeyedValueError("allowed-from", "allowed-from is empty, so no load generator could reach the "
                                                  "servers; give the load generators' labels or set enabled: false")
        return self
