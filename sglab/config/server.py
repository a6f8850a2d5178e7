"""The server both arms run, and the candidate's speculative block and declared differences."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sglab.config.base import KeyedValueError, Model, check_env
from sglab.config.nccl import NcclEnv
from sglab.sglang import flags, honesty, rules

SpeculativeAlgorithm = Literal[rules.SPECULATIVE_ALGORITHMS]  # type: ignore[valid-type]
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


class SpeculativeSpec(Model):
    """The candidate's speculative block (SGLang's --speculative-* flags)."""

    algorithm: SpeculativeAlgorithm = "EAGLE3"
    draft_model_path: str | None = None
    num_steps: Annotated[int, Field(ge=1)] | None = None
    eagle_topk: Annotated[int, Field(ge=1)] | None = None
    num_draft_tokens: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _sglang_rules(self) -> "SpeculativeSpec":
        steps, topk, draft = self.num_steps, self.eagle_topk, self.num_draft_tokens
        if rules.shape_partly_set(steps, topk, draft):
            raise ValueError(
                "num-steps, eagle-topk and num-draft-tokens must all be set or all unset "
                "(SGLang asserts this); set all three"
            )
        if steps is None or topk is None or draft is None:
            auto, llama = rules.AUTO_SPEC_SHAPE, rules.AUTO_SPEC_SHAPE_LLAMA_GROK
            raise ValueError(
                "num-steps, eagle-topk and num-draft-tokens are unset: SGLang would pick them itself "
                f"({auto} for most models, {llama} for Llama/Grok), so the benchmark would not say what "
                "it measured; set all three"
            )
        too_big = rules.out_of_bounds(steps, topk, draft)
        if too_big is not None:
            name, value, bound = too_big
            key = {"num_steps": "num-steps", "eagle_topk": "eagle-topk", "num_draft_tokens": "num-draft-tokens"}[name]
            raise KeyedValueError(
                key,
                f"{key} is {value}, beyond what SGLang can run (it allocates draft slots and CUDA graphs for the "
                f"whole draft shape; published EAGLE-3 setups use under 10 steps, topk 10, 64 draft tokens); "
                f"use at most {bound}"
            )
        adjusted = rules.adjusted_num_draft_tokens(steps, topk, draft)
        if adjusted != draft:
            raise KeyedValueError(
                "num-draft-tokens",
                f"eagle-topk is 1, so SGLang would silently adjust num-draft-tokens from {draft} "
                f"to num-steps + 1 = {adjusted}; set num-draft-tokens: {adjusted}"
            )
        tree = rules.max_num_draft_tokens(steps, topk)
        if draft > tree:
            raise KeyedValueError(
                "num-draft-tokens",
                f"num-draft-tokens {draft} exceeds num-steps * eagle-topk + 1 = {tree}: the draft tree cannot "
                "hold that many tokens; lower num-draft-tokens or raise num-steps/eagle-topk"
            )
        if rules.needs_draft_model(self.algorithm) and not self.draft_model_path:
            raise KeyedValueError("algorithm", f"algorithm {self.algorithm} needs draft-model-path (the draft model's weights)")
        if self.algorithm == "NGRAM" and self.draft_model_path:
            raise KeyedValueError("draft-model-path", "algorithm NGRAM uses no draft model; remove draft-model-path")
        return self


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
