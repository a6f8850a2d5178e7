"""The candidate's speculative block: every `--speculative-algorithm` of the pinned SGLang, with its rules.

Each algorithm family takes the keys SGLang reads for it (sglab/sglang/rules.py says what SGLang does
with them); a key that SGLang would ignore, override or fill in by itself is refused with the fix, so the
launch command says exactly what runs. `flag_values()` is what the candidate arm renders.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sglab.config.base import KeyedValueError, Model
from sglab.config.extra_args import check_extra_args
from sglab.sglang import flags, rules

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
    # candidate-only, part of what is tested, never a confound (sglab/config/extra_args.py).
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
