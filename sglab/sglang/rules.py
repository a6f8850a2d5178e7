"""What SGLang's ServerArgs does with the speculative flags, including what it changes without saying so.

Read from SGLang 0.5.23 (sglab/sglang/flags.py): the `--speculative-algorithm` builtins are listed in
`srt/arg_groups/fields/spec.py`; `srt/arg_groups/speculative_hook.py` resolves each one
(`_handle_eagle_family`, `_handle_ngram`, `_handle_dflash`, `_handle_dspark`, `_handle_uno`).
- EAGLE, EAGLE3, NEXTN, STANDALONE (the EAGLE family; NEXTN runs as EAGLE): with none of
  --speculative-num-steps/-eagle-topk/-num-draft-tokens set it picks a shape itself ((3, 1, 4) for
  STANDALONE and most models, (5, 4, 8) for Llama/Grok); with only some set it asserts or crashes; with
  eagle-topk 1 it silently sets num-draft-tokens to num-steps + 1.
- NGRAM (draft-free, an n-gram trie over the context): eagle-topk is always set to
  --speculative-ngram-max-bfs-breadth, num-draft-tokens defaults to 12, num-steps to draft // topk.
- DFLASH (a block-diffusion draft model): num-steps and eagle-topk are forced to 1 (a warning if set
  otherwise); the block size is --speculative-dflash-block-size = --speculative-num-draft-tokens,
  inferred from the draft checkpoint (else 16) when neither is set.
- DSPARK: num-steps and eagle-topk forced to 1; gamma = --speculative-dspark-block-size, and
  num-draft-tokens must be gamma + 1; the draft may be bundled in the target checkpoint.
- UNO (a draft LoRA on the target itself): --uno-lora-path, no draft model, TP = PP = 1, FA3 attention,
  num-draft-tokens Q required; topk > 1 is a tree mode with its own limits.
- Every builtin but UNO forces max_running_requests to 48 when the flag is unset.

sglab's config refuses everything SGLang would silently change, so a benchmark always says what it
measured; the simulator applies the same changes the way SGLang does. Both read these rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Family = Literal["eagle", "ngram", "dflash", "dspark", "uno"]
DraftModel = Literal["required", "optional", "none"]


@dataclass(frozen=True)
class Algorithm:
    """One `--speculative-algorithm` builtin of the pinned SGLang; since: the first release that has it
    (None: every release sglab knows, flags.OLDEST_KNOWN on)."""

    name: str
    family: Family
    draft_model: DraftModel
    since: str | None = None
    reported_as: str | None = None  # the name the server reports, when it runs it as another
    forces_max_running: bool = True


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm("EAGLE", "eagle", "required"),
    Algorithm("EAGLE3", "eagle", "required"),
    # DeepSeek's multi-token prediction head: SGLang runs it through its EAGLE worker (the draft defaults to
    # the model path for DeepSeek-family architectures, which Kimi-K2.5's KimiK25ForConditionalGeneration is not).
    Algorithm("NEXTN", "eagle", "optional", reported_as="EAGLE"),
    Algorithm("STANDALONE", "eagle", "required"),
    Algorithm("NGRAM", "ngram", "none"),
    Algorithm("DFLASH", "dflash", "required", "0.5.11"),
    Algorithm("DSPARK", "dspark", "optional", "0.5.16"),
    Algorithm("UNO", "uno", "none", "0.5.20", forces_max_running=False),
)

SPECULATIVE_ALGORITHMS = tuple(a.name for a in ALGORITHMS)
DRAFT_MODEL_ALGORITHMS = tuple(a.name for a in ALGORITHMS if a.draft_model == "required")
ALGORITHM_ALIASES = {a.name: a.reported_as for a in ALGORITHMS if a.reported_as}
FORCED_MAX_RUNNING_REQUESTS = 48
FORCES_MAX_RUNNING = tuple(a.name for a in ALGORITHMS if a.forces_max_running)
AUTO_SPEC_SHAPE = (3, 1, 4)  # (num_steps, eagle_topk, num_draft_tokens) SGLang picks for most models
AUTO_SPEC_SHAPE_LLAMA_GROK = (5, 4, 8)

# Upper bounds of a shape anyone runs: SGLang allocates num_steps x topk draft slots per request and
# captures CUDA graphs for num_draft_tokens tokens per request, so far larger values do not start on a
# GPU (and make the simulator allocate without bound). Published EAGLE-3 configs stay below 10/10/64.
MAX_NUM_STEPS = 32
MAX_EAGLE_TOPK = 64
MAX_NUM_DRAFT_TOKENS = 512

# NGRAM's own flags and defaults (fields/spec.py) and the draft count `_handle_ngram` picks when unset.
NGRAM_DEFAULT_NUM_DRAFT_TOKENS = 12
NGRAM_DEFAULTS = {"min_bfs_breadth": 1, "max_bfs_breadth": 10, "match_type": "BFS", "max_trie_depth": 18,
                  "capacity": 10_000_000, "external_sam_budget": 0}
NGRAM_MATCH_TYPES = ("BFS", "PROB")
DFLASH_DEFAULT_BLOCK_SIZE = 16  # when the draft checkpoint does not say
DSPARK_DEFAULT_GAMMA = 7  # dspark_components/dspark_config.py, when neither the flag nor the checkpoint says
UNO_MAX_VERIFY_WIDTH = 128  # tree mode: Q <= 128, Q * K <= 2048
UNO_MAX_FRONTIER_SLOTS = 2048


def algorithm(name: str) -> Algorithm:
    """The table entry of an algorithm name (KeyError if SGLang has no such builtin)."""
    return next(a for a in ALGORITHMS if a.name == name)


def canonical_algorithm(name: str) -> str:
    """The name the server reports for an algorithm (NEXTN runs as EAGLE)."""
    return ALGORITHM_ALIASES.get(name, name)


def family(name: str) -> Family:
    return algorithm(name).family


def needs_draft_model(name: str) -> bool:
    return name in DRAFT_MODEL_ALGORITHMS


def takes_draft_model(name: str) -> bool:
    """False where SGLang refuses or ignores --speculative-draft-model-path (NGRAM, UNO)."""
    return algorithm(name).draft_model != "none"


def forces_max_running(name: str | None) -> bool:
    """True when SGLang sets max_running_requests itself for this algorithm if the flag is unset."""
    return name in FORCES_MAX_RUNNING


def shape_partly_set(num_steps: int | None, eagle_topk: int | None, num_draft_tokens: int | None) -> bool:
    """SGLang asserts all three or none are given (EAGLE family)."""
    given = [v is not None for v in (num_steps, eagle_topk, num_draft_tokens)]
    return any(given) and not all(given)


def adjusted_num_draft_tokens(num_steps: int, eagle_topk: int, num_draft_tokens: int) -> int:
    """num_draft_tokens as SGLang will run it: with eagle_topk 1 it is always num_steps + 1."""
    return num_steps + 1 if eagle_topk == 1 else num_draft_tokens


def max_num_draft_tokens(num_steps: int, eagle_topk: int) -> int:
    """The draft tree holds the root plus num_steps levels of eagle_topk tokens."""
    return num_steps * eagle_topk + 1


SHAPE_BOUNDS = {"num_steps": MAX_NUM_STEPS, "eagle_topk": MAX_EAGLE_TOPK, "num_draft_tokens": MAX_NUM_DRAFT_TOKENS}


def out_of_bounds(num_steps: int, eagle_topk: int, num_draft_tokens: int) -> tuple[str, int, int] | None:
    """(name, value, bound) of the first shape value above its realistic bound, or None."""
    for name, value in (("num_steps", num_steps), ("eagle_topk", eagle_topk), ("num_draft_tokens", num_draft_tokens)):
        if value > SHAPE_BOUNDS[name]:
            return name, value, SHAPE_BOUNDS[name]
    return None


def ngram_shape(num_draft_tokens: int, max_bfs_breadth: int) -> tuple[int, int, int]:
    """(num_steps, eagle_topk, num_draft_tokens) `_handle_ngram` runs: topk = max BFS breadth."""
    return num_draft_tokens // max_bfs_breadth, max_bfs_breadth, num_draft_tokens


def ngram_problem(num_draft_tokens: int, min_bfs_breadth: int, max_bfs_breadth: int, external_corpus: bool,
                  external_sam_budget: int) -> str | None:
    """Why SGLang would refuse (or misrun) this NGRAM setup, or None."""
    if min_bfs_breadth > max_bfs_breadth:
        return f"min-bfs-breadth {min_bfs_breadth} exceeds max-bfs-breadth {max_bfs_breadth}"
    if num_draft_tokens < 2:
        return f"num-draft-tokens {num_draft_tokens} leaves no draft token to verify (the first is the root)"
    if external_corpus and external_sam_budget <= 0:
        return "external-corpus-path is set but external-sam-budget is 0; SGLang needs a positive budget"
    if external_sam_budget > num_draft_tokens - 1:
        return (f"external-sam-budget {external_sam_budget} exceeds num-draft-tokens - 1 = {num_draft_tokens - 1}, "
                "which SGLang refuses")
    return None


def uno_tree_problem(num_steps: int, eagle_topk: int, verify_width: int) -> str | None:
    """UNO tree mode (eagle_topk > 1): SGLang's limits on Q (num-draft-tokens), F (num-steps + 1) and K."""
    draft_width = num_steps + 1
    if verify_width < draft_width:
        return f"num-draft-tokens {verify_width} is below num-steps + 1 = {draft_width} (UNO needs Q >= F)"
    if verify_width > UNO_MAX_VERIFY_WIDTH:
        return f"num-draft-tokens {verify_width} exceeds UNO's {UNO_MAX_VERIFY_WIDTH} verify nodes"
    if verify_width * eagle_topk > UNO_MAX_FRONTIER_SLOTS:
        return f"num-draft-tokens x eagle-topk = {verify_width * eagle_topk} exceeds UNO's {UNO_MAX_FRONTIER_SLOTS}"
    capacity, level = 1, 1
    for _ in range(num_steps):
        level *= eagle_topk
        capacity += level
        if capacity >= verify_width:
            break
    if verify_width > capacity:
        return (f"num-draft-tokens {verify_width} exceeds the tree UNO can build from num-steps and eagle-topk "
                f"({capacity})")
    parents = eagle_topk * max(num_steps - 1, 0) + 1
    if verify_width - 1 > parents:
        return (f"num-draft-tokens - 1 = {verify_width - 1} exceeds eagle-topk x (num-steps - 1) + 1 = {parents}, "
                "the parent list UNO shares with EAGLE")
    return None


# --speculative-adaptive (SGLang PR #21599, first released in 0.5.11): EMA-driven num_steps, one CUDA graph
# per tier. Only EAGLE/EAGLE3 (NEXTN runs as EAGLE) with eagle-topk 1; any other configuration silently falls
# back to static speculation (#23289). In 0.5.23 the tiers are per batch-size slot and --speculative-num-steps
# must be one of their steps (the union over slots), else the server refuses to start; num_draft_tokens is
# then num_steps + 1.
ADAPTIVE_FLAG = "--speculative-adaptive"
ADAPTIVE_CONFIG_FLAG = "--speculative-adaptive-config"
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")
# speculative/adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG: BS 1 [1, 3, 5, 7], 8 [0, 1, 3], 32 [0, 1], 64 [0].
ADAPTIVE_DEFAULT_CANDIDATE_STEPS = (0, 1, 3, 5, 7)


def adaptive_fallback(name: str, eagle_topk: int) -> str | None:
    """Why SGLang would silently run this configuration static despite --speculative-adaptive, or None."""
    if canonical_algorithm(name) not in ADAPTIVE_ALGORITHMS:
        return f"algorithm {name} is not EAGLE/EAGLE3"
    if eagle_topk != 1:
        return f"eagle-topk is {eagle_topk}, not 1"
    return None


def adaptive_steps_problem(num_steps: int, candidate_steps: tuple[int, ...] = ADAPTIVE_DEFAULT_CANDIDATE_STEPS
                           ) -> str | None:
    """SGLang refuses to start an adaptive server whose num-steps is none of the adaptive tiers."""
    if num_steps in candidate_steps:
        return None
    return (f"num-steps {num_steps} is not one of the adaptive candidate steps {list(candidate_steps)}, so SGLang "
            "refuses to start (--speculative-num-steps must be one of them)")
