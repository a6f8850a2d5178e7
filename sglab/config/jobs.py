"""The pods sglab runs itself in the cluster: the benchmark Job and Locust."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from sglab.core.children import MAX_LOCUST_WORKERS
from sglab.config.base import _CPU, _QUANTITY, Model, number_as_quantity


class _PodRequests(Model):
    """cpu/memory requests of an sglab-run pod, checked as Kubernetes quantities before anything is applied."""

    @field_validator("cpu", "memory", mode="before", check_fields=False)
    @classmethod
    def _number_as_quantity(cls, value: Any) -> Any:
        return number_as_quantity(value)

    @field_validator("cpu", check_fields=False)
    @classmethod
    def _cpu(cls, value: str) -> str:
        if not _CPU.match(value):
            raise ValueError(f"{value!r} is not a CPU quantity (e.g. 2, 1.5 or 500m)")
        return value

    @field_validator("memory", check_fields=False)
    @classmethod
    def _memory(cls, value: str) -> str:
        if not _QUANTITY.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 2Gi)")
        return value


class BenchmarkJob(_PodRequests):
    """The in-cluster benchmark Job declared after the arms (runs again when the comparison changes)."""

    enabled: bool = True
    rerun: str = ""
    image: str | None = None
    timeout_min: Annotated[int, Field(ge=1)] = 60
    quick: bool = False
    cpu: str = "2"
    memory: str = "2Gi"
    # Runs whose result ConfigMaps stay in the cluster (each run is at most ~7 MiB of etcd: docs/in-cluster.md);
    # `sglab results pull` copies every run home and deletes the older ones from the cluster.
    keep_results: Annotated[int, Field(ge=1, le=100)] = 10  # 100 runs are up to ~700 MiB of etcd
    # Record the arms' nodes' GPU labels with the evidence: a ClusterRole (get nodes) and its binding, the stack's
    # only cluster-scoped grant, so an opt-in. Without it the evidence keeps each arm's node name (from its pod).
    read_node_labels: bool = False
    # A lab stack's Job ends by scaling its two arms to 0 (no idle GPUs); `pulumi up --refresh` brings them back.
    scale_arms_to_zero: bool = True

    @field_validator("rerun", mode="before")
    @classmethod
    def _token_as_string(cls, value: Any) -> Any:
        """`pulumi config set --path ...rerun 2` stores a number; any token will do."""
        return number_as_quantity(value)


class LocustSpec(_PodRequests):
    """Locust master + workers in the cluster, driving both arms (Locust's web UI)."""

    enabled: bool = False
    workers: Annotated[int, Field(ge=1, le=MAX_LOCUST_WORKERS)] = 2  # one pod each (sglab.core.children's cap)
    image: str | None = None
    web_login: bool = True
    username: str = "sglab"
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    locustfile: str = Field("loadtests/locustfile.py", description="path inside the project image")
    cpu: str = Field("1", description="CPU request of the master and of each worker")
    memory: str = "1Gi"


class PreflightSpec(_PodRequests):
    """The preflight Job before any GPU-holding object changes (sglab/deploy/preflight.py): in the server image,
    with no GPU, the stack's exact launch commands through that image's own SGLang argument parser, the model
    and draft paths on the volume, and the model's architecture among the ones that SGLang registers."""

    enabled: bool = True
    timeout_min: Annotated[int, Field(ge=1)] = 30  # pulling a 20 GB server image onto a fresh node takes minutes
    cpu: str = "1"
    memory: str = "8Gi"  # importing sglang (torch, transformers) on a CPU
