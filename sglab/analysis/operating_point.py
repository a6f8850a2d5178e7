"""The operating point: which levels the gate judged, which it did not, and where the candidate loses.

A verdict at one level says nothing about the others. Every measured level where the candidate is
slower on the gate metric is named (with its interval), with the advice that follows from it ("do
not serve ≥ 2 concurrent requests with this config"); the levels measured but not gated are said
plainly. With `sglab:traffic` the gate runs at each traffic level (non-inferiority where declared).

Speculation economics, the article's break-even arithmetic from measured numbers: a speculative server emits
`accept_length` tokens per verify cycle, the baseline one token per decode step, so speculation wins exactly
when accept_length exceeds the break-even accept length verify_cycle_ms / baseline_step_ms. The crossover is
the level where the gain reaches zero.
"""

from __future__ import annotations

import math
from functools import partial

from sglab import metrics
from sglab.analysis.samples import ArmLevelStats
from sglab.config.policy import PromotionPolicy
from sglab.schema.result import RunResult
from sglab.schema.verdict import LOSS_PREFIX, Crossover, Economics, LevelVerdict, OperatingPoint, pct

__all__ = ["Crossover", "Economics", "crossover", "effective_policy", "level_economics", "level_label", "level_phrase",
           "operating_point", "slo_targets"]


def effective_policy(policy: PromotionPolicy) -> PromotionPolicy:
    """The gate as judged: with traffic declared, its levels are the policy's."""
    traffic = policy.traffic
    if traffic is None:
        return policy
    update = {}
    if policy.levels != traffic.levels:
        update["levels"] = list(traffic.levels)
    return policy.model_copy(update=update) if update else policy


def slo_targets(policy: PromotionPolicy) -> metrics.SloTargets | None:
    slo = policy.slo
    if slo is None:
        return None
    return metrics.SloTargets(ttft_ms=slo.ttft_ms, tpot_ms=slo.tpot_ms, itl_ms=slo.itl_ms,
                              itl_quantile=slo.itl_quantile)


def level_label(result: RunResult) -> str:
    """The run's load profile (what a level is): concurrency, rate or trace."""
    plan = result.load_plan
    profile = (plan.get("profile") if plan is not None else None) or result.loadgen.profile
    return str(profile or "concurrency")


def level_phrase(label: str, level: int | float | str | list[int]) -> str:
    """How a sentence names a level: 'concurrency 16', '8 req/s', 'the trace'."""
    text = f"{level:g}" if isinstance(level, float) else str(level)
    if label == "rate":
        return f"{text} req/s"
    if label == "trace":
        return "the trace replay"
    return f"{label} {text}"


def _serve_phrase(label: str, threshold: int) -> str:
    if label == "rate":
        return f"do not serve ≥ {threshold} req/s with this config"
    if label == "trace":
        return "do not serve this trace's traffic with this config"
    if threshold <= 1:
        return "do not serve this config at any measured concurrency"
    return f"do not serve ≥ {threshold} concurrent requests with this config"


def _shown_slower(level: LevelVerdict, metric: str) -> bool:
    """The interval lies below no change; a level without an interval counts by its estimate."""
    g = level.gain(metric)
    return g.high < 0 if g.high is not None else (g.estimate or 0.0) < 0


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def operating_point(result: RunResult, levels: list[LevelVerdict], policy: PromotionPolicy, crossover: Crossover,
                    *, has_blockers: bool) -> OperatingPoint:
    label = level_label(result)
    words = metrics.label(policy.metric)
    conf = f"{policy.confidence:.0%} CI"
    gated = [lv.concurrency for lv in levels if lv.gating]
    ungated = [lv.concurrency for lv in levels if not lv.gating]
    losing = [lv for lv in levels if (lv.gain(policy.metric).estimate or 0.0) < 0]
    point = OperatingPoint(level_label=label, gated_by="traffic" if policy.traffic is not None else "policy.levels",
                           gated=gated, ungated=ungated, losing=[lv.concurrency for lv in losing])
    if losing:
        parts = []
        for i, lv in enumerate(losing):
            g = lv.gain(policy.metric)
            unit = f" {words}" if i == 0 else ""
            noise = "" if _shown_slower(lv, policy.metric) else ", which includes no change"
            parts.append(f"{pct(g.estimate)}{unit} at {level_phrase(label, lv.concurrency)} "
                         f"({conf} {pct(g.low)} to {pct(g.high)}{noise})")
        shown = [lv for lv in losing if _shown_slower(lv, policy.metric)]
        point.slower = [lv.concurrency for lv in shown]
        if shown:
            threshold = min(lv.concurrency for lv in shown)
            if (policy.metric == "decode_tok_per_s" and crossover.status == "between"
                    and crossover.concurrency is not None and crossover.concurrency <= threshold):
                threshold = max(1, math.ceil(crossover.concurrency))
            advice = _serve_phrase(label, threshold)
        else:  # a negative estimate inside the noise (an A/A run's -0.1%) is no reason to avoid a level
            advice = "within the noise, not shown to be slower"
        point.loss_text = f"{LOSS_PREFIX}{_listing(parts)}: {advice}."
    if ungated and gated and not has_blockers:
        judged = level_phrase(label, _listing([str(c) for c in gated]))  # 'concurrency 1', '1 req/s'
        others = _listing([str(c) for c in ungated])
        if label == "rate":  # '4 and 16 req/s'; a concurrency run's stay bare ('4 and 16')
            others = level_phrase(label, others)
        if policy.traffic is None:
            point.not_gated_text = (f"Only {judged} was judged (policy.levels; no sglab:traffic declared): "
                                    f"{others} {'was' if len(ungated) == 1 else 'were'} measured but not gated.")
        else:
            outside = others if label == "rate" else f"{label} {others}"
            point.not_gated_text = (f"{outside[:1].upper()}{outside[1:]} {'was' if len(ungated) == 1 else 'were'} "
                                    "measured outside the declared traffic and not gated.")
    traffic = policy.traffic
    if traffic is not None and traffic.weights is not None:
        logs, total = 0.0, 0.0
        for lv in levels:
            g = lv.gain(policy.metric)
            if lv.gating and g.estimate is not None and g.estimate > -1:
                w = traffic.weight_of(lv.concurrency) if lv.concurrency in traffic.levels else 0.0
                logs += w * math.log1p(g.estimate)
                total += w
        point.weighted_gain = math.expm1(logs / total) if total > 0 else None
    return point


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
