"""Seeded per-position acceptance: how many draft tokens the target accepts in one verify pass.

Draft position i is accepted with probability p_i given that positions 1..i-1 were accepted (a chain:
the first rejection ends the cycle). The committed tokens per cycle are accepted drafts + 1 bonus token
sampled by the target, so the accept length lies in [1, depth + 1]. With topk > 1 each position offers
topk candidates, so p_i becomes 1 - (1 - p_i)^topk.

The probabilities follow the content (docs/simulator.md, "Acceptance by content"): each prompt category
(sglab.sim.content.classify) has its own p_i; `random` text keeps the profile's calibrated ones. Content
categories are for chat-templated prompts; raw text without a template accepts less
(RAW_PROMPT_ACCEPT_FACTOR). Far into a reply acceptance decays slowly towards 1 (position_factor).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sglab.sim.content import RANDOM


@dataclass(frozen=True)
class CategoryProfile:
    """A prompt category's conditional acceptance (topk 1) and its natural reply length range in tokens."""

    by_position: tuple[float, ...]
    tail: float
    natural_tokens: tuple[int, int]


# Assumptions, ordered like SPEED-Bench's per-category findings (code/maths high, open chat lower,
# translation lowest of the real categories) and anchored on the calibrated random text: the article's
# accept length of 2.1 (5 steps) came from real prompts, so templated chat sits only a little above it and
# untemplated chat (RAW_PROMPT_ACCEPT_FACTOR) about on it. E[a] per category: docs/simulator.md.
CATEGORY_PROFILES: dict[str, CategoryProfile] = {
    "code": CategoryProfile((0.66, 0.70, 0.78, 0.80, 0.82), 0.83, (150, 600)),
    "maths": CategoryProfile((0.63, 0.68, 0.77, 0.79, 0.81), 0.82, (120, 500)),
    "extraction": CategoryProfile((0.61, 0.66, 0.76, 0.79, 0.80), 0.81, (40, 200)),
    "summarisation": CategoryProfile((0.55, 0.60, 0.75, 0.78, 0.80), 0.80, (60, 250)),
    "long-context": CategoryProfile((0.54, 0.58, 0.75, 0.78, 0.80), 0.80, (100, 400)),
    "chat": CategoryProfile((0.52, 0.56, 0.75, 0.78, 0.80), 0.80, (80, 400)),
    "translation": CategoryProfile((0.49, 0.53, 0.74, 0.78, 0.794), 0.80, (40, 300)),
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

    def __init__(self, by_position: tuple[float, ...], tail: float, *, depth: int, topk: int = 1) -> None:
        self.default = AcceptanceModel.build(by_position, tail, depth=depth, topk=topk)
        self._depth, self._topk = depth, topk
        self._models: dict[tuple[str, bool], AcceptanceModel] = {}

    def model(self, category: str, templated: bool) -> AcceptanceModel:
        profile = CATEGORY_PROFILES.get(category)
        if category == RANDOM or profile is None:
            return self.default
        key = (category, templated)
        if key not in self._models:
            factor = 1.0 if templated else RAW_PROMPT_ACCEPT_FACTOR
            self._models[key] = AcceptanceModel.build(profile.by_position, profile.tail, depth=self._depth,
                                                      topk=self._topk, factor=factor)
        return self._models[key]


def natural_tokens(category: str, default: tuple[int, int]) -> tuple[int, int]:
    """The range a request's natural (EOS) length is drawn from: its category's, or the profile's."""
    profile = CATEGORY_PROFILES.get(category)
    return default if profile is None else profile.natural_tokens
