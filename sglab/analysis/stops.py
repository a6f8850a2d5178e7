"""Where a sequential level stopped and why, recomputed from its rounds (never read from the record alone).

The bench's sequential controller (sglab/bench/sequential.py) asks `sequential_test` after every round at a
sequentially run level; these are the pure parts both it and the verdict's evidence checks use: the gain
that level must clear, its estimates (per-round log-ratios, or the design's: sglab/analysis/nodes.py), the
sentence that says where it stopped, and the rounds its sequence says it should have measured.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from sglab.analysis.operating_point import slo_targets
from sglab.analysis.sequential import STANDARD, Look, SequentialRecord, sequential_test
from sglab.analysis.nodes import ARMS, DesignEstimates, design_estimates, design_of
from sglab.schema.result import LevelResult, RunResult


class StopLine(NamedTuple):
    """What a sequentially run level is judged against: the gain to clear and the checks (policy.checks) of the
    policy that gates it there (the stack's own, or its promotion target's)."""

    gain: float
    checks: str


def threshold_for(policy, level: int) -> float:
    """The gain a gated level must clear: min-gain, or -margin where sglab:traffic declares non-inferiority."""
    traffic = getattr(policy, "traffic", None)
    margin = traffic.non_inferiority.get(level) if traffic is not None else None
    return -margin if margin is not None else policy.min_gain


def line_for(policy, level: int) -> StopLine:
    return StopLine(threshold_for(policy, level), policy.checks)


def level_estimates(level: LevelResult, metric: str, policy=None, arms: tuple[str, str] = ARMS) -> DesignEstimates:
    """The level's estimates of log(candidate / baseline) of `metric` under the design its rounds follow (one
    per paired round in parallel, per pair of periods in a crossover, per ABBA block in a switchback), oriented
    so that larger is better; a goodput metric is computed under `policy`'s SLO (without it a goodput metric has
    no rounds)."""
    slo = slo_targets(policy) if policy is not None else None
    return design_estimates(level, metric, arms, slo)


def level_log_ratios(level: LevelResult, metric: str, policy=None) -> list[float]:
    """What the sequence looks at, one value per estimate (level_estimates)."""
    return level_estimates(level, metric, policy).values


def _pct(x: float | None) -> str:
    return "unbounded" if x is None else f"{x:+.1%}"


ESTIMATE_UNIT = {"parallel": "round", "crossover": "pair", "switchback": "block"}  # what one look counts


def stop_reason(level: int, record: SequentialRecord, label: str = "c", *, design: str = "parallel",
                measured_rounds: int | None = None) -> str:
    """One line: where a gated level stopped and why, e.g. `c=1: promote at round 9 of at most 32: the 95%
    confidence sequence [+1.2%, +5.0%] clears +0.5%`. Under a crossover or switchback the sequence looks once per
    pair or block, so the line counts those and, given `measured_rounds`, the rounds they took."""
    look: Look | None = record.last
    limit = record.max_rounds if record.max_rounds is None else record.earlier_rounds + record.max_rounds
    unit = ESTIMATE_UNIT.get(design, "round")
    if unit == "round":
        head = f"{label}={level}: {record.decision} at round {record.rounds} of at most {limit}"
    else:
        took = f", round {measured_rounds}" if measured_rounds is not None else ""
        head = f"{label}={level}: {record.decision} at {unit} {record.rounds} ({design}{took})"
    if record.checks != STANDARD.name:
        head += f" ({record.checks} checks)"
    if record.earlier_rounds:
        head += f" (the first {record.earlier_rounds} from earlier runs of this pair)"
    if look is None:
        return f"{head}: no paired round"
    cs = f"the {record.confidence:.0%} confidence sequence"
    band = f"[{_pct(look.low)}, {_pct(look.high)}]"
    line = f"{math.expm1(record.threshold_log):+.1%}"
    if record.decision == "promote":
        why = f"{cs} {band} clears {line}"
    elif record.decision == "reject":
        why = f"{cs} {band} lies below {line}"
    elif record.decision == "futile":
        why = (f"{cs} {band} could not clear {line} by round {limit} even if the gain were its upper "
               f"end (futility stop, never a promotion)")
    elif record.decision == "inconclusive":
        why = f"{cs} {band} still straddles {line} at the last allowed round"
    else:
        why = f"{cs} {band} has not decided yet"
    held = [n for n in record.notes if n]
    return f"{head}: {why} (gain {look.estimate:+.1%})" + (f"; {'; '.join(held)}" if held else "")


def decided_rounds(result: RunResult, policy, earlier: dict[int, list[float]] | None = None) -> dict[int, int]:
    """Per sequentially run level: the rounds it should have measured, recomputed from its own rounds (its first
    decision, else its max rounds = the recorded load.rounds). For the evidence checks: a run that stopped before
    its sequence decided, or went on after, does not match its plan. `earlier`: level -> the log-ratios of the
    earlier runs its sequence continues (sglab/analysis/accumulate.py).

    Only a run that says it stopped on its sequence (result.sequential, written by the bench) is checked this
    way; the looks' contents are not trusted, only recomputed: each level's thresholds (the source policy's and
    any the promotion target's gate added, sglab/bench/sequential.py) are recomputed from the recorded policy and
    stop rule. A run without looks ran its plan's fixed rounds (a fixed-n run judged with the sequence is judged
    validly, only more strictly), and an early-stopped run whose looks were removed misses the rounds its plan
    (the max rounds) names."""
    if getattr(policy, "method", None) != "sequential" or result.load_plan is None or result.sequential is None:
        return {}
    limit = result.load_plan.rounds
    thresholds = stop_thresholds(result, policy)
    out = {}
    for level in result.levels:
        lines = thresholds.get(level.concurrency)
        if not lines:
            continue
        before = (earlier or {}).get(level.concurrency, [])
        found = level_estimates(level, policy.metric, policy)
        ratios = before + found.values
        stops = []
        for line in lines:
            record = sequential_test(ratios, min_gain=line.gain, confidence=policy.confidence,
                                     min_rounds=policy.min_rounds, max_rounds=limit, futility=True,
                                     earlier_rounds=len(before), checks=line.checks)
            decided = record.decision != "continue"
            stops.append(found.rounds_at(record.rounds - len(before)) if decided else limit)
        out[level.concurrency] = max(stops)  # a level runs until every line it is judged against has decided
    return out


def stop_thresholds(result: RunResult, policy) -> dict[int, list[StopLine]]:
    """level -> the lines a sequentially run level stopped against: the policy's own at its gated levels, plus
    those the run recorded for its promotion target's gate (result.sequential.stop_rule)."""
    out: dict[int, list[StopLine]] = {lv: [line_for(policy, lv)] for lv in policy.levels}
    recorded = result.sequential.stop_rule if result.sequential is not None else {}
    for key, lines in recorded.items():
        found = out.setdefault(int(key), [])
        for line in map(StopLine._make, lines):
            if line not in found:
                found.append(line)
    return out


def stop_lines(result: RunResult, label: str = "c") -> list[str]:
    """The recorded stop of every sequentially run level (for the end of the console output)."""
    out: list[str] = []
    if result.sequential is None:
        return out
    for concurrency, record in result.sequential.levels.items():
        level = result.level(concurrency)
        design = design_of(level) if level is not None else "parallel"
        rounds = len({s.round_index for s in level.rounds if not s.warmup and s.round_index >= 0}) if level else None
        for each in [record, *result.sequential.others.get(str(concurrency), [])]:
            out.append(stop_reason(concurrency, each, label, design=design, measured_rounds=rounds))
    return out
