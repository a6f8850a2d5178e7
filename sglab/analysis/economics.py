"""Speculation economics: the article's break-even arithmetic, from measured numbers.

A speculative server emits `accept_length` tokens per verify cycle; the baseline emits one token per
decode step. Speculation wins exactly when accept_length exceeds the break-even accept length
verify_cycle_ms / baseline_step_ms. The crossover is the concurrency where the gain reaches zero.
"""

from __future__ import annotations

import math
from functools import partial

from sglab.analysis.samples import ArmLevelStats
from sglab.analysis.operating_point import level_phrase
from sglab.schema.verdict import Crossover, Economics

__all__ = ["Crossover", "Economics", "crossover", "level_economics"]


def level_economics(concurrency: int, baseline: ArmLevelStats, candidate: ArmLevelStats) -> Economics:
    econ = Economics(concurrency=concurrency, baseline_step_ms=baseline.itl_mean_ms,
                     candidate_itl_ms=candidate.itl_mean_ms, accept_length=candidate.accept_length,
                     accept_length_source=candidate.accept_length_source)
    if candidate.itl_mean_ms is not None and candidate.accept_length is not None:
        econ.verify_cycle_ms = candidate.itl_mean_ms * candidate.accept_length
        if baseline.itl_mean_ms:
            econ.break_even_accept_length = econ.verify_cycle_ms / baseline.itl_mean_ms
            econ.accept_margin = candidate.accept_length / econ.break_even_accept_length - 1.0
    return econ


def crossover(gains: dict[int, float], label: str = "concurrency") -> Crossover:
    """First level pair where the gain turns from positive to non-positive, interpolated on log2(c).
    `label` is the run's level label (level_label): a rate's crossover is in req/s; a trace replay is one
    level, so it has no crossover to find."""
    levels = sorted(gains)
    if not levels:
        return Crossover(note="no levels measured")
    if label == "trace":
        wins = all(gains[c] > 0 for c in levels)
        return Crossover(concurrency=None if wins else float(levels[0]), status="beyond" if wins else "below",
                         note=f"the candidate {'wins' if wins else 'does not win'} on the trace replay; a trace "
                              "has one level, so there is no crossover to find")
    named = partial(level_phrase, label)  # 'concurrency 4', '4 req/s'
    if all(gains[c] > 0 for c in levels):
        return Crossover(status="beyond", note=f"the candidate still wins at the highest level measured "
                         f"({named(levels[-1])}); crossover is beyond it")
    if gains[levels[0]] <= 0:
        return Crossover(concurrency=float(levels[0]), status="below",
                         note=f"the candidate does not win even at the lowest level ({named(levels[0])})")
    for low, high in zip(levels, levels[1:]):
        if gains[low] > 0 >= gains[high]:
            x0, x1 = math.log2(low), math.log2(high)
            frac = gains[low] / (gains[low] - gains[high])
            at = 2 ** (x0 + frac * (x1 - x0))
            return Crossover(concurrency=round(at, 2), status="between",
                             note=f"the candidate stops winning at about {named(f'{at:.1f}')} "
                                  f"(between {low} and {named(high) if label == 'rate' else high})")
    return Crossover(note="no crossover found")
