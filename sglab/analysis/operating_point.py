"""The operating point: which levels the gate judged, which it did not, and where the candidate loses.

A verdict at one level says nothing about the others. Every measured level where the candidate is
slower on the gate metric is named (with its interval), with the advice that follows from it ("do
not serve ≥ 2 concurrent requests with this config"); the levels measured but not gated are said
plainly. With `sglab:traffic` the gate runs at each traffic level (non-inferiority where declared).
"""

from __future__ import annotations

import math

from sglab import metrics
from sglab.config.policy import PromotionPolicy
from sglab.schema.result import RunResult
from sglab.schema.verdict import LOSS_PREFIX, Crossover, LevelVerdict, OperatingPoint, pct

__all__ = ["effective_policy", "level_label", "level_phrase", "operating_point", "slo_targets"]


def effective_policy(policy: PromotionPolicy) -> PromotionPolicy:
    """The gate as judged: with traffic declared, its levels (and SLO) are the policy's."""
    traffic = policy.traffic
    if traffic is None:
        return policy
    update = {}
    if policy.levels != traffic.levels:
        update["levels"] = list(traffic.levels)
    if traffic.slo is not None and policy.slo != traffic.slo:
        update["slo"] = traffic.slo
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
