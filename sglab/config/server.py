"""The server both arms run, and the candidate's speculative block and declared differences."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sglab.config.base import (_DNS_SUBDOMAIN, CONTAINER_SYSTEM_DIRS, DEFAULT_HOST_PATH_PREFIXES, NODE_SYSTEM_DIRS,
                               KeyedValueError, Model, check_env, dir_problem, is_under)
from sglab.config.extra_args import check_extra_args  # noqa: F401 (re-exported)
from sglab.config.nccl import NcclEnv
# The speculative block (every algorithm of the pinned SGLang, with its rules) lives in its own module.
from sglab.config.speculative import NgramSpec, SpeculativeAlgorithm, SpeculativeSpec  # noqa: F401 (re-exported)
from sglab.sglang import flags, rules
from sglab.core.untrusted import printable

DRAFT_MODEL_ALGORITHMS = rules.DRAFT_MODEL_ALGORITHMS
SGLANG_FORCED_MAX_RUNNING_REQUESTS = rules.FORCED_MAX_RUNNING_REQUESTS
FORCES_MAX_RUNNING = rules.FORCES_MAX_RUNNING

# Every spelling of the flags sglab renders itself (sglab/sglang/flags.py marks them managed_by).
MANAGED_FLAGS = tuple(option for flag in flags.FLAGS if flag.managed_by for option in flag.options)


class ModelVolume(Model):
    """How the model weights reach the pod: a PVC or a hostPath, always read-only.

    A hostPath is a directory of the node: even read-only, one in a system directory hands the server pod the
    node's sockets or credentials (the container runtime's socket under /var/run, other pods' secrets under
    /var/lib/kubelet), so it must be under one of host-path-prefixes and never in a system directory."""

    kind: Literal["pvc", "hostPath"] = "hostPath"
    claim_name: str | None = None
    host_path: str | None = None
    mount_path: str = "/shared"
    host_path_prefixes: list[str] = Field(default_factory=lambda: list(DEFAULT_HOST_PATH_PREFIXES),
                                          description="node directories a host-path may be under")

    @model_validator(mode="after")
    def _source(self) -> "ModelVolume":
        if self.kind == "pvc" and not self.claim_name:
            raise KeyedValueError("claim-name", "kind is pvc but claim-name is missing: name the PersistentVolumeClaim "
                                                "holding the weights")
        if self.claim_name is not None and not _DNS_SUBDOMAIN.match(self.claim_name):
            raise KeyedValueError("claim-name", f"claim-name {printable(repr(self.claim_name), limit=80)} is not a "
                                  "PersistentVolumeClaim name; use lowercase letters, digits, '-' and '.'")
        if self.kind == "hostPath" and not self.host_path:
            raise KeyedValueError("host-path", "kind is hostPath but host-path is missing: give the node directory "
                                               "holding the weights")
        problem = dir_problem(self.mount_path, CONTAINER_SYSTEM_DIRS, "/shared")
        if problem:
            raise KeyedValueError("mount-path", f"mount-path {problem}")
        for prefix in self.host_path_prefixes:
            problem = dir_problem(prefix, NODE_SYSTEM_DIRS, "/shared")
            if problem:
                raise KeyedValueError("host-path-prefixes", f"host-path-prefixes: {problem}")
        if self.kind == "hostPath" and self.host_path:
            problem = dir_problem(self.host_path, NODE_SYSTEM_DIRS, "/shared", why=": even read-only, it would "
                                  "hand the server pod the node's sockets, credentials or kernel interfaces")
            if problem:
                raise KeyedValueError("host-path", f"host-path {problem}")
            if not any(is_under(self.host_path, prefix) for prefix in self.host_path_prefixes):
                raise KeyedValueError("host-path", f"host-path {self.host_path} is not under model.volume."
                                      f"host-path-prefixes ({', '.join(self.host_path_prefixes)}); move the weights "
                                      "under one of them, or add their directory to host-path-prefixes")
        return self


class ModelSpec(Model):
    path: str = Field(description="Model path as the server sees it (--model-path)")
    served_model_name: str | None = None
    volume: ModelVolume | None = None


class ServerFlags(Model):
    """Flags applied to BOTH arms. Names are SGLang's launch_server flags without the dashes."""

    tp_size: Annotated[int, Field(ge=1)] = 8
    mem_fraction_static: Annotated[float, Field(gt=0, lt=1)] | None = None
    num_continuous_decode_steps: Annotated[int, Field(ge=1)] = 1
    disable_custom_all_reduce: bool = False
    trust_remote_code: bool = False
    context_length: Annotated[int, Field(ge=1)] | None = None
    max_running_requests: Annotated[int, Field(ge=1)] | None = None
    enable_metrics: bool = True
    port: Annotated[int, Field(ge=1, le=65535)] = 30000
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("extra_args")
    @classmethod
    def _no_managed(cls, args: list[str]) -> list[str]:
        return check_extra_args(args)


class ServerOverrides(Model):
    """A partial ServerFlags: only what the candidate changes on purpose (a declared confound)."""

    mem_fraction_static: Annotated[float, Field(gt=0, lt=1)] | None = None
    num_continuous_decode_steps: Annotated[int, Field(ge=1)] | None = None
    disable_custom_all_reduce: bool | None = None
    context_length: Annotated[int, Field(ge=1)] | None = None
    max_running_requests: Annotated[int, Field(ge=1)] | None = None
    extra_args: list[str] | None = None

    @field_validator("extra_args")
    @classmethod
    def _no_managed(cls, args: list[str] | None) -> list[str] | None:
        return None if args is None else check_extra_args(args)


class CandidateConfounds(Model):
    """Everything the candidate changes besides speculation. Declared here, reported as a confound."""

    image: str | None = None
    nccl: NcclEnv | None = None
    env: dict[str, str] | None = None
    server: ServerOverrides | None = None

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, env: Any) -> Any:
        return check_env(env, "candidate.confounds.nccl")


class CandidateSpec(Model):
    speculative: SpeculativeSpec
    confounds: CandidateConfounds | None = None
