"""The server both arms run, and the candidate's speculative block and declared differences."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sglab.config.base import _DNS_SUBDOMAIN, KeyedValueError, Model, check_env
from sglab.config.strict import (DEFAULT_HOST_PATH_PREFIXES, CONTAINER_SYSTEM_DIRS, NODE_SYSTEM_DIRS, SECRETS_FIX,
                                 dir_problem, is_under)
from sglab.config.nccl import NcclEnv
from sglab.sglang import flags, rules
from sglab.sglang.secret_names import secret_word
from sglab.untrusted import printable

SpeculativeAlgorithm = Literal[rules.SPECULATIVE_ALGORITHMS]  # type: ignore[valid-type]
DRAFT_MODEL_ALGORITHMS = rules.DRAFT_MODEL_ALGORITHMS
SGLANG_FORCED_MAX_RUNNING_REQUESTS = rules.FORCED_MAX_RUNNING_REQUESTS
FORCES_MAX_RUNNING = rules.FORCES_MAX_RUNNING

# Every spelling of the flags sglab renders itself (sglab/sglang/flags.py marks them managed_by).
MANAGED_FLAGS = tuple(option for flag in flags.FLAGS if flag.managed_by for option in flag.options)


SPECULATIVE_PREFIX = "--speculative-"
SPECULATIVE_EXTRA_ARGS = "candidate.speculative.extra-args"


def check_extra_args(args: list[str], *, speculative: bool = False) -> list[str]:
    """extra-args as SGLang's parser reads them: no ambiguous abbreviation, no managed flag by any spelling,
    no flag named like a secret, and --speculative-* flags only in the speculative block (`speculative`:
    the list is candidate.speculative.extra-args, which holds nothing else).

    A malformed list (a value without its flag) is left to SGLang, which refuses it loudly at start.
    """
    try:
        flags.decode(args)
    except flags.FlagError as exc:
        raise ValueError(f"{exc}; fix the argument list (SGLang's launch_server would refuse it)") from None
    conflict = flags.secret_conflict(args) or _secret_shaped(args) or flags.managed_conflict(args) or \
        _misplaced(args, speculative)
    if conflict:
        raise ValueError(conflict)
    return args


def _options(args: list[str]) -> list[tuple[str, str]]:
    """(option as written, the flag SGLang reads it as) for every --flag in args."""
    out = []
    for token in args:
        if token.startswith("--") and token != "--":
            option = token.partition("=")[0]
            found = flags.spelled_as(option)
            out.append((option, found[0].name if found is not None else option))
    return out


def _secret_shaped(args: list[str]) -> str | None:
    for option, name in _options(args):
        word = secret_word(name)
        if word is not None:
            return (f"{option} is named like a secret (the word '{word}'), so its value would be printed by validate "
                    f"and render and stored in plain text; remove it from extra-args: {SECRETS_FIX}")
    return None


def _misplaced(args: list[str], speculative: bool) -> str | None:
    for option, name in _options(args):
        spelled = "" if option == name else f" (SGLang reads it as {name})"
        if name.startswith(SPECULATIVE_PREFIX) and not speculative:
            return (f"{option}{spelled} is a flag of the candidate's speculative block, so here it would either reach "
                    "the baseline or hide from the confounds; move it to " + SPECULATIVE_EXTRA_ARGS)
        if speculative and not name.startswith(SPECULATIVE_PREFIX):
            return (f"{option}{spelled} is not a --speculative-* flag, and {SPECULATIVE_EXTRA_ARGS} holds only the "
                    "speculative block's own flags; put a candidate-only server flag under "
                    "candidate.confounds.server.extra-args (reported as a confound), a shared one under "
                    "server.extra-args")
    return None


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
            raise KeyedValueError("claim-name", "kind is pvc but claim-name is missing: name the PersistentVolumeClaim holding the weights")
        if self.claim_name is not None and not _DNS_SUBDOMAIN.match(self.claim_name):
            raise KeyedValueError("claim-name", f"claim-name {printable(repr(self.claim_name), limit=80)} is not a "
                                  "PersistentVolumeClaim name; use lowercase letters, digits, '-' and '.'")
        if self.kind == "hostPath" and not self.host_path:
            raise KeyedValueError("host-path", "kind is hostPath but host-path is missing: give the node directory holding the weights")
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


class SpeculativeSpec(Model):
    """The candidate's speculative block (SGLang's --speculative-* flags)."""

    algorithm: SpeculativeAlgorithm = "EAGLE3"
    draft_model_path: str | None = None
    num_steps: Annotated[int, Field(ge=1)] | None = None
    eagle_topk: Annotated[int, Field(ge=1)] | None = None
    num_draft_tokens: Annotated[int, Field(ge=1)] | None = None
    # The block's other --speculative-* flags (--speculative-adaptive, --speculative-draft-model-quantization, ...):
    # candidate-only, part of what is tested, never a confound (sglab/config/server.py: check_extra_args).
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("extra_args")
    @classmethod
    def _only_speculative(cls, args: list[str]) -> list[str]:
        return check_extra_args(args, speculative=True)

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
