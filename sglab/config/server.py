"""The server both arms run (model, volume, flags, extra-args, env; for the simulator its `sim:` knobs) and the
candidate's part: its speculative block and its declared differences (confounds).

The speculative block covers every `--speculative-algorithm` of the pinned SGLang. Each algorithm family takes
the keys SGLang reads for it (sglab/sglang/rules.py says what SGLang does with them); a key that SGLang would
ignore, override or fill in by itself is refused with the fix, so the launch command says exactly what runs.
`SpeculativeSpec.flag_values()` is what the candidate arm renders.

extra-args are checked as SGLang's parser reads them, wherever a stack has them: `server.extra-args` (both arms),
`candidate.confounds.server.extra-args` (the candidate, a confound) and `candidate.speculative.extra-args` (the
speculative block's other --speculative-* flags, never a confound).

The `sim:` section's models are made from the knob table in sglab/sglang/sim_knobs.py (fields, defaults, bounds),
so a knob added there is a stack key here, an SGLAB_SIM_* variable in the rendered arms and a `sglab sim` flag,
with no second declaration.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, create_model, field_validator, model_validator

from sglab.config.base import (CONTAINER_SYSTEM_DIRS, DEFAULT_HOST_PATH_PREFIXES, NODE_SYSTEM_DIRS, SECRETS_FIX,
                               _DNS_SUBDOMAIN, KeyedValueError, Model, check_env, dir_problem, is_under)
from sglab.config.nccl import NcclEnv
from sglab.sglang import flags, honesty, rules, sim_knobs
from sglab.sglang.secret_names import secret_word


SPECULATIVE_PREFIX = "--speculative-"
SPECULATIVE_EXTRA_ARGS = "candidate.speculative.extra-args"
# SGLang's other --speculative-* flags, which sglab passes through candidate.speculative.extra-args untyped (read
# from SGLang's speculative arguments, srt/server_args.py and srt/arg_groups/spec.py); with the typed ones of
# sglab/sglang/flags.py they are every --speculative-* flag there is, so any other is a misspelling. A flag newer
# than the image's release is SGLang's to refuse at start. Adding one is one name here.
SGLANG_SPECULATIVE_FLAGS = frozenset({
    "--speculative-draft-model-revision", "--speculative-draft-load-format", "--speculative-draft-model-quantization",
    "--speculative-draft-attention-backend", "--speculative-draft-kv-cache-dtype", "--speculative-draft-window-size",
    "--speculative-moe-runner-backend", "--speculative-moe-a2a-backend", "--speculative-dsa-topk-backend",
    "--speculative-use-rejection-sampling", "--speculative-skip-dp-mlp-sync",
    "--speculative-dspark-sps-table-path", "--speculative-dspark-confidence-sts-path",
    "--speculative-dspark-align-verify-tokens-to-graph-tier", "--speculative-ngram-external-corpus-max-tokens",
})


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
    if faked := honesty.lossy_args(args):  # before the other checks: say it is lossy, not only who renders it
        raise ValueError(honesty.refusal(faked, "extra-args"))
    conflict = flags.secret_conflict(args) or _secret_shaped(args) or flags.managed_conflict(args) or \
        _unknown_speculative(args) or _misplaced(args, speculative)
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


def _unknown_speculative(args: list[str]) -> str | None:
    """A --speculative-* flag SGLang does not have: its parser refuses it only at start, and until then validate
    would report "confounds: none" for a run that never starts."""
    for option, name in _options(args):
        if name.startswith(SPECULATIVE_PREFIX) and flags.spelled_as(option) is None and \
                not any(known.startswith(option) for known in SGLANG_SPECULATIVE_FLAGS):
            typed = [f.name for f in flags.FLAGS if f.name.startswith(SPECULATIVE_PREFIX) and not f.managed_by]
            allowed = ", ".join(sorted([*typed, *SGLANG_SPECULATIVE_FLAGS]))
            return (f"{option} is not a --speculative-* flag of SGLang (its launch_server would refuse it at start); "
                    f"fix the spelling: {SPECULATIVE_EXTRA_ARGS} may set {allowed}, "
                    "and the others are keys of candidate.speculative (docs/config.md). A flag newer than sglab "
                    "knows is one name in sglab/config/server.py")
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


SpeculativeAlgorithm = Literal[rules.SPECULATIVE_ALGORITHMS]  # type: ignore[valid-type]
NgramMatchType = Literal[rules.NGRAM_MATCH_TYPES]  # type: ignore[valid-type]
_D: dict[str, Any] = rules.NGRAM_DEFAULTS
_SPEC_PREFIX = "candidate.speculative."


class NgramSpec(Model):
    """NGRAM's own flags (--speculative-ngram-*): the n-gram trie SGLang drafts from."""

    min_bfs_breadth: Annotated[int, Field(ge=1)] = _D["min_bfs_breadth"]
    max_bfs_breadth: Annotated[int, Field(ge=1, le=rules.MAX_EAGLE_TOPK)] = _D["max_bfs_breadth"]
    match_type: NgramMatchType = _D["match_type"]
    max_trie_depth: Annotated[int, Field(ge=1)] = _D["max_trie_depth"]
    capacity: Annotated[int, Field(ge=1)] = _D["capacity"]
    external_corpus_path: str | None = None
    external_sam_budget: Annotated[int, Field(ge=0)] = _D["external_sam_budget"]


def _only_for(key: str, families: str) -> str:
    return f"{key} applies only to {families}; remove it"


class SpeculativeSpec(Model):
    """The candidate's speculative block (SGLang's --speculative-* flags)."""

    algorithm: SpeculativeAlgorithm = "EAGLE3"
    draft_model_path: str | None = None
    num_steps: Annotated[int, Field(ge=1)] | None = None
    eagle_topk: Annotated[int, Field(ge=1)] | None = None
    num_draft_tokens: Annotated[int, Field(ge=1)] | None = None
    dflash_block_size: Annotated[int, Field(ge=1, le=rules.MAX_NUM_DRAFT_TOKENS)] | None = None  # DFLASH
    dspark_block_size: Annotated[int, Field(ge=1, le=rules.MAX_NUM_DRAFT_TOKENS)] | None = None  # DSPARK's gamma
    uno_lora_path: str | None = None  # UNO's draft LoRA
    ngram: NgramSpec | None = None  # NGRAM
    # The block's other --speculative-* flags (--speculative-adaptive, --speculative-draft-model-quantization, ...):
    # candidate-only, part of what is tested, never a confound (check_extra_args).
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("extra_args")
    @classmethod
    def _only_speculative(cls, args: list[str]) -> list[str]:
        return check_extra_args(args, speculative=True)

    @model_validator(mode="after")
    def _sglang_rules(self) -> "SpeculativeSpec":
        family = rules.family(self.algorithm)
        self._keys_of_other_families(family)
        if self.draft_model_path and not rules.takes_draft_model(self.algorithm):
            drafter = ("it drafts from an n-gram trie of the context" if family == "ngram"
                       else "a LoRA on the target drafts")
            raise KeyedValueError("draft-model-path", f"algorithm {self.algorithm} uses no draft model ({drafter}); "
                                  "remove draft-model-path")
        if rules.needs_draft_model(self.algorithm) and not self.draft_model_path:
            raise KeyedValueError("algorithm", f"algorithm {self.algorithm} needs draft-model-path (the draft "
                                  "model's weights)")
        {"eagle": self._eagle, "ngram": self._ngram, "dflash": self._dflash, "dspark": self._dspark,
         "uno": self._uno}[family]()
        return self

    def _keys_of_other_families(self, family: str) -> None:
        owners = {"dflash_block_size": ("dflash", "DFLASH"), "dspark_block_size": ("dspark", "DSPARK"),
                  "uno_lora_path": ("uno", "UNO"), "ngram": ("ngram", "NGRAM")}
        for field, (owner, name) in owners.items():
            if getattr(self, field) is not None and family != owner:
                key = field.replace("_", "-")
                raise KeyedValueError(key, _only_for(key, f"algorithm {name}") + f" (algorithm is {self.algorithm})")

    def _eagle(self) -> None:
        steps, topk, draft = self.num_steps, self.eagle_topk, self.num_draft_tokens
        if rules.shape_partly_set(steps, topk, draft):
            raise ValueError("num-steps, eagle-topk and num-draft-tokens must all be set or all unset "
                             "(SGLang asserts this); set all three")
        if steps is None or topk is None or draft is None:
            auto, llama = rules.AUTO_SPEC_SHAPE, rules.AUTO_SPEC_SHAPE_LLAMA_GROK
            raise ValueError(
                "num-steps, eagle-topk and num-draft-tokens are unset: SGLang would pick them itself "
                f"({auto} for most models, {llama} for Llama/Grok), so the benchmark would not say what "
                "it measured; set all three")
        _bounds(steps, topk, draft)
        adjusted = rules.adjusted_num_draft_tokens(steps, topk, draft)
        if adjusted != draft:
            raise KeyedValueError("num-draft-tokens", f"eagle-topk is 1, so SGLang would silently adjust "
                                  f"num-draft-tokens from {draft} to num-steps + 1 = {adjusted}; set "
                                  f"num-draft-tokens: {adjusted}")
        tree = rules.max_num_draft_tokens(steps, topk)
        if draft > tree:
            raise KeyedValueError("num-draft-tokens", f"num-draft-tokens {draft} exceeds num-steps * eagle-topk + 1 "
                                  f"= {tree}: the draft tree cannot hold that many tokens; lower num-draft-tokens "
                                  "or raise num-steps/eagle-topk")

    def _ngram(self) -> None:
        ngram = self.ngram or NgramSpec()
        for key, value in (("num-steps", self.num_steps), ("eagle-topk", self.eagle_topk)):
            if value is not None:
                raise KeyedValueError(key, f"algorithm NGRAM: SGLang sets eagle-topk to ngram.max-bfs-breadth "
                                      f"({ngram.max_bfs_breadth}) and num-steps to num-draft-tokens // eagle-topk "
                                      f"itself; remove {key} (set ngram.max-bfs-breadth for the breadth)")
        if self.num_draft_tokens is None:
            raise KeyedValueError("num-draft-tokens", "algorithm NGRAM: num-draft-tokens is unset, so SGLang would "
                                  f"pick {rules.NGRAM_DEFAULT_NUM_DRAFT_TOKENS} itself and the benchmark would not say "
                                  "what it measured; set num-draft-tokens (e.g. "
                                  f"{rules.NGRAM_DEFAULT_NUM_DRAFT_TOKENS})")
        _bounds(1, ngram.max_bfs_breadth, self.num_draft_tokens)
        problem = rules.ngram_problem(self.num_draft_tokens, ngram.min_bfs_breadth, ngram.max_bfs_breadth,
                                      ngram.external_corpus_path is not None, ngram.external_sam_budget)
        if problem:
            raise KeyedValueError("ngram", f"algorithm NGRAM: {problem}; fix candidate.speculative.ngram")

    def _steps_topk_one(self) -> None:
        for key, value in (("num-steps", self.num_steps), ("eagle-topk", self.eagle_topk)):
            if value not in (None, 1):
                raise KeyedValueError(key, f"algorithm {self.algorithm} runs {key} 1: SGLang would silently "
                                      f"override {value} with 1; remove {key}")

    def _dflash(self) -> None:
        self._steps_topk_one()
        block, draft = self.dflash_block_size, self.num_draft_tokens
        if block is not None and draft is not None and block != draft:
            raise KeyedValueError("dflash-block-size", f"dflash-block-size {block} and num-draft-tokens {draft} "
                                  "differ, which SGLang refuses (for DFLASH they are the same number); set only "
                                  "dflash-block-size")
        if block is None and draft is None:
            raise KeyedValueError("dflash-block-size", "algorithm DFLASH: the block size is unset, so SGLang would "
                                  "read it from the draft checkpoint (else use "
                                  f"{rules.DFLASH_DEFAULT_BLOCK_SIZE}) and the benchmark would not say what it "
                                  "measured; set dflash-block-size")
        _bounds(1, 1, block or draft or 1)

    def _dspark(self) -> None:
        self._steps_topk_one()
        gamma = self.dspark_block_size
        if gamma is None:
            raise KeyedValueError("dspark-block-size", "algorithm DSPARK: dspark-block-size (gamma) is unset, so "
                                  "SGLang would read it from the draft checkpoint (else use "
                                  f"{rules.DSPARK_DEFAULT_GAMMA}); set dspark-block-size")
        if self.num_draft_tokens is not None and self.num_draft_tokens != gamma + 1:
            raise KeyedValueError("num-draft-tokens", f"algorithm DSPARK: num-draft-tokens must be "
                                  f"dspark-block-size + 1 = {gamma + 1} (SGLang refuses {self.num_draft_tokens}); "
                                  "remove num-draft-tokens")

    def _uno(self) -> None:
        if not self.uno_lora_path:
            raise KeyedValueError("uno-lora-path", "algorithm UNO needs uno-lora-path (its draft LoRA checkpoint)")
        if self.num_draft_tokens is None:
            raise KeyedValueError("num-draft-tokens", "algorithm UNO needs num-draft-tokens (its verify width Q)")
        topk = self.eagle_topk or 1
        if topk == 1:
            if self.num_steps not in (None, 1):
                raise KeyedValueError("num-steps", f"algorithm UNO with eagle-topk 1 runs num-steps 1: SGLang would "
                                      f"silently override {self.num_steps}; remove num-steps")
            return
        if self.num_steps is None:
            raise KeyedValueError("num-steps", "algorithm UNO with eagle-topk > 1 (tree mode) needs num-steps")
        _bounds(self.num_steps, topk, self.num_draft_tokens)
        problem = rules.uno_tree_problem(self.num_steps, topk, self.num_draft_tokens)
        if problem:
            raise KeyedValueError("num-draft-tokens", f"algorithm UNO: {problem}, which SGLang refuses")

    def resolved_shape(self) -> tuple[int, int, int]:
        """(num_steps, eagle_topk, num_draft_tokens) as SGLang runs this block."""
        family = rules.family(self.algorithm)
        if family == "ngram":
            return rules.ngram_shape(self.num_draft_tokens or 0, (self.ngram or NgramSpec()).max_bfs_breadth)
        if family == "dflash":
            return 1, 1, self.dflash_block_size or self.num_draft_tokens or 0
        if family == "dspark":
            return 1, 1, (self.dspark_block_size or 0) + 1
        if family == "uno":
            topk = self.eagle_topk or 1
            return (self.num_steps or 1) if topk > 1 else 1, topk, self.num_draft_tokens or 0
        return self.num_steps or 0, self.eagle_topk or 0, self.num_draft_tokens or 0

    def flag_values(self) -> list[tuple[str, Any]]:
        """(flag, value) of every managed --speculative-* flag, in the table's order (None: not rendered)."""
        out: list[tuple[str, Any]] = []
        for flag in flags.FLAGS:
            key = (flag.managed_by or "").removeprefix(_SPEC_PREFIX)
            if not flag.managed_by or not flag.managed_by.startswith(_SPEC_PREFIX):
                continue
            holder: Any = self
            if key.startswith("ngram."):
                holder, key = self.ngram, key.removeprefix("ngram.")
                if holder is None and self.algorithm == "NGRAM":
                    holder = NgramSpec()
            value = getattr(holder, key.replace("-", "_"), None) if holder is not None else None
            out.append((flag.name, value))
        return out


def _bounds(steps: int, topk: int, draft: int) -> None:
    too_big = rules.out_of_bounds(steps, topk, draft)
    if too_big is None:
        return
    name, value, bound = too_big
    key = {"num_steps": "num-steps", "eagle_topk": "eagle-topk", "num_draft_tokens": "num-draft-tokens"}[name]
    raise KeyedValueError(key, f"{key} is {value}, beyond what SGLang can run (it allocates draft slots and CUDA "
                          "graphs for the whole draft shape; published EAGLE-3 setups use under 10 steps, topk "
                          f"10, 64 draft tokens); use at most {bound}")


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
            raise KeyedValueError("claim-name", f"claim-name {self.claim_name!r} is not a "
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


def _fields(group: sim_knobs.Group) -> dict[str, Any]:
    return {k.name: (k.type, Field(k.default, ge=k.ge, gt=k.gt, le=k.le, description=k.help))
            for k in sim_knobs.knobs(group)}


class _FaultsBase(Model):
    @model_validator(mode="after")
    def _total(self) -> "_FaultsBase":
        sim_knobs.check_fault_rates(self.model_dump())
        return self


SimFaults = create_model("SimFaults", __base__=_FaultsBase, __module__=__name__,
                         __doc__="Seeded fault injection in the simulator (SGLAB_SIM_* env), for testing the harness.",
                         **_fields("faults"))

# The simulated nodes a `--target sim` bench places its arms on (name -> speed, sglab/load/design.py): at most 8,
# like the machines a sweep could use; two equal ones by default, so a design that moves arms has somewhere to go.
MAX_SIM_NODES = 8
_speed = sim_knobs.knob("node_speed")
NodeName = Annotated[str, StringConstraints(pattern=sim_knobs.NODE_NAME_PATTERN)]
NodeSpeed = Annotated[float, Field(ge=_speed.ge, le=_speed.le, allow_inf_nan=False)]
SimNodes = Annotated[dict[NodeName, NodeSpeed], Field(min_length=1, max_length=MAX_SIM_NODES)]

SimSpec = create_model("SimSpec", __base__=Model, __module__=__name__,
                       __doc__="Simulator-only knobs, passed as SGLAB_SIM_* env (ignored by a real SGLang server).",
                       **_fields("sim"), faults=(SimFaults | None, None),
                       nodes=(SimNodes, Field(default_factory=lambda: {"sim-node-a": 1.0, "sim-node-b": 1.0},
                                              description="the simulated nodes (name: speed, every modelled "
                                              "duration divided by the speed): a bench places the baseline on "
                                              "the first and the candidate on the second, and a crossover swaps "
                                              "them (policy.design)")))


def node_env(name: str, speed: float) -> dict[str, str]:
    """The SGLAB_SIM_* env that puts a simulator on one node of `sim.nodes`."""
    return sim_knobs.knob_env({"node": name, "node_speed": float(speed)}, "node")


def sim_env(sim: Any) -> dict[str, str]:
    """The SGLAB_SIM_* env of a `sim:` section (faults only when the section sets them)."""
    env = sim_knobs.knob_env(sim.model_dump(), "sim")
    if sim.faults is not None:
        env.update(sim_knobs.knob_env(sim.faults.model_dump(), "faults"))
    return env


def sim_time_scale(sim: Any) -> float:
    """The time scale a `sim:` section declares (its fields are made from sim_knobs, which mypy cannot see)."""
    return float(sim.time_scale)
