"""The verdict: promote, reject or inconclusive, computed from a RunResult and a PromotionPolicy.

Per concurrency level: the candidate's relative gain over the baseline (decode tok/s and aggregate
output tok/s) with an interval over rounds, TTFT/ITL p99 deltas, error rates and the speculation
economics. Gating levels (policy.levels) decide; the others are reported with the crossover.
Anything that makes the evidence unfit (A/A, confounds, live-flag mismatches, an incomplete run,
too few samples) is a blocker: it can never end in `promote`.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Literal

from pydantic import BaseModel, ValidationError

from sglab.analysis.attribution import Attribution, attribute
from sglab.analysis.economics import Crossover, Economics, crossover, level_economics
from sglab.analysis.power import rounds_to_decide
from sglab.analysis.samples import ArmLevelStats, arm_stats, comparison_arms, paired
from sglab.analysis.stats import MeanCI, log_ratio_ci, relative_delta
from sglab.config.loader import ConfigError
from sglab.config.models import PromotionPolicy
from sglab.results.schema import LevelResult, RunResult

Outcome = Literal["promote", "reject", "inconclusive"]
LevelOutcome = Literal["win", "lose", "undecided", "no-data"]
METRICS = ("decode_tok_per_s", "output_tok_per_s")


class Gain(BaseModel):
    """Candidate over baseline for one metric at one level (geometric mean of per-round ratios)."""

    metric: str
    rounds: int
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    mean_log: float | None = None
    sd_log: float | None = None


class LatencyDelta(BaseModel):
    baseline_p99_ms: float | None = None
    candidate_p99_ms: float | None = None
    increase: float | None = None  # candidate / baseline - 1


class LevelVerdict(BaseModel):
    concurrency: int
    gating: bool
    outcome: LevelOutcome
    decode: Gain
    output: Gain
    ttft_p99: LatencyDelta
    itl_p99: LatencyDelta
    baseline_requests: int
    candidate_requests: int
    baseline_error_rate: float
    candidate_error_rate: float
    economics: Economics
    more_rounds: int | None = None

    def gain(self, metric: str) -> Gain:
        return self.decode if metric == "decode_tok_per_s" else self.output


class Check(BaseModel):
    """A guard (fails -> reject) or a blocker (present -> never promote)."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


class Verdict(BaseModel):
    run_id: str
    stack: str
    kind: str
    outcome: Outcome
    statistical_outcome: Outcome  # what the numbers alone say, before blockers
    sentence: str
    baseline_arm: str
    candidate_arm: str
    metric: str
    min_gain: float
    confidence: float
    method: str
    gating_levels: list[int]
    levels: list[LevelVerdict]
    guards: list[Check]
    blockers: list[Check]
    reasons: list[str]
    crossover: Crossover
    more_rounds: int | None = None
    attribution: Attribution | None = None
    policy: dict
    computed_at: str

    def level(self, concurrency: int) -> LevelVerdict | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)


def policy_of(result: RunResult) -> PromotionPolicy:
    """The policy recorded with the run (the stack's at bench time), else the safe defaults."""
    if not result.policy:
        return PromotionPolicy()
    try:
        return PromotionPolicy.model_validate(result.policy)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        key = "policy." + ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"result {result.run_id}", key, err["msg"],
                          "pass a valid policy or re-run the benchmark with a valid stack") from None


def _gain(level: LevelResult, metric: str, base: str, cand: str, policy: PromotionPolicy) -> tuple[Gain, MeanCI | None]:
    rounds, data = paired(level, metric, [base, cand])
    if not rounds:
        return Gain(metric=metric, rounds=0), None
    ci = log_ratio_ci(data[:, 0], data[:, 1], confidence=policy.confidence, method=policy.method)
    estimate, low, high = ci.as_gain()
    return Gain(metric=metric, rounds=ci.n, baseline_mean=float(data[:, 0].mean()),
                candidate_mean=float(data[:, 1].mean()), estimate=estimate, low=low, high=high,
                mean_log=ci.mean, sd_log=ci.sd), ci


def _level_outcome(gain: Gain, min_gain: float) -> LevelOutcome:
    if gain.rounds == 0 or gain.estimate is None:
        return "no-data"
    if gain.low is not None and gain.low >= min_gain:
        return "win"
    if gain.high is not None and gain.high < min_gain:
        return "lose"
    return "undecided"


def _latency(base: float | None, cand: float | None) -> LatencyDelta:
    return LatencyDelta(baseline_p99_ms=base, candidate_p99_ms=cand, increase=relative_delta(base, cand))


def _level(level: LevelResult, base: str, cand: str, policy: PromotionPolicy) -> LevelVerdict:
    decode, decode_ci = _gain(level, "decode_tok_per_s", base, cand, policy)
    output, _ = _gain(level, "output_tok_per_s", base, cand, policy)
    bstats: ArmLevelStats = arm_stats(level, base)
    cstats: ArmLevelStats = arm_stats(level, cand)
    gating = level.concurrency in policy.levels
    decisive = decode if policy.metric == "decode_tok_per_s" else output
    outcome = _level_outcome(decisive, policy.min_gain)
    more = None
    if outcome == "undecided" and decisive.mean_log is not None and decisive.sd_log is not None:
        more = rounds_to_decide(mean_log=decisive.mean_log, sd_log=decisive.sd_log,
                                threshold_log=math.log1p(policy.min_gain), rounds_now=decisive.rounds,
                                confidence=policy.confidence)
    return LevelVerdict(
        concurrency=level.concurrency, gating=gating, outcome=outcome, decode=decode, output=output,
        ttft_p99=_latency(bstats.ttft_p99_ms, cstats.ttft_p99_ms),
        itl_p99=_latency(bstats.itl_p99_ms, cstats.itl_p99_ms),
        baseline_requests=bstats.succeeded, candidate_requests=cstats.succeeded,
        baseline_error_rate=bstats.error_rate, candidate_error_rate=cstats.error_rate,
        economics=level_economics(level.concurrency, bstats, cstats), more_rounds=more,
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def _blockers(result: RunResult, levels: dict[int, LevelVerdict], policy: PromotionPolicy) -> list[Check]:
    stack = result.stack
    out: list[Check] = []
    if result.kind == "aa":
        out.append(Check(name="aa", ok=False, detail="A/A run: both arms are the baseline; it tests the "
                         "decision rule and can never promote", fix=f"run `sglab bench --stack {stack}`"))
    if result.confounds:
        keys = ", ".join(str(c.get("key")) for c in result.confounds)
        out.append(Check(name="confounds", ok=False,
                         detail=f"the candidate differs from the baseline beyond speculation ({keys}), so the "
                                "gain cannot be credited to speculation",
                         fix="give both arms these settings (move them out of candidate.confounds)"
                             + ("" if result.kind == "attribute" else
                                f", or size them with `sglab bench --stack {stack} --attribute`")))
    mismatches = list(result.live_mismatches) + [m for a in result.arms for m in a.live_mismatches]
    if mismatches:
        out.append(Check(name="live-flags", ok=False,
                         detail="the live servers did not run what the stack declares: " + "; ".join(mismatches[:5]),
                         fix="redeploy (pulumi up) so the servers match the stack, then re-run the benchmark"))
    if not result.complete:
        why = f" ({result.incomplete_reason})" if result.incomplete_reason else ""
        out.append(Check(name="incomplete", ok=False, detail=f"the run is incomplete{why}",
                         fix=f"re-run `sglab bench --stack {stack}` to completion"))
    for c in policy.levels:
        lv = levels.get(c)
        if lv is None:
            out.append(Check(name=f"data@{c}", ok=False, detail=f"gating concurrency {c} was not measured",
                             fix=f"add {c} to load.concurrency and re-run"))
            continue
        if lv.outcome == "no-data":
            out.append(Check(name=f"data@{c}", ok=False,
                             detail=f"no round at gating concurrency {c} has successful requests from both arms",
                             fix="see the run's errors for why an arm failed, fix it and re-run"))
            continue
        gain = lv.gain(policy.metric)
        if gain.rounds < policy.min_rounds:
            out.append(Check(name=f"rounds@{c}", ok=False,
                             detail=f"only {gain.rounds} paired rounds at concurrency {c} "
                                    f"(policy.min-rounds {policy.min_rounds})",
                             fix="raise load.rounds and re-run"))
        fewest = min(lv.baseline_requests, lv.candidate_requests)
        if fewest < policy.min_requests:
            out.append(Check(name=f"requests@{c}", ok=False,
                             detail=f"only {fewest} successful requests per arm at concurrency {c} "
                                    f"(policy.min-requests {policy.min_requests})",
                             fix="raise load.rounds or load.round-duration-s and re-run"))
    for lv in levels.values():
        if lv.baseline_error_rate > policy.error_cap:
            out.append(Check(name=f"baseline-errors@{lv.concurrency}", ok=False,
                             detail=f"the baseline failed {lv.baseline_error_rate:.1%} of requests at concurrency "
                                    f"{lv.concurrency} (cap {policy.error_cap:.1%}); the comparison is unreliable",
                             fix="fix the baseline (see the run's errors) or lower load.concurrency, then re-run"))
    return out


def _guards(levels: dict[int, LevelVerdict], policy: PromotionPolicy) -> list[Check]:
    out: list[Check] = []
    for lv in levels.values():
        ok = lv.candidate_error_rate <= policy.error_cap
        out.append(Check(name=f"errors@{lv.concurrency}", ok=ok,
                         detail=f"candidate error rate {lv.candidate_error_rate:.1%} "
                                f"({'≤' if ok else '>'} cap {policy.error_cap:.1%}) at concurrency {lv.concurrency}",
                         fix=None if ok else "find why the candidate fails requests (see the run's errors)"))
    for c in policy.levels:
        lv = levels.get(c)
        if lv is None:
            continue
        for name, delta, cap in (("ttft-p99", lv.ttft_p99, policy.ttft_p99_max_increase),
                                 ("itl-p99", lv.itl_p99, policy.itl_p99_max_increase)):
            if cap is None:
                continue
            if delta.increase is None:
                out.append(Check(name=f"{name}@{c}", ok=False,
                                 detail=f"{name} cannot be checked at concurrency {c}: no latency samples",
                                 fix="re-run with request samples kept"))
                continue
            ok = delta.increase <= cap
            out.append(Check(name=f"{name}@{c}", ok=ok,
                             detail=f"{name} {_pct(delta.increase)} at concurrency {c} "
                                    f"({'within' if ok else 'beyond'} the allowed {cap:+.0%})",
                             fix=None if ok else f"the candidate's {name} grew too much; tune it or raise "
                                                 f"policy.{name.replace('-p99', '')}-p99-max-increase"))
    return out


def _unable_to_measure(guard: Check) -> bool:
    return "cannot be checked" in guard.detail


def judge(result: RunResult, policy: PromotionPolicy | None = None) -> Verdict:
    """Recompute the verdict from the samples (a stored verdict is never trusted)."""
    policy = policy or policy_of(result)
    try:
        base, cand = comparison_arms(result)
    except ValueError as exc:
        raise ConfigError(f"result {result.run_id}", "arms", str(exc), "compare a run with two or more arms") from None
    levels = {lv.concurrency: _level(lv, base, cand, policy) for lv in sorted(result.levels, key=lambda x: x.concurrency)}
    blockers = _blockers(result, levels, policy)
    guards = _guards(levels, policy)
    unmeasured = [g for g in guards if not g.ok and _unable_to_measure(g)]
    failed = [g for g in guards if not g.ok and not _unable_to_measure(g)]
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
    verdict = Verdict(
        run_id=result.run_id, stack=result.stack, kind=result.kind, outcome=outcome,
        statistical_outcome=statistical, sentence="", baseline_arm=base, candidate_arm=cand,
        metric=policy.metric, min_gain=policy.min_gain, confidence=policy.confidence, method=policy.method,
        gating_levels=list(policy.levels), levels=list(levels.values()), guards=guards, blockers=blockers,
        reasons=reasons, crossover=crossover(gains), more_rounds=more,
        attribution=attribute(result, metric=policy.metric, confidence=policy.confidence, method=policy.method),
        policy=policy.model_dump(mode="json", by_alias=True),
        computed_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    verdict.sentence = _sentence(verdict, failed)
    return verdict


def next_step(v: Verdict) -> str | None:
    """The command a user most likely runs next, if any."""
    if v.outcome == "promote" and v.kind in ("ab", "interactive"):
        return f"sglab promote --stack {v.stack} --dry-run"
    if v.outcome == "inconclusive" and v.more_rounds and not v.blockers:
        done = max((lv.gain(v.metric).rounds for lv in v.levels if lv.gating), default=0)
        return f"sglab bench --stack {v.stack} --rounds {done + v.more_rounds}"
    return None


def _metric_words(metric: str) -> str:
    return "decode tok/s" if metric == "decode_tok_per_s" else "output tok/s"


def _sentence(v: Verdict, failed: list[Check]) -> str:
    conf = f"{v.confidence:.0%} CI"
    words = _metric_words(v.metric)

    def level_text(lv: LevelVerdict) -> str:
        g = lv.gain(v.metric)
        if g.estimate is None:
            return f"not measured ({words} at concurrency {lv.concurrency})"
        return f"{_pct(g.estimate)} {words} at concurrency {lv.concurrency} ({conf} {_pct(g.low)} to {_pct(g.high)})"

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
    return f"inconclusive: the candidate's gain is {shown}, neither clearly above nor below the {need}; {more}."


def format_table(v: Verdict) -> str:
    """The console table: levels x gains, CIs, latency deltas, errors, economics, outcome; last line grep-able."""
    conf = f"{v.confidence:.0%} CI"
    head = (f"{'conc':>5} {'gate':>4} | {'decode gain':>11} {conf:>17} | {'output gain':>11} {conf:>17} | "
            f"{'TTFT p99':>8} {'ITL p99':>8} | {'err b/c':>11} | {'accept':>6} {'b-even':>6} | outcome")
    lines = [f"{v.stack} run {v.run_id} ({v.kind}): {v.candidate_arm} vs {v.baseline_arm}, "
             f"gate {_metric_words(v.metric)} ≥ {v.min_gain:+.1%} at concurrency {v.gating_levels}, "
             f"{v.method} interval", head, "-" * len(head)]
    for lv in v.levels:
        d, o, e = lv.decode, lv.output, lv.economics
        ci = lambda g: f"[{_pct(g.low)}, {_pct(g.high)}]"  # noqa: E731
        acc = f"{e.accept_length:.2f}" if e.accept_length is not None else "-"
        brk = f"{e.break_even_accept_length:.2f}" if e.break_even_accept_length is not None else "-"
        errs = f"{lv.baseline_error_rate:.1%}/{lv.candidate_error_rate:.1%}"
        lines.append(f"{lv.concurrency:>5} {'yes' if lv.gating else 'no':>4} | {_pct(d.estimate):>11} {ci(d):>17} | "
                     f"{_pct(o.estimate):>11} {ci(o):>17} | {_pct(lv.ttft_p99.increase):>8} "
                     f"{_pct(lv.itl_p99.increase):>8} | {errs:>11} | {acc:>6} {brk:>6} | {lv.outcome}")
    lines.append("")
    for lv in v.levels:
        e = lv.economics
        if e.verify_cycle_ms is None or e.baseline_step_ms is None:
            continue
        lines.append(f"economics @{lv.concurrency}: baseline step {e.baseline_step_ms:.2f} ms/token, verify cycle "
                     f"{e.verify_cycle_ms:.2f} ms ({e.candidate_itl_ms:.2f} ms x accept {e.accept_length:.2f}), "
                     f"break-even accept length {e.break_even_accept_length:.2f} vs measured {e.accept_length:.2f}")
    lines.append(f"crossover: {v.crossover.note}")
    if v.attribution is not None:
        for la in v.attribution.levels:
            parts = ", ".join(f"{c.label} {_pct(c.estimate)} [{_pct(c.low)}, {_pct(c.high)}]" for c in la.components)
            lines.append(f"attribution @{la.concurrency}: {parts}")
    for g in v.guards:
        if not g.ok:
            lines.append(f"guard FAILED: {g.detail}" + (f" (fix: {g.fix})" if g.fix else ""))
    for b in v.blockers:
        lines.append(f"blocker: {b.detail}" + (f" (fix: {b.fix})" if b.fix else ""))
    for r in v.reasons:
        if not r.startswith("guard failed") and not any(r == b.detail for b in v.blockers):
            lines.append(f"note: {r}")
    lines.append(v.sentence)
    step = next_step(v)
    if step:
        lines.append(f"next: {step}")
    lines.append(f"verdict: {v.outcome}")
    return "\n".join(lines)
