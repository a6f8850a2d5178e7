"""NGRAM speculation in the simulator: draft-free drafts whose acceptance follows repetition in the context.

SGLang's NGRAM worker proposes, for each request, continuations of the last tokens that it finds in a trie
of n-grams seen before (the request's own prompt and output, and earlier requests'). A proposal is right
when the text repeats itself: code that reuses identifiers, extraction that copies spans of the input,
summaries that quote it. So the simulator reads, per request, the share of the prompt's word 3-grams that
already occurred earlier in the prompt (`repetition`, 0 for text that never repeats itself), and accepts
draft position i of a match with probability

    p_i = min(ngram_accept_max, ngram_accept_base + ngram_accept_gain * repetition) * ngram_accept_decay^(i-1)

(a match is a chain: the first wrong token ends it). The constants are profile fields (docs/simulator.md,
"NGRAM"), assumptions to calibrate against a real server, not measurements.
"""

from __future__ import annotations

import re

from sglab.sim.acceptance import AcceptanceModel
from sglab.sim.profile import SimProfile

_WORD = re.compile(r"\w+|[^\w\s]")
REPETITION_BUCKETS = 50  # models are cached per 1/50 of repetition


def repetition(text: str) -> float:
    """Share of the text's word 3-grams that occurred earlier in it (0.0 for fewer than two 3-grams)."""
    words = _WORD.findall(text.lower())
    grams = list(zip(words, words[1:], words[2:]))
    if len(grams) < 2:
        return 0.0
    seen: set[tuple[str, str, str]] = set()
    repeats = 0
    for gram in grams:
        if gram in seen:
            repeats += 1
        seen.add(gram)
    return repeats / len(grams)


def ngram_model(profile: SimProfile, depth: int, repetition: float) -> AcceptanceModel:
    """depth: the draft positions one verify can accept (SpecSetup.depth)."""
    first = min(profile.ngram_accept_max, profile.ngram_accept_base + profile.ngram_accept_gain * repetition)
    return AcceptanceModel(tuple(first * profile.ngram_accept_decay ** i for i in range(depth)))


class NgramAcceptance:
    """One server's NGRAM acceptance models, by the request's prompt repetition."""

    def __init__(self, profile: SimProfile, depth: int) -> None:
        self.profile, self.depth = profile, depth
        self._models: dict[int, AcceptanceModel] = {}

    def model(self, repetition: float) -> AcceptanceModel:
        bucket = round(max(0.0, min(1.0, repetition)) * REPETITION_BUCKETS)
        if bucket not in self._models:
            self._models[bucket] = ngram_model(self.profile, self.depth, bucket / REPETITION_BUCKETS)
        return self._models[bucket]
