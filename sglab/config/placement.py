"""Where each arm runs and how it is rolled out: node placement, pod resources, probes, disruption, network."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sglab.config.base import _CPU, _DNS_SUBDOMAIN, _QUANTITY, KeyedValueError, Model, _check_labels, number_as_quantity
from sglab.config.strict import CONTAINER_SYSTEM_DIRS, dir_problem


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

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return _check_labels(labels)

    @field_validator("priority_class_name", "runtime_class_name")
    @classmethod
    def _object_name(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a valid Kubernetes object name (lowercase letters, digits, '-', '.')")
        return value


class Resources(Model):
    """Per server pod. Requests unset: cpu-per-gpu x GPUs and memory-per-gpu-gi x GPUs (an 8-GPU node:
    64 CPUs, 1024Gi, /dev/shm included). Memory is limited to its request; CPU only with cpu-limit
    (CFS throttling adds latency noise to a benchmark)."""

    shm_size: str = "64Gi"
    cpu: str | None = None
    memory: str | None = None
    cpu_limit: str | None = None
    cpu_per_gpu: Annotated[int, Field(ge=1)] = 8
    memory_per_gpu_gi: Annotated[int, Field(ge=1)] = 128

    @field_validator("shm_size", "memory", "cpu", "cpu_limit", mode="before")
    @classmethod
    def _number_as_quantity(cls, value: Any) -> Any:
        return number_as_quantity(value)

    @field_validator("shm_size", "memory")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None and not _QUANTITY.match(str(value)):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 64Gi)")
        return value

    @field_validator("cpu", "cpu_limit")
    @classmethod
    def _cpu(cls, value: str | None) -> str | None:
        if value is not None and not _CPU.match(value):
            raise ValueError(f"{value!r} is not a CPU quantity (e.g. 2, 1.5 or 500m)")
        return value


class PodSecurity(Model):
    """Server pods' security context. The image's user is kept unless run-as-user names a non-root uid
    (lmsysorg/sglang runs as root with its caches under /root). The root filesystem is read-only; each
    writable path is an emptyDir: /tmp (SGLang's ZMQ ipc sockets, temp files), /root/.cache (the SGLang
    JIT root, torch compile, FlashInfer JIT, HF modules of --trust-remote-code), /root/.triton (Triton)."""

    run_as_user: int | None = None
    read_only_root_filesystem: bool = True
    writable_paths: list[str] = Field(default_factory=lambda: ["/tmp", "/root/.cache", "/root/.triton"])
    writable_size_limit: str = "64Gi"

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

    @field_validator("writable_size_limit")
    @classmethod
    def _size(cls, value: str) -> str:
        if not _QUANTITY.match(str(value)):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 64Gi)")
        return value


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

    @field_validator("readiness_path", "liveness_path")
    @classmethod
    def _http_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} is not an HTTP path; start it with / (e.g. /health_generate)")
        return value

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
        return self


class DisruptionBudget(Model):
    """A PodDisruptionBudget per arm: a node drain must not evict a server mid-benchmark (reloading takes minutes)."""

    enabled: bool = True
    max_unavailable: Annotated[int, Field(ge=0)] = 0


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
