"""Seeded per-position acceptance: how many draft tokens the target accepts in one verify pass.

Draft position i is accepted with probability p_i given that positions 1..i-1 were accepted (a chain:
the first rejection ends the cycle). The committed tokens per cycle are accepted drafts + 1 bonus token
sampled by the target, so the accept length lies in [1, depth + 1]. With topk > 1 each position offers
topk candidates, so p_i becomes 1 - (1 - p_i)^topk.

The probabilities follow the content (docs/simulator.md, "Acceptance by content"): each prompt category
(sglab.sim.tokens.classify) has its own p_i; `random` text keeps the profile's calibrated ones. Content
categories are for chat-templated prompts; raw text without a template accepts less
(RAW_PROMPT_ACCEPT_FACTOR). Far into a reply acceptance decays slowly towards 1 (position_factor).

NGRAM speculation has no draft model: its drafts' acceptance follows repetition in the context. SGLang's NGRAM
worker proposes, for each request, continuations of the last tokens that it finds in a trie of n-grams seen before
(the request's own prompt and output, and earlier requests'). A proposal is right when the text repeats itself: code
that reuses identifiers, extraction that copies spans of the input, summaries that quote it. So the simulator reads,
per request, the share of the prompt's word 3-grams that already occurred earlier in the prompt (`repetition`, 0 for
text that never repeats itself), and accepts draft position i of a match with probability

    p_i = min(ngram_accept_max, ngram_accept_base + ngram_accept_gain * repetition) * ngram_accept_decay^(i-1)

(a match is a chain: the first wrong token ends it). The constants are profile fields (docs/simulator.md,
"NGRAM"), assumptions to calibrate against a real server, not measurements.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from sglab.sim.profile import SimProfile
from sglab.sim.tokens import RANDOM


@dataclass(frozen=True)
class CategoryProfile:
    """A prompt category's conditional acceptance (topk 1) and its natural reply length range in tokens."""

    by_position: tuple[float, ...]
    tail: float
    natural_tokens: tuple[int, int]


# Assumptions, ordered like SPEED-Bench's per-category findings (code/maths high, open chat lower,
# translation lowest of the real categories) and centred on the calibrated random text: the article's
# accept length (2.1 at 5 steps) came from real prompts, so the bundled suite's category mix (templated, by
# request) reproduces the calibrated E[a] at every depth 1..5 within 0.5% (benchmarks/suite_acceptance.py).
# Each category is the calibrated p_i plus its own offset (CATEGORY_ACCEPT_OFFSETS, docs/simulator.md) plus
# one shift per position that centres the suite mix, rounded to 3 decimals; the tail matches depth 7.
CATEGORY_ACCEPT_OFFSETS = {"code": 0.08, "maths": 0.06, "extraction": 0.03, "summarisation": -0.01,
                           "long-context": -0.025, "chat": -0.04, "translation": -0.065}
CATEGORY_PROFILES: dict[str, CategoryProfile] = {
    "code": CategoryProfile((0.535, 0.571, 0.805, 0.841, 0.852), 0.854, (150, 600)),
    "maths": CategoryProfile((0.515, 0.551, 0.785, 0.821, 0.832), 0.834, (120, 500)),
    "extraction": CategoryProfile((0.485, 0.521, 0.755, 0.791, 0.802), 0.804, (40, 200)),
    "summarisation": CategoryProfile((0.445, 0.481, 0.715, 0.751, 0.762), 0.764, (60, 250)),
    "long-context": CategoryProfile((0.430, 0.466, 0.700, 0.736, 0.747), 0.749, (100, 400)),
    "chat": CategoryProfile((0.415, 0.451, 0.685, 0.721, 0.732), 0.734, (80, 400)),
    "translation": CategoryProfile((0.390, 0.426, 0.660, 0.696, 0.707), 0.709, (40, 300)),
}
RAW_PROMPT_ACCEPT_FACTOR = 0.9  # p_i multiplier for a content category sent as raw text (no chat template)
ACCEPT_DECAY_START_TOKENS = 512  # acceptance is unchanged for the first this-many output tokens
ACCEPT_DECAY_HALF_LIFE_TOKENS = 4096  # then every p_i halves over this many further output tokens


def position_factor(output_position: int) -> float:
    """The multiplier on every p_i at this output position: 1.0, then a slow exponential decay."""
    beyond = output_position - ACCEPT_DECAY_START_TOKENS
    return 1.0 if beyond <= 0 else 0.5 ** (beyond / ACCEPT_DECAY_HALF_LIFE_TOKENS)


@dataclass(frozen=True)
class AcceptanceModel:
    probs: tuple[float, ...]

    @classmethod
    def build(cls, by_position: tuple[float, ...], tail: float, *, depth: int, topk: int = 1,
              factor: float = 1.0) -> "AcceptanceModel":
        """depth = how many draft tokens one cycle can verify: min(num_steps, num_draft_tokens - 1)."""
        base = [(by_position[i] if i < len(by_position) else tail) * factor for i in range(depth)]
        return cls(tuple(1.0 - (1.0 - p) ** topk for p in base))

    @property
    def depth(self) -> int:
        return len(self.probs)

    def expected_accept_length(self) -> float:
        """E[accepted drafts + 1] = 1 + sum over j of P(positions 1..j all accepted)."""
        total, survive = 1.0, 1.0
        for p in self.probs:
            survive *= p
            total += survive
        return total

    def distribution(self) -> list[float]:
        """P(exactly n drafts accepted) for n = 0..depth."""
        out, survive = [], 1.0
        for p in self.probs:
            out.append(survive * (1.0 - p))
            survive *= p
        out.append(survive)
        return out

    def sample_accepted_drafts(self, rng: random.Random, scale: float = 1.0) -> int:
        """One cycle's accepted drafts; `scale` multiplies every p_i (position_factor)."""
        accepted = 0
        for p in self.probs:
            if rng.random() >= p * scale:
                break
            accepted += 1
        return accepted


class ContentAcceptance:
    """The acceptance model of each (category, templated) pair for one server's speculative shape."""

    def __init__(self, by_position: tuple[float, ...], tail: float, *, depth: int, topk: int = 1,
                 factor: float = 1.0) -> None:
        """factor: a multiplier on every p_i for drafts weaker than EAGLE-3's head (STANDALONE)."""
        self.default = AcceptanceModel.build(by_position, tail, depth=depth, topk=topk, factor=factor)
        self._depth, self._topk, self._factor = depth, topk, factor
        self._models: dict[tuple[str, bool], AcceptanceModel] = {}

    def model(self, category: str, templated: bool) -> AcceptanceModel:
        profile = CATEGORY_PROFILES.get(category)
        if category == RANDOM or profile is None:
            return self.default
        key = (category, templated)
        if key not in self._models:
            factor = (1.0 if templated else RAW_PROMPT_ACCEPT_FACTOR) * self._factor
            self._models[key] = AcceptanceModel.build(profile.by_position, profile.tail, depth=self._depth,
                                                      topk=self._topk, factor=factor)
        return self._models[key]


def acceptance_rng(seed: int, run_seed: int, request_seq: int) -> random.Random:
    """The acceptance draws of one request: the server's seed, the bench run's seed (so a re-run draws anew
    rather than replaying the run before) and the request's arrival number. Run seed 0 (a simulator started
    by hand) draws what the simulator drew before runs had seeds of their own."""
    return random.Random(f"accept:{seed}:{run_seed}:{request_seq}" if run_seed else f"accept:{seed}:{request_seq}")


def natural_tokens(category: str, default: tuple[int, int]) -> tuple[int, int]:
    """The range a request's natural (EOS) length is drawn from: its category's, or the profile's."""
    profile = CATEGORY_PROFILES.get(category)
    return default if profile is None else profile.natural_tokens


# NGRAM speculation: draft-free drafts whose acceptance follows repetition in the context.
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
