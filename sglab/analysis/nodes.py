"""What a level's rounds estimate under the design that placed the arms on machines (pure, no I/O).

Two arms measured at once on two nodes measure (config effect + node effect): nodes of one SKU differ by up
to 8% (docs/verdict.md, "Same conditions on real nodes"). The design, read from the rounds themselves
(RoundSample.period and .node: evidence is recomputed, never trusted), says what one estimate is:

- parallel (no period): one per paired round, log(candidate / baseline); it includes any difference between
  the two nodes (PARALLEL_NOTE).
- crossover (both arms in every round, periods from 1): odd periods are the first placement, even ones the
  swapped placement; the j-th round of period 2k-1 pairs with the j-th round of period 2k. Per pair the mean
  of the two log ratios is the config effect (the node difference cancels) and half their difference is the
  node effect (the candidate's first node over the baseline's first node). Unpaired rounds give none.
- switchback (one arm per round, one node): periods in ABBA blocks (4b+1 and 4b+4 the baseline, 4b+2 and
  4b+3 the candidate); per complete block mean(log metric, candidate periods) - mean(baseline periods), each
  period's value the mean of its rounds' log metric; a linear drift cancels by the order.

Every estimate is oriented so that larger is better (the metric's direction) and carries the round count at
which it completed, so the sequence looks once per new estimate and a stop maps back to the rounds measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sglab import metrics
from sglab.analysis.samples import mean_ci, per_round
from sglab.schema.result import LevelResult, RoundSample
from sglab.schema.verdict import NodeEffect

Design = Literal["parallel", "crossover", "switchback"]
DESIGNS: tuple[Design, ...] = ("parallel", "crossover", "switchback")
BALANCED: tuple[Design, ...] = ("crossover", "switchback")
PARALLEL_NOTE = "includes any difference between the two nodes"
ARMS = ("baseline", "candidate")
_BLOCK = 4  # a switchback's ABBA block, in periods


def rounds_for_looks(design: Design, looks: int, period_rounds: int) -> int:
    """The rounds a design takes to give the sequence `looks` estimates: one per round in parallel; a crossover
    pairs the period_rounds rounds of each odd period with the next period's, so whole cycles of two periods; a
    switchback's ABBA block is four periods."""
    if design == "crossover":
        return -(-looks // period_rounds) * 2 * period_rounds
    if design == "switchback":
        return looks * _BLOCK * period_rounds
    return looks


@dataclass(frozen=True)
class Estimate:
    """One estimate of the config effect: `value` log(candidate over baseline), larger is better; `rounds` the
    level's measured rounds when it completed; `node` (crossover) the pair's log node effect."""

    value: float
    rounds: int
    node: float | None = None


@dataclass(frozen=True)
class DesignEstimates:
    """A level's estimates under its design, in order of completion."""

    design: Design
    estimates: tuple[Estimate, ...] = ()
    first_nodes: tuple[str | None, str | None] = (None, None)  # (baseline's, candidate's) in period 1
    pending: str | None = None  # what cannot be estimated yet, in words (crossover period 1 alone)
    problems: tuple[str, ...] = field(default_factory=tuple)  # the rounds do not follow the design's layout
    rounds_per_estimate: int = 1  # measured rounds one more estimate costs (a crossover's pair: 2)

    @property
    def values(self) -> list[float]:
        return [e.value for e in self.estimates]

    @property
    def note(self) -> str | None:
        """What the estimate includes that it should not: parallel's node difference."""
        return PARALLEL_NOTE if self.design == "parallel" else None

    def rounds_at(self, estimates: int) -> int:
        """The measured rounds when the `estimates`-th estimate completed (0 for none)."""
        return self.estimates[estimates - 1].rounds if estimates > 0 else 0

    def node_effect(self, confidence: float = 0.95) -> NodeEffect | None:
        """The crossover's node effect with its interval; None for other designs, or without a pair."""
        nodes = [e.node for e in self.estimates if e.node is not None]
        if self.design != "crossover" or not nodes:
            return None
        base_node, cand_node = self.first_nodes
        ci = mean_ci(np.asarray(nodes), confidence=confidence, method="paired-t")
        estimate, low, high = ci.as_gain()
        return NodeEffect(node=cand_node or "of the candidate in period 1", other=base_node or "of the baseline in "
                       "period 1", estimate=estimate, low=low, high=high, pairs=ci.n, confidence=confidence)


def _measured(level: LevelResult) -> list[RoundSample]:
    return [s for s in level.rounds if not s.warmup and s.round_index >= 0]


def design_of(level: LevelResult, arms: tuple[str, str] = ARMS) -> Design:
    """The design the level's rounds were laid out in: no period is parallel; both arms in every round of a
    period is a crossover; one arm per round a switchback."""
    samples = [s for s in _measured(level) if s.arm in arms]
    if all(s.period is None for s in samples):
        return "parallel"
    per_round_arms: dict[int, set[str]] = {}
    for s in samples:
        per_round_arms.setdefault(s.round_index, set()).add(s.arm)
    both = sum(len(a) == 2 for a in per_round_arms.values())
    return "crossover" if both * 2 >= len(per_round_arms) else "switchback"


def _orient(metric: str, base: float, cand: float) -> float:
    worse, better = metrics.get(metric).improvement(base, cand)
    return math.log(better / worse)


def _position(level: LevelResult) -> dict[int, int]:
    """round_index -> measured rounds up to and including it."""
    return {i: n for n, i in enumerate(sorted({s.round_index for s in _measured(level)}), start=1)}


def _parallel(level: LevelResult, metric: str, arms: tuple[str, str], slo) -> DesignEstimates:
    table = per_round(level, metric, slo)
    rounds = sorted(i for i, v in table.items() if all(v.get(a, 0) > 0 for a in arms))
    out = [Estimate(_orient(metric, table[i][arms[0]], table[i][arms[1]]), n) for n, i in enumerate(rounds, 1)]
    return DesignEstimates("parallel", tuple(out))


def _periods(samples: list[RoundSample]) -> tuple[dict[int, list[int]], list[str]]:
    """period -> its round indices in order, and the rounds whose arms disagree on their period."""
    of_round: dict[int, set[int | None]] = {}
    for s in samples:
        of_round.setdefault(s.round_index, set()).add(s.period)
    problems = [f"round {i + 1} has samples in periods {sorted(p, key=str)}" for i, p in sorted(of_round.items())
                if len(p) > 1 or None in p]
    periods: dict[int, list[int]] = {}
    for i, p in sorted(of_round.items()):
        if len(p) == 1 and None not in p:
            periods.setdefault(next(iter(p)), []).append(i)
    return periods, problems


def _node(samples: list[RoundSample], arm: str, rounds: list[int]) -> str | None:
    found = {s.node for s in samples if s.arm == arm and s.round_index in rounds}
    return next(iter(found)) if len(found) == 1 else None


def _crossover(level: LevelResult, metric: str, arms: tuple[str, str], slo) -> DesignEstimates:
    samples = [s for s in _measured(level) if s.arm in arms]
    periods, problems = _periods(samples)
    base, cand = arms
    first = periods.get(1, [])
    first_nodes = (_node(samples, base, first), _node(samples, cand, first))
    for p, rounds in sorted(periods.items()):
        b, c = _node(samples, base, rounds), _node(samples, cand, rounds)
        want = first_nodes if p % 2 else first_nodes[::-1]
        if None not in (b, c, *first_nodes) and (b, c) != want:
            problems.append(f"in period {p} the baseline ran on node {b} and the candidate on node {c}, not the "
                            f"crossover's {want[0]} and {want[1]} (the arms swap nodes between periods)")
    table = per_round(level, metric, slo)
    position = _position(level)
    out: list[Estimate] = []
    for odd in sorted(p for p in periods if p % 2):
        for r1, r2 in zip(periods[odd], periods.get(odd + 1, [])):
            v1, v2 = table.get(r1, {}), table.get(r2, {})
            if not all(v.get(a, 0) > 0 for v in (v1, v2) for a in arms):
                continue
            first_log = _orient(metric, v1[base], v1[cand])
            second_log = _orient(metric, v2[base], v2[cand])
            out.append(Estimate((first_log + second_log) / 2, position[max(r1, r2)], (first_log - second_log) / 2))
    out.sort(key=lambda e: e.rounds)
    pending = None
    if not out and first:
        where = (f" (baseline on node {first_nodes[0]}, candidate on node {first_nodes[1]})"
                 if None not in first_nodes else "")
        pending = (f"period 1 alone{where} measures the config and the node difference together: no estimate of "
                   "the config effect until the arms swap nodes and period 2 pairs its rounds with period 1's")
    return DesignEstimates("crossover", tuple(out), first_nodes, pending, tuple(problems), 2)


def _switchback(level: LevelResult, metric: str, arms: tuple[str, str], slo) -> DesignEstimates:
    samples = [s for s in _measured(level) if s.arm in arms]
    periods, problems = _periods(samples)
    table = per_round(level, metric, slo)
    higher = metrics.get(metric).direction == "higher"
    position = _position(level)
    value: dict[int, float] = {}
    for p, rounds in sorted(periods.items()):
        want = arms[0] if (p - 1) % _BLOCK in (0, _BLOCK - 1) else arms[1]
        served = {s.arm for s in samples if s.round_index in rounds}
        if served != {want}:
            problems.append(f"period {p} measured {', '.join(sorted(served))}, not the {want} an ABBA block "
                            "serves there")
            continue
        logs = [math.log(table[i][want]) for i in rounds if table.get(i, {}).get(want, 0) > 0]
        if logs:
            value[p] = float(np.mean(logs)) * (1 if higher else -1)
    out: list[Estimate] = []
    for start in range(1, max(periods, default=0) + 1, _BLOCK):
        block = range(start, start + _BLOCK)
        if not all(p in value for p in block):
            continue
        a, b1, b2, a2 = (value[p] for p in block)
        out.append(Estimate((b1 + b2) / 2 - (a + a2) / 2, position[max(periods[start + _BLOCK - 1])]))
    pending = None
    if not out and periods:
        pending = (f"a switchback estimates once an ABBA block of {_BLOCK} periods is complete "
                   f"({len(periods)} of {_BLOCK} periods so far)")
    node = _node(samples, arms[0], [s.round_index for s in samples])
    per_period = max((len(r) for r in periods.values()), default=1)
    return DesignEstimates("switchback", tuple(out), (node, node), pending, tuple(problems), _BLOCK * per_period)


def design_estimates(level: LevelResult, metric: str, arms: tuple[str, str] = ARMS, slo=None) -> DesignEstimates:
    """The level's estimates of the config effect of `metric` under the design its rounds follow."""
    design = design_of(level, arms)
    if design == "crossover":
        return _crossover(level, metric, arms, slo)
    if design == "switchback":
        return _switchback(level, metric, arms, slo)
    return _parallel(level, metric, arms, slo)
