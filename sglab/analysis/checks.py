"""The checks of a verdict: blockers (the evidence is unfit: never promote) and guards (fail -> reject).

Blockers: an A/A run, declared confounds, live-flag mismatches, an incomplete run, a gating level
missing or without enough rounds or requests, a baseline failing requests, a guard that could not be
measured. Guards: the candidate's error rate and its TTFT/ITL p99 growth at the gating levels.
"""

from __future__ import annotations

from sglab.config.models import PromotionPolicy
from sglab.results.schema import RunResult
from sglab.results.verdict import Check, LevelVerdict, pct

UNMEASURABLE = "cannot be checked"


def blockers(result: RunResult, levels: dict[int, LevelVerdict], policy: PromotionPolicy) -> list[Check]:
    stack = result.stack
    out: list[Check] = []
    if result.kind == "aa":
        out.append(Check(name="aa", ok=False, detail="A/A run: both arms are the baseline; it tests the "
                         "decision rule and can never promote", fix=f"run `sglab bench --stack {stack}`"))
    if result.confounds:
        keys = ", ".join(str(c.key) for c in result.confounds)
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
    if result.invalid_reason:
        out.append(Check(name="invalid", ok=False, detail=f"the run is invalid: {result.invalid_reason}",
                         fix=f"fix or restart that server, then re-run `sglab bench --stack {stack}`"))
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


def guards(levels: dict[int, LevelVerdict], policy: PromotionPolicy) -> list[Check]:
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
                                 detail=f"{name} {UNMEASURABLE} at concurrency {c}: no latency samples",
                                 fix="re-run with request samples kept"))
                continue
            ok = delta.increase <= cap
            out.append(Check(name=f"{name}@{c}", ok=ok,
                             detail=f"{name} {pct(delta.increase)} at concurrency {c} "
                                    f"({'within' if ok else 'beyond'} the allowed {cap:+.0%})",
                             fix=None if ok else f"the candidate's {name} grew too much; tune it or raise "
                                                 f"policy.{name.replace('-p99', '')}-p99-max-increase"))
    return out


def unable_to_measure(guard: Check) -> bool:
    """A guard that could not be evaluated (no samples): a blocker, not a failure."""
    return UNMEASURABLE in guard.detail
