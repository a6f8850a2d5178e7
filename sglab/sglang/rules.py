"""What SGLang's ServerArgs does with the speculative flags, including what it changes without saying so.

From sglang/srt/server_args.py (0.4.x to 0.5.x): the algorithm names; which algorithms load a draft
model; NEXTN is run as EAGLE; with any speculative algorithm and no --max-running-requests the server
forces 48; with none of --speculative-num-steps/-eagle-topk/-num-draft-tokens set it picks a shape
itself ((3, 1, 4) for most models, (5, 4, 8) for Llama/Grok), with only some of them set it asserts;
with eagle-topk 1 it silently sets num-draft-tokens to num-steps + 1.

sglab's config refuses everything SGLang would silently change, so a benchmark always says what it
measured; the simulator applies the same changes the way SGLang does. Both read these rules.
"""

from __future__ import annotations

SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
DRAFT_MODEL_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE")
# SGLang runs NEXTN (DeepSeek's multi-token prediction head) through its EAGLE worker and reports EAGLE.
ALGORITHM_ALIASES = {"NEXTN": "EAGLE"}
# SGLang forces max_running_requests to this for these algorithms when the flag is unset.
FORCED_MAX_RUNNING_REQUESTS = 48
FORCES_MAX_RUNNING = SPECULATIVE_ALGORITHMS
AUTO_SPEC_SHAPE = (3, 1, 4)  # (num_steps, eagle_topk, num_draft_tokens) SGLang picks for most models
AUTO_SPEC_SHAPE_LLAMA_GROK = (5, 4, 8)

# Upper bounds of a shape anyone runs: SGLang allocates num_steps x topk draft slots per request and
# captures CUDA graphs for num_draft_tokens tokens per request, so far larger values do not start on a
# GPU (and make the simulator allocate without bound). Published EAGLE-3 configs stay below 10/10/64.
MAX_NUM_STEPS = 32
MAX_EAGLE_TOPK = 64
MAX_NUM_DRAFT_TOKENS = 512


def canonical_algorithm(algorithm: str) -> str:
    """The name the server reports for an algorithm (NEXTN runs as EAGLE)."""
    return ALGORITHM_ALIASES.get(algorithm, algorithm)


def needs_draft_model(algorithm: str) -> bool:
    return algorithm in DRAFT_MODEL_ALGORITHMS


def forces_max_running(algorithm: str | None) -> bool:
    """True when SGLang sets max_running_requests itself for this algorithm if the flag is unset."""
    return algorithm in FORCES_MAX_RUNNING


def shape_partly_set(num_steps: int | None, eagle_topk: int | None, num_draft_tokens: int | None) -> bool:
    """SGLang asserts all three or none are given."""
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


# --speculative-adaptive (SGLang PR #21599): EMA-driven num_steps, one CUDA graph per tier. Only EAGLE/EAGLE3
# with eagle-topk 1; any other configuration silently falls back to static speculation (#23289).
ADAPTIVE_FLAG = "--speculative-adaptive"
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")


def adaptive_fallback(algorithm: str, eagle_topk: int) -> str | None:
    """Why SGLang would silently run this configuration static despite --speculative-adaptive, or None."""
    if canonical_algorithm(algorithm) not in ADAPTIVE_ALGORITHMS:
        return f"algorithm {algorithm} is not EAGLE/EAGLE3"
    if eagle_topk != 1:
        return f"eagle-topk is {eagle_topk}, not 1"
    return None
