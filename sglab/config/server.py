"""The server both arms run, and the candidate's speculative block and declared differences."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sglab.config.base import KeyedValueError, Model, check_env
from sglab.config.nccl import NcclEnv
# The speculative block (every algorithm of the pinned SGLang, with its rules) lives in its own module.
from sglab.config.speculative import NgramSpec, SpeculativeAlgorithm, SpeculativeSpec  # noqa: F401 (re-exported)
from sglab.sglang import flags, honesty, rules

DRAFT_MODEL_ALGORITHMS = rules.DRAFT_MODEL_ALGORITHMS
SGLANG_FORCED_MAX_RUNNING_REQUESTS = rules.FORCED_MAX_RUNNING_REQUESTS
FORCES_MAX_RUNNING = rules.FORCES_MAX_RUNNING

# Every spelling of the flags sglab renders itself (sglab/sglang/flags.py marks them managed_by).
MANAGED_FLAGS = tuple(option for flag in flags.FLAGS if flag.managed_by for option in flag.options)


def check_extra_args(args: list[str]) -> list[str]:
    """extra-args as SGLang's parser reads them: no ambiguous abbreviation, no managed flag by any spelling.

    A malformed list (a value without its flag) is left to SGLang, which refuses it loudly at start.
    """
    try:
        flags.decode(args)
    except flags.FlagError as exc:
        raise ValueError(f"{exc}; fix the argument list (SGLang's launch_server would refuse it)") from None
    if faked := honesty.lossy_args(args):  # before managed_conflict: say why, not only who renders it
        raise ValueError(honesty.refusal(faked, "extra-args"))
    conflict = flags.secret_conflict(args) or flags.managed_conflict(args)
    if conflict:
        raise ValueError(conflict)
    return args


class ModelVolume(Model):
    """How the model weights reach the pod: a PVC or a hostPath, always read-only."""

    kind: Literal["pvc", "hostPath"] = "hostPath"
    claim_name: str | None = None
    host_path: str | None = None
    mount_path: str = "/shared"

    @model_validator(mode="after")
    def _source(self) -> "ModelVolume":
        if self.kind == "pvc" and not self.claim_name:
            raise KeyedValueError("claim-name", "kind is pvc but claim-name is missing: name the PersistentVolumeClaim holding the weights")
        if self.kind == "hostPath" and not self.host_path:
            raise KeyedValueError("host-path", "kind is hostPath but host-path is missing: give the node directory holding the weights")
        if not self.mount_path.startswith("/"):
            raise KeyedValueError("mount-path", "mount-path must be an absolute path inside the container")
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
