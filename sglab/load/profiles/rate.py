"""Open loop: requests arrive at a given rate whether or not earlier ones have finished (level = req/s).

bench_serving's `--request-rate` convention: Poisson arrivals by default (exponential gaps of mean
1/rate), `constant` for evenly spaced ones; the first request at the segment's start. The schedule
is seeded per (seed, level, round), so every arm of a round gets the same arrival times for the same
prompts. At most `load.rate.max-in-flight` requests run at once (that many Locust users): an arrival
that finds them all busy starts late, when one frees up (bench_serving's --max-concurrency).
"""

from __future__ import annotations

import random

from sglab.load.profiles.base import LoadProfile, Pacing
from sglab.load.profiles.registry import register


class Arrivals(Pacing):
    """Arrival offsets, drawn lazily from one seeded stream (the n-th is always the same)."""

    def __init__(self, rate_per_s: float, *, poisson: bool, seed: str) -> None:
        self.rate_per_s = rate_per_s
        self.poisson = poisson
        self._rng = random.Random(seed)
        self._offsets = [0.0]

    def start_offset_s(self, index: int) -> float:
        while len(self._offsets) <= index:
            gap = self._rng.expovariate(self.rate_per_s) if self.poisson else 1.0 / self.rate_per_s
            self._offsets.append(self._offsets[-1] + gap)
        return self._offsets[index]


@register
class RateProfile(LoadProfile):
    name = "rate"
    level_label = "rate (req/s)"
    distributable = False

    def levels(self) -> list[int]:
        return list(self.plan.rate.levels)

    def users_for(self, level: int) -> int:
        return self.plan.rate.max_in_flight

    def pacing(self, level: int, round_index: int) -> Arrivals:
        spec = self.plan.rate
        return Arrivals(float(level), poisson=spec.arrival == "poisson",
                        seed=f"arrivals:{self.plan.seed}:{level}:{round_index}")

    def level_for_users(self, user_count: int) -> int:
        return user_count  # an interactive Locust run has no rate: its level is its user count
