"""What a shared cluster asks of a stack, and the pods sglab runs there itself: whose namespace it is, images a
node can pull, a cache for hub weights, the rules a stack marked production must follow (docs/deploy.md), and
the benchmark Job, Locust and the preflight Job with their requests checked as Kubernetes quantities.

`cluster_checks(stack)` is called by StackConfig's cross-section checks, so `sglab validate`, `sglab render`
and `pulumi up` refuse the same things with the same message.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sglab import __version__
from sglab.config.base import (_DNS_LABEL, _DNS_SUBDOMAIN, ByteQuantity, CpuQuantity, KeyedValueError, Model,
                               number_as_text)
from sglab.core.children import MAX_LOCUST_WORKERS


# Where `make image` publishes the project image (sglab + Locust + loadtests/), and so what every stack pulls
# unless sglab:project-image names another. One declaration: the Makefile asks `python -m sglab.deploy.naming`.
PROJECT_IMAGE_REPOSITORY = "ghcr.io/sglab-dev/sglab"
DEFAULT_PROJECT_IMAGE = f"{PROJECT_IMAGE_REPOSITORY}:{__version__}"

PssLevel = Literal["privileged", "baseline", "restricted"]
PSS_LEVELS: tuple[PssLevel, ...] = ("restricted", "baseline", "privileged")  # strictest first


class NamespaceSpec(Model):
    """`sglab:namespace`: a name (`sglab:namespace: sglab-lab`), or the name and who owns it.

    create unset: the stack creates the namespace, except a stack marked production (sglab:production), whose
    namespace belongs to the platform (it must exist; the stack never labels or deletes it). protect unset: a
    namespace the stack creates is protected from `pulumi destroy` when it holds something that must outlive
    the stack (a PersistentVolumeClaim of weights or the HF cache, benchmark or probe results).
    pod-security: the Pod Security Standard level the created namespace enforces; auto is the strictest level
    every pod the stack renders meets."""

    name: str = "sglab"
    create: bool | None = None
    protect: bool | None = None
    pod_security: Literal["auto", "privileged", "baseline", "restricted"] = "auto"

    @field_validator("name", mode="before")
    @classmethod
    def _number_as_name(cls, value: Any) -> Any:
        return number_as_text(value)

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a valid namespace (lowercase letters, digits and '-', max 63)")
        return value


def namespace_input(value: Any) -> Any:
    """`sglab:namespace: NAME` is shorthand for `{name: NAME}` (a bad name is reported at sglab:namespace)."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        name = str(value)
        if not _DNS_LABEL.match(name):
            raise ValueError(f"{name!r} is not a valid namespace (lowercase letters, digits and '-', max 63)")
        return {"name": name}
    return value


class HfCache(Model):
    """`sglab:hf-cache`: where SGLang keeps a checkpoint it downloads from the Hugging Face Hub (model.path is a
    hub id, not a path). A ~600 GB checkpoint does not fit the pods' writable emptyDirs and would be fetched
    again by every new pod: it goes to a PersistentVolumeClaim both arms share (ReadWriteMany, as the arms run on
    different nodes). claim-name: an existing claim; otherwise the stack creates `sglab-hf-cache` of `size`
    (protected, kept when the stack is destroyed)."""

    claim_name: str | None = None
    size: ByteQuantity = "2Ti"
    storage_class: str | None = None
    access_modes: list[Literal["ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany"]] = Field(
        default_factory=lambda: ["ReadWriteMany"])  # type: ignore[arg-type]  # mypy reads the lambda as list[str]
    mount_path: str = "/var/cache/huggingface"

    @field_validator("claim_name", "storage_class")
    @classmethod
    def _object_name(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a valid Kubernetes object name (lowercase letters, digits, '-', '.')")
        return value

    @field_validator("mount_path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or value == "/" or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not an absolute directory path; write it like /var/cache/huggingface")
        return value

    @model_validator(mode="after")
    def _modes(self) -> "HfCache":
        if not self.access_modes:
            raise KeyedValueError("access-modes", "access-modes is empty; give at least one (ReadWriteMany)")
        return self


def check_pull_secrets(names: list[str]) -> list[str]:
    for name in names:
        if not _DNS_SUBDOMAIN.match(name):
            raise ValueError(f"{name!r} is not a valid Secret name (lowercase letters, digits, '-', '.')")
    if len(set(names)) != len(names):
        raise ValueError(f"{names} names a Secret twice; list each once")
    return names


_TAG = re.compile(r":[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def image_problem(image: str) -> str | None:
    """Why a node of a real cluster could not pull `image` as the one intended, or None: a reference must name
    its registry (no Docker Hub shorthand), not a local-only one, and a version (a tag other than latest, or a
    digest)."""
    name, _, digest = image.partition("@")
    first = name.split("/", 1)[0]
    has_registry = "/" in name and ("." in first or ":" in first or first == "localhost")
    if not has_registry:
        return "names no registry, so a node resolves it on Docker Hub (docker.io/library/...), where it is not"
    host = first.split(":", 1)[0]
    if host in ("localhost", "127.0.0.1", "[::1]") or first.endswith(".local") or host.endswith(".local"):
        return f"names the local registry {first}, which the cluster's nodes cannot reach"
    if digest:
        return None if digest.startswith("sha256:") and len(digest) == 71 else "has a malformed digest"
    tag = _TAG.search(name.rsplit("/", 1)[1])
    if tag is None:
        return "has no tag, so it means :latest, which changes under the stack"
    if tag.group(0) == ":latest":
        return "is tagged :latest, which changes under the stack"
    return None


def _project_images(stack: Any) -> list[tuple[str, str]]:
    images = [("project-image", stack.project_image)]
    if stack.benchmark_job.image:
        images.append(("benchmark-job.image", stack.benchmark_job.image))
    if stack.locust.image:
        images.append(("locust.image", stack.locust.image))
    return images


def is_hub_id(path: str) -> bool:
    """model.path as SGLang reads it: a hub repository id (`org/name`) unless it is an absolute path."""
    return not path.startswith("/") and path.count("/") == 1 and not path.startswith(".")


def cluster_checks(stack: Any) -> None:
    """Cross-section rules for running on a shared cluster (raise KeyedValueError with key and fix)."""
    if stack.backend == "sglang":
        for key, image in _project_images(stack):
            problem = image_problem(image)
            if problem is not None:
                raise KeyedValueError(key, f"{image!r} {problem}; the benchmark Job, Locust and the preflight run it "
                                      f"on a real cluster; push the project image to a registry the nodes can pull "
                                      f"(make image REGISTRY=ghcr.io/<org>, docs/deploy.md \"The project image\") and "
                                      f"set {key} to it, e.g. {DEFAULT_PROJECT_IMAGE} (a local tag is for the sim "
                                      "stack on kind/minikube only)")
    volume = stack.model.volume
    if stack.production and volume is not None and volume.kind == "hostPath":
        raise KeyedValueError("model.volume.kind", "is hostPath in a stack marked production (sglab:production): a "
                              "hostPath ties the server to a node's disk, and the Pod Security Standards' baseline "
                              "level (what a hardened cluster enforces) forbids it; use kind: pvc with claim-name "
                              "(a ReadOnlyMany PersistentVolumeClaim, e.g. on a CSI driver)")
    if stack.backend == "sglang" and volume is None and is_hub_id(stack.model.path) and stack.hf_cache is None:
        raise KeyedValueError("hf-cache", f"model.path {stack.model.path!r} is a Hugging Face Hub id, so each server "
                              "downloads the checkpoint into its pod; without sglab:hf-cache that is a 64Gi emptyDir "
                              "(a large checkpoint is evicted, and every new pod downloads it again); set "
                              "sglab:hf-cache: {size: 2Ti} (a ReadWriteMany claim the stack creates) or "
                              "{claim-name: <existing claim>}")
    _fabric_checks(stack)


def _fabric_checks(stack: Any) -> None:
    rdma = stack.placement.rdma
    if rdma is None:
        return
    set_by_rdma = rdma.env()
    nccl = stack.nccl.as_env()
    for name in set_by_rdma:
        if name in nccl:
            raise KeyedValueError(f"nccl.{name}", f"{name} is set here and by placement.rdma; set it in one place "
                                  "(remove it here: placement.rdma renders it into both arms)")
        if name in stack.env:
            raise KeyedValueError(f"env.{name}", f"{name} is set here and by placement.rdma; remove it here")


class BenchmarkJob(Model):
    """The in-cluster benchmark Job declared after the arms (runs again when the comparison changes)."""

    enabled: bool = True
    rerun: str = ""
    image: str | None = None
    timeout_min: Annotated[int, Field(ge=1)] = 60
    quick: bool = False
    cpu: CpuQuantity = "2"
    memory: ByteQuantity = "2Gi"
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
        return number_as_text(value)


class LocustSpec(Model):
    """Locust master + workers in the cluster, driving both arms (Locust's web UI)."""

    enabled: bool = False
    workers: Annotated[int, Field(ge=1, le=MAX_LOCUST_WORKERS)] = 2  # one pod each (sglab.core.children's cap)
    image: str | None = None
    web_login: bool = True
    username: str = "sglab"
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    locustfile: str = Field("loadtests/locustfile.py", description="path inside the project image")
    cpu: CpuQuantity = Field("1", description="CPU request of the master and of each worker")
    memory: ByteQuantity = "1Gi"


class PreflightSpec(Model):
    """The preflight Job before any GPU-holding object changes (sglab/deploy/preflight.py): in the server image,
    with no GPU, the stack's exact launch commands through that image's own SGLang argument parser, the model
    and draft paths on the volume, and the model's architecture among the ones that SGLang registers."""

    enabled: bool = True
    timeout_min: Annotated[int, Field(ge=1)] = 30  # pulling a 20 GB server image onto a fresh node takes minutes
    cpu: CpuQuantity = "1"
    memory: ByteQuantity = "8Gi"  # importing sglang (torch, transformers) on a CPU
