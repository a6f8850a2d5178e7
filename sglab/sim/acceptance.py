"""Seeded per-position acceptance: how many draft tokens the target accepts in one verify pass.

Draft position i is accepted with probability p_i given that positions 1..i-1 were accepted (a chain:
the first rejection ends the cycle). The committed tokens per cycle are accepted drafts + 1 bonus token
sampled by the target, so the accept length lies in [1, depth + 1]. With topk > 1 each position offers
topk candidates, so p_i becomes 1 - (1 - p_i)^topk.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class AcceptanceModel:
    probs: tuple[float, ...]

    @classmethod
    def build(cls, by_position: tuple[float, ...], tail: float, *, depth: int, topk: int = 1) -> "AcceptanceModel":
        """depth = how many draft tokens one cycle can verify: min(num_steps, num_draft_tokens - 1)."""
        base = [by_position[i] if i < len(by_position) else tail for i in range(depth)]
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

    def sample_accepted_drafts(self, rng: random.Random) -> int:
        accepted = 0
        for p in self.probs:
            if rng.random() >= p:
                break
            accepted += 1
        return accepted
