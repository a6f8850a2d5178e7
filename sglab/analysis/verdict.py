"""The verdict: promote, reject or inconclusive, computed from a RunResult and a PromotionPolicy.

Per concurrency level: the candidate's relative gain over the baseline on every registered metric
(sglab/metrics: decode tok/s and aggregate output tok/s built in) with an interval over rounds,
TTFT/ITL p99 deltas, error rates and the speculation economics. Gating levels (policy.levels) decide
on policy.metric; the others are reported with the crossover. Anything that makes the evidence unfit
(sglab/analysis/checks.py) is a blocker: it can never end in `promote`. The verdict's models are in
sglab/schema/verdict.py, its console table in sglab/report/console.py.

`target_gate_refusal` judges the same evidence a second time under a promotion target's own policy: a source
stack may gate on one operating point while production gates on others (its policy.levels or sglab:traffic),
and promoting there on the source's verdict alone would install a config that production's own benchmark
rejects, so promotion refuses with the reason and the fix when the target's gate does not pass.
"""

from __future__ import annotations

import datetime as dt
import math
import shlex

import numpy as np

from pydantic import ValidationError

from sglab import metrics
from sglab.analysis.accumulate import earlier_log_ratios, recorded
from sglab.analysis.sequential import checks_named, rounds_to_decide
from sglab.analysis.attribution import attribute, category_gains
from sglab.analysis.checks import blockers as _blockers
from sglab.analysis.checks import guards as _guards
from sglab.analysis.checks import UNMEASURABLE, p99_ratio, unable_to_measure
from sglab.analysis.provenance import output_parity, parity_guard, producer_of
from sglab.analysis.operating_point import (crossover, effective_policy, level_economics, level_label, level_phrase,
                                            operating_point, slo_targets)
from sglab.analysis.nodes import PARALLEL_NOTE, DesignEstimates
from sglab.analysis.samples import ArmLevelStats, arm_stats, comparison_arms, mean_ci, paired, per_round, relative_delta
from sglab.analysis.stops import level_estimates
from sglab.core.errors import ConfigError
from sglab.config.loader import LoadedStack
from sglab.config.policy import PromotionPolicy
from sglab.schema.result import LevelResult, RunResult
from sglab.schema.verdict import (Check, Gain, LatencyDelta, LevelOutcome, LevelVerdict, Outcome, Verdict,
                                   pct)

__all__ = ["Check", "Gain", "LatencyDelta", "LevelOutcome", "LevelVerdict", "METRICS", "Outcome", "Verdict",
           "judge", "next_step", "policy_of", "target_gate_refusal"]


def __getattr__(name: str):
    """`METRICS` follows the registry (the console table is sglab.report.console.format_table)."""
    if name == "METRICS":
        return tuple(m.name for m in metrics.all_metrics())
    raise AttributeError(name)


def policy_of(result: RunResult) -> PromotionPolicy:
    """The policy recorded with the run (the stack's at bench time), else the safe defaults; a record without
    `method` is judged with the paired-t it was written under (PromotionPolicy.from_record)."""
    try:
        return PromotionPolicy.from_record(result.policy.model_dump(exclude_unset=True) if result.policy else {})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        key = "policy." + ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"result {result.run_id}", key, err["msg"],
                          "pass a valid policy or re-run the benchmark with a valid stack") from None


def _gain(level: LevelResult, metric: str, base: str, cand: str, policy: PromotionPolicy,
          earlier: list[float] | None = None) -> tuple[Gain, DesignEstimates]:
    """The gain over the level's estimates under its design (sglab/analysis/nodes.py: per round, per pair of
    crossover periods, per switchback block). `earlier`: the estimates of earlier runs a sequential level's
    sequence continues (gate metric only)."""
    found = level_estimates(level, metric, policy, (base, cand))
    method = policy.interval_method(level.concurrency)
    before = list(earlier or []) if method == "sequential" else []
    if not found.estimates and not before:
        return Gain(metric=metric, rounds=0), found
    ci = mean_ci(np.asarray(before + found.values, dtype=float), confidence=policy.confidence, method=method,
                 checks=policy.checks)
    estimate, low, high = ci.as_gain()
    base_mean, cand_mean = _arm_means(level, metric, base, cand, policy, found.design)
    return Gain(metric=metric, rounds=ci.n, baseline_mean=base_mean, candidate_mean=cand_mean, estimate=estimate,
                low=low, high=high, mean_log=ci.mean, sd_log=ci.sd, earlier_rounds=len(before), held=ci.held,
                notes=list(ci.notes)), found


def _arm_means(level: LevelResult, metric: str, base: str, cand: str, policy: PromotionPolicy,
               design: str) -> tuple[float | None, float | None]:
    """Each arm's mean over its rounds: the paired rounds in parallel, every round of the arm otherwise."""
    if design == "parallel":
        rounds, data = paired(level, metric, [base, cand], slo_targets(policy))
        return (float(data[:, 0].mean()), float(data[:, 1].mean())) if rounds else (None, None)
    table = per_round(level, metric, slo_targets(policy))

    def mean(arm: str) -> float | None:
        values = [v[arm] for v in table.values() if v.get(arm, 0) > 0]
        return float(np.mean(values)) if values else None
    return mean(base), mean(cand)


def _level_outcome(gain: Gain, threshold: float) -> LevelOutcome:
    """Win when the interval clears the threshold (min-gain, or -margin at a non-inferiority level) and no check
    of the sequence holds it (sglab/analysis/sequential.py: too few rounds, dependent rounds, a falling gain)."""
    if gain.rounds == 0 or gain.estimate is None:
        return "no-data"
    if gain.low is not None and gain.low >= threshold:
        return "undecided" if gain.held else "win"
    if gain.high is not None and gain.high < threshold:
        return "lose"
    return "undecided"


def _latency(level: LevelResult, base_arm: str, cand_arm: str, which: str, base: float | None, cand: float | None,
             policy: PromotionPolicy, interval: bool) -> LatencyDelta:
    """The p99 change; with `interval`, its round-bootstrap interval (sglab/analysis/checks.py)."""
    delta = LatencyDelta(baseline_p99_ms=base, candidate_p99_ms=cand, increase=relative_delta(base, cand))
    if interval and level.requests:
        ratio = p99_ratio(level, base_arm, cand_arm, which, confidence=policy.confidence)
        if ratio.low is not None:
            delta.low, delta.high, delta.confidence = ratio.low, ratio.high, ratio.confidence
    return delta


def _level(level: LevelResult, base: str, cand: str, policy: PromotionPolicy,
           earlier: list[float] | None = None) -> LevelVerdict:
    judged = {m.name: _gain(level, m.name, base, cand, policy, earlier if m.name == policy.metric else None)
              for m in metrics.all_metrics()
              if m.name == policy.metric or not (m.uses_slo and policy.slo is None)}  # goodput needs an SLO
    gains = {name: gain for name, (gain, _) in judged.items()}
    design = judged[policy.metric][1]
    decode = gains.pop("decode_tok_per_s")
    output = gains.pop("output_tok_per_s")
    bstats: ArmLevelStats = arm_stats(level, base)
    cstats: ArmLevelStats = arm_stats(level, cand)
    gating = level.concurrency in policy.levels
    decisive = {"decode_tok_per_s": decode, "output_tok_per_s": output, **gains}[policy.metric]
    margin = policy.traffic.non_inferiority.get(level.concurrency) if policy.traffic is not None else None
    threshold = -margin if margin is not None else policy.min_gain
    outcome = _level_outcome(decisive, threshold)
    more = None
    if outcome == "undecided" and decisive.mean_log is not None and decisive.sd_log is not None:
        more = rounds_to_decide(mean_log=decisive.mean_log, sd_log=decisive.sd_log,
                                threshold_log=math.log1p(threshold), rounds_now=decisive.rounds,
                                confidence=policy.confidence, method=policy.interval_method(level.concurrency),
                                checks=policy.checks)
        more = None if more is None else more * design.rounds_per_estimate  # rounds, not estimates
    return LevelVerdict(
        concurrency=level.concurrency, gating=gating, outcome=outcome, decode=decode, output=output,
        ttft_p99=_latency(level, base, cand, "ttft", bstats.ttft_p99_ms, cstats.ttft_p99_ms, policy,
                          gating and policy.ttft_p99_max_increase is not None),
        itl_p99=_latency(level, base, cand, "itl", bstats.itl_p99_ms, cstats.itl_p99_ms, policy,
                         gating and policy.itl_p99_max_increase is not None),
        baseline_requests=bstats.succeeded, candidate_requests=cstats.succeeded,
        baseline_error_rate=bstats.error_rate, candidate_error_rate=cstats.error_rate,
        economics=level_economics(level.concurrency, bstats, cstats), more_rounds=more, extra_gains=gains,
        non_inferiority_margin=margin, design=design.design, node_effect=design.node_effect(policy.confidence),
        design_pending=design.pending, design_problems=list(design.problems),
    )


def judge(result: RunResult, policy: PromotionPolicy | None = None) -> Verdict:
    """Recompute the verdict from the samples (a stored verdict is never trusted)."""
    policy = effective_policy(policy or policy_of(result))
    try:
        base, cand = comparison_arms(result)
    except ValueError as exc:
        raise ConfigError(f"result {result.run_id}", "arms", str(exc), "compare a run with two or more arms") from None
    earlier = earlier_log_ratios(result, policy.metric) if policy.method == "sequential" else {}
    levels = {lv.concurrency: _level(lv, base, cand, policy, earlier.get(lv.concurrency))
              for lv in sorted(result.levels, key=lambda x: x.concurrency)}
    blockers = _blockers(result, levels, policy, earlier)
    parity = output_parity(result)  # sglab/analysis/provenance.py: temperature-0 answers, candidate vs baseline
    guards = _guards(levels, policy, level_label(result))
    guards.append(parity_guard(parity, policy.output_parity_margin, UNMEASURABLE,
                                 lossless=producer_of(result).kind == "simulator"))
    unmeasured = [g for g in guards if not g.ok and unable_to_measure(g)]
    failed = [g for g in guards if not g.ok and not unable_to_measure(g)]
    blockers += unmeasured
    guards = [g for g in guards if g not in unmeasured]

    gating = [levels[c] for c in policy.levels if c in levels]
    if any(lv.outcome == "lose" for lv in gating):
        statistical: Outcome = "reject"
    elif gating and len(gating) == len(policy.levels) and all(lv.outcome == "win" for lv in gating):
        statistical = "promote"
    else:
        statistical = "inconclusive"

    reasons: list[str] = []
    if failed:
        outcome: Outcome = "reject"
        reasons += [f"guard failed: {g.detail}" for g in failed]
    elif statistical == "reject":
        outcome = "reject"
    elif statistical == "promote" and not blockers:
        outcome = "promote"
    else:
        outcome = "inconclusive"
    if statistical == "promote" and blockers:
        reasons.append("the numbers alone clear the policy, but the evidence cannot promote: "
                       + "; ".join(b.detail for b in blockers))
        if result.kind == "aa":
            reasons.append("A/A check FAILED: the rule would have promoted identical arms")
    elif result.kind == "aa":
        reasons.append("A/A check passed: the rule does not promote identical arms")
    elif blockers:
        reasons += [b.detail for b in blockers]

    more = None
    if outcome == "inconclusive" and statistical == "inconclusive":
        undecided = [lv for lv in gating if lv.outcome == "undecided"]
        counts = [lv.more_rounds for lv in undecided]
        more = max(counts) if counts and all(c is not None for c in counts) else None
    gains = {c: lv.decode.estimate for c, lv in levels.items() if lv.decode.estimate is not None}
    design = _design(levels, policy)
    verdict = Verdict(
        run_id=result.run_id, stack=result.stack, kind=result.kind, outcome=outcome,
        statistical_outcome=statistical, sentence="", baseline_arm=base, candidate_arm=cand,
        metric=policy.metric, min_gain=policy.min_gain, confidence=policy.confidence, method=policy.method,
        gating_levels=list(policy.levels), levels=list(levels.values()), guards=guards, blockers=blockers,
        reasons=reasons, crossover=crossover(gains, level_label(result)), more_rounds=more,
        attribution=attribute(result, metric=policy.metric, confidence=policy.confidence, method=policy.method),
        output_parity=parity, design=design, design_note=PARALLEL_NOTE if design == "parallel" else None,
        policy=policy.model_dump(mode="json", by_alias=True), sequence=_sequence_summary(result, earlier),
        computed_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    verdict.operating_point = operating_point(result, verdict.levels, policy, verdict.crossover,
                                              has_blockers=bool(blockers))
    verdict.categories = category_gains(result, base, cand, policy)
    verdict.sentence = _sentence(verdict, failed, level_label(result))
    return verdict


def _design(levels: dict[int, LevelVerdict], policy: PromotionPolicy) -> str:
    """The gated levels' design (their rounds' layout); levels that disagree: 'mixed'."""
    found = {levels[c].design for c in policy.levels if c in levels} or {lv.design for lv in levels.values()}
    return found.pop() if len(found) == 1 else ("mixed" if found else "parallel")


def _sequence_summary(result: RunResult, earlier: dict[int, list[float]]) -> dict | None:
    seq = recorded(result)
    if seq is None:
        return None
    return {"runs": [r.run_id for r in seq.runs], "fresh": seq.fresh, "reason": seq.reason,
            "earlier_rounds": {str(k): len(v) for k, v in earlier.items()}}


def next_step(v: Verdict) -> str | None:
    """The command a user most likely runs next, if any."""
    if v.outcome == "promote" and v.kind in ("ab", "interactive"):
        shown = f" --result {shlex.quote(v.promote_result)}" if v.promote_result else ""
        return f"sglab promote --stack {v.stack}{shown} --dry-run"
    if v.outcome == "inconclusive" and v.more_rounds and not v.blockers:
        done = max((lv.gain(v.metric).rounds for lv in v.levels if lv.gating), default=0)
        if v.method == "sequential":
            # a re-run of the pair continues this sequence (sglab/analysis/accumulate.py), so its error rate holds
            # across runs; a fresh sequence per re-run would not
            return f"sglab bench --stack {v.stack} --rounds {max(v.more_rounds, 1)}"
        return f"sglab bench --stack {v.stack} --rounds {done + v.more_rounds}"
    return None


def _sentence(v: Verdict, failed: list[Check], label: str = "concurrency") -> str:
    """The judgement, then (an extension, so the first part reads as before) the measured levels where the
    candidate loses and the levels that were not gated."""
    extra = [t for t in (v.operating_point.loss_text, v.operating_point.not_gated_text) if t] \
        if v.operating_point is not None else []
    return " ".join([_judgement(v, failed, label), *extra])


def _judgement(v: Verdict, failed: list[Check], label: str) -> str:
    conf = f"{v.confidence:.0%} CI"
    words = metrics.label(v.metric)

    def level_text(lv: LevelVerdict) -> str:
        g = lv.gain(v.metric)
        where = level_phrase(label, lv.concurrency)
        if g.estimate is None:
            return f"not measured ({words} at {where})"
        margin = (f", non-inferiority margin {-lv.non_inferiority_margin:+.1%}"
                  if lv.non_inferiority_margin is not None else "")
        if g.low is None and g.high is None:
            bounds = (f"no bounds yet: {g.rounds} round{'s' if g.rounds != 1 else ''} are too few for the confidence "
                      "sequence" if v.method == "sequential" else f"{conf} n/a: fewer than 2 rounds")
            return f"{pct(g.estimate)} {words} at {where} ({bounds}{margin})"
        return f"{pct(g.estimate)} {words} at {where} ({conf} {pct(g.low)} to {pct(g.high)}{margin})"

    gating = [lv for lv in v.levels if lv.gating]
    shown = ", ".join(level_text(lv) for lv in gating) or "no gating level measured"
    need = f"{v.min_gain:+.1%} minimum"
    if v.outcome == "promote":
        return f"promote: the candidate's gain is {shown}, clearing the {need}; guards hold."
    if v.outcome == "reject":
        if failed:
            return f"reject: {failed[0].detail}; the candidate's gain is {shown}."
        return f"reject: the candidate's gain is {shown}, short of the {need}."
    if v.blockers:
        return f"inconclusive: the candidate's gain is {shown}, but {v.blockers[0].detail}."
    more = (f"about {v.more_rounds} more rounds would likely decide" if v.more_rounds
            else "more rounds are unlikely to decide (the gain sits at the minimum)")
    held = next((g for g in (lv.gain(v.metric) for lv in gating) if g.held and g.notes), None)
    if held is not None:
        return f"inconclusive: the candidate's gain is {shown}, but {held.notes[0]}; {more}."
    return f"inconclusive: the candidate's gain is {shown}, neither clearly above nor below the {need}; {more}."


# Would the promoted config pass the target stack's own gate, on this evidence?

def target_gate_refusal(result: RunResult, target: LoadedStack, source_stack: str) -> tuple[str, str] | None:
    """(reason, fix) when the evidence fails the target stack's gate; None when it passes."""
    policy = target.config.policy
    verdict = judge(result, policy)
    if verdict.outcome == "promote":
        return None
    label = level_label(result)
    gate = "sglab:traffic" if policy.traffic is not None else "policy.levels"
    where = ", ".join(level_phrase(label, c) for c in verdict.gating_levels)
    reason = (f"the evidence fails the {target.name} stack's own gate ({gate}: {where}; "
              f"min-gain {policy.min_gain:+.1%}): {verdict.sentence}")
    missing = [c for c in verdict.gating_levels if verdict.level(c) is None]
    losing = [lv.concurrency for lv in verdict.levels if lv.gating and lv.outcome == "lose"]
    if missing:
        fix = (f"measure what {target.name} gates on: add {missing} to the load levels of stack '{source_stack}' "
               f"(or declare sglab:traffic there with the levels {target.name} serves) and re-run "
               f"`sglab bench --stack {source_stack}`")
    elif losing:
        fix = (f"the candidate loses at {', '.join(level_phrase(label, c) for c in losing)}, which {target.name} "
               f"serves: tune the candidate for that load (e.g. fewer speculative steps), declare sglab:traffic in "
               f"stack '{source_stack}' with the levels {target.name} serves so its own verdict gates them, and "
               "re-run the benchmark")
    elif undecided := [lv for lv in verdict.levels if lv.gating and lv.outcome == "undecided"]:
        floor = checks_named(policy.checks).promote_min_rounds
        fix = "; ".join([_undecided_fix(lv, verdict, label, target.name, source_stack, floor) for lv in undecided]
                        + [b.fix for b in verdict.blockers if b.fix])
    elif verdict.blockers:
        fix = "; ".join(b.fix for b in verdict.blockers if b.fix) or f"re-run `sglab bench --stack {source_stack}`"
    else:
        fix = (f"measure more at the levels {target.name} gates on (raise load.rounds, or declare sglab:traffic in "
               f"stack '{source_stack}' so they get the full rounds) and re-run `sglab bench --stack {source_stack}`")
    return reason, fix


def _undecided_fix(lv, verdict, label: str, target: str, source_stack: str, floor: int) -> str:
    """Why a level of the target's gate is undecided, and what decides it: the real reason, not a bystander."""
    gain = lv.gain(verdict.metric)
    where = level_phrase(label, lv.concurrency)
    if gain.low is None and gain.high is None:
        return (f"{where} has only {gain.rounds} rounds, too few for the confidence sequence to bound (a promotion "
                f"needs at least {floor} under {target}'s checks): it was measured as an ungated level; re-run `sglab "
                f"bench --stack {source_stack}`, which runs the levels {target} gates sequentially until they decide "
                f"(sglab:promote-to)")
    if gain.held:
        return f"{where}: {gain.notes[0] if gain.notes else gain.held}"
    more = f" (about {lv.more_rounds} more rounds would likely decide)" if lv.more_rounds else ""
    return (f"{where}'s sequence [{pct(gain.low)}, {pct(gain.high)}] still straddles {target}'s min-gain "
            f"{verdict.min_gain:+.1%} after {gain.rounds} rounds{more}: re-run `sglab bench --stack {source_stack}` "
            "with the same load settings; the new run continues this pair's sequence")
