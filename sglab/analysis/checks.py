"""The checks of a verdict: blockers (the evidence is unfit: never promote) and guards (fail -> reject).

Blockers: an A/A run, confounds (recomputed from the recorded launch commands, never read from the
file alone), live flags not checked or mismatched, an incomplete run, a result that does not match its
own plan (`evidence_problems`), a gating level missing or without enough rounds or requests, a
baseline failing requests, a guard that could not be measured. Guards: the candidate's error rate and
its TTFT/ITL p99 growth at the gating levels. `policy_weakenings` says how a policy is laxer than the
one a run was judged under (promotion refuses it).

The latency guards' intervals: is the candidate's TTFT / ITL p99 within the policy's cap, with confidence?

A p99 from a hundred requests per arm is nearly the second-largest value: a confirmation run of ~140
requests per arm had a round-bootstrap sd of 14.3% on the p99 ratio, so a point estimate passes
or fails near a +20% cap by chance. The guard is a non-inferiority decision instead, on an interval of the
ratio p99(candidate) / p99(baseline):

- the interval: a round-level (cluster) bootstrap. Rounds are the independent units (requests of one round
  share the servers' state, so they are not independent draws); each resample draws rounds with
  replacement, pools the drawn rounds' requests per arm, and takes each arm's p99; the interval is the
  percentile interval of the log-ratio at the policy's confidence (equal tails);
- `fail` when its lower end is beyond the cap (the increase is shown to exceed it: reject), `pass` when
  its upper end is within the cap (shown within it), `undecided` otherwise: a blocker, so a promotion never
  rests on a guard that passed by chance. benchmarks/decision_quality.py measures how many requests per arm
  a guard needs to decide at +5% and +35% against a +20% cap.

The bootstrap has a fixed seed, so a verdict is reproducible.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np

from sglab.analysis.accumulate import earlier_log_ratios
from sglab.analysis.nodes import design_of
from sglab.analysis.operating_point import level_label, level_phrase
from sglab.analysis.provenance import provenance_blockers
from sglab.analysis.samples import comparison_arms
from sglab.analysis.stops import decided_rounds
from sglab.config.arms import ArmSpec, arm_differences
from sglab.config.policy import PromotionPolicy
from sglab.schema.records import Confound
from sglab.schema.result import LevelResult, RequestSample, RunResult
from sglab.schema.verdict import Check, LevelVerdict, pct
from sglab.sglang.flags import FlagError

UNMEASURABLE = "cannot be checked"
UNDECIDED = "cannot yet be told from"
_HELD_FIX = {
    "dependence": ("find why the arms' rounds drift together (a node's thermals, a noisy neighbour, one arm's cache "
                   "warming up), then re-run `sglab bench --stack {stack}`; longer rounds (load.round-duration-s) "
                   "average a node's drift out"),
    "drift": ("the candidate's gain fell while it was measured (warm-up, throttling, a neighbour starting): re-run "
              "`sglab bench --stack {stack}` once the servers are steady; the rounds continue this pair's sequence"),
}
# What legitimately differs between the arms' launch commands: the speculative block (left out by
# arm_differences) and where each server listens.
PER_ARM_FLAGS = ("server --host", "server --port")
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHOWN = 3
_LEVELS_KEY = {"rate": "load.rate.levels"}  # where a profile's levels are declared (concurrency: load.concurrency)


def _arm_from_command(name: str, command: str) -> ArmSpec:
    """An ArmSpec read back from ArmSpec.launch_command: leading NAME=value words are the env, the
    arguments start at the first --flag (the program before it is not compared)."""
    words = shlex.split(command)
    env: dict[str, str] = {}
    while words and _ENV_WORD.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    start = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    return ArmSpec(name=name, role="baseline", speculative=False, image="", command=(), args=tuple(words[start:]),
                   env=env)


def launch_confounds(result: RunResult) -> list[Confound]:
    """The differences between the compared arms' recorded launch commands (raises ValueError when one
    cannot be read as SGLang would read it)."""
    base, cand = comparison_arms(result)
    commands = {name: result.arm(name).launch_command for name in (base, cand)}
    try:
        arms = {name: _arm_from_command(name, text) for name, text in commands.items()}
    except ValueError as exc:
        raise ValueError(f"a launch command is not valid shell syntax ({exc})") from None
    found = arm_differences(arms[base], arms[cand])
    return [Confound(**c.as_dict()) for c in found if c.key not in PER_ARM_FLAGS]


def _confound_check(result: RunResult) -> Check | None:
    stack = result.stack
    fix = ("give both arms these settings (move them out of candidate.confounds)"
           + ("" if result.kind == "attribute" else f", or size them with `sglab bench --stack {stack} --attribute`"))
    if result.kind == "aa":
        return None
    try:
        found = {c.key: c for c in launch_confounds(result)}
    except (ValueError, FlagError) as exc:
        return Check(name="confounds", ok=False, detail=f"the recorded launch commands cannot be compared: {exc}",
                     fix=f"re-run `sglab bench --stack {stack}` with a stack whose extra-args SGLang accepts")
    for declared in result.confounds:
        found.setdefault(declared.key, declared)
    if not found:
        return None
    keys = ", ".join(str(c.key) for c in found.values())
    return Check(name="confounds", ok=False,
                 detail=f"the candidate differs from the baseline beyond speculation ({keys}), so the "
                        "gain cannot be credited to speculation", fix=fix)


def _live_check(result: RunResult) -> list[Check]:
    out: list[Check] = []
    unchecked = [a.name for a in result.arms if not a.live_flags_checked]
    if unchecked and result.kind != "aa":
        out.append(Check(name="live-flags", ok=False,
                         detail=f"the live flags of {', '.join(unchecked)} were not checked (the check was skipped "
                                "or could not read the server), so nothing shows the servers ran what the stack "
                                "declares",
                         fix=f"re-run `sglab bench --stack {result.stack}` without --skip-live-check, against "
                             "servers whose /get_server_info answers"))
    mismatches = list(result.live_mismatches) + [m for a in result.arms for m in a.live_mismatches]
    if mismatches:
        out.append(Check(name="live-flags", ok=False,
                         detail="the live servers did not run what the stack declares: " + "; ".join(mismatches[:5]),
                         fix="redeploy (pulumi up) so the servers match the stack, then re-run the benchmark"))
    return out


def blockers(result: RunResult, levels: dict[int, LevelVerdict], policy: PromotionPolicy,
             earlier: dict[int, list[float]] | None = None) -> list[Check]:
    """`earlier`: the log-ratios of the earlier runs a sequential level continues (sglab/analysis/accumulate.py)."""
    stack = result.stack
    out: list[Check] = []
    if result.kind == "aa":
        out.append(Check(name="aa", ok=False, detail="A/A run: both arms are the baseline; it tests the "
                         "decision rule and can never promote", fix=f"run `sglab bench --stack {stack}`"))
    confounded = _confound_check(result)
    if confounded is not None:
        out.append(confounded)
    out += _live_check(result)
    out += provenance_blockers(result)  # faked acceptance, machines (sglab/analysis/provenance.py)
    if result.invalid_reason:
        out.append(Check(name="invalid", ok=False, detail=f"the run is invalid: {result.invalid_reason}",
                         fix=f"fix or restart that server, then re-run `sglab bench --stack {stack}`"))
    if not result.complete:
        why = f" ({result.incomplete_reason})" if result.incomplete_reason else ""
        out.append(Check(name="incomplete", ok=False, detail=f"the run is incomplete{why}",
                         fix=f"re-run `sglab bench --stack {stack}` to completion"))
    out += evidence_problems(result, earlier)
    label = level_label(result)
    at = partial(level_phrase, label)  # 'concurrency 4', '4 req/s', 'the trace replay'
    levels_key = _LEVELS_KEY.get(label, "load.concurrency")
    for c in policy.levels:
        lv = levels.get(c)
        if lv is None:
            if label == "trace":
                out.append(Check(name=f"data@{c}", ok=False, detail=f"gating level {c} was not measured (a trace "
                                 "replay is level 1)", fix="judge a trace replay with policy.levels [1]"))
                continue
            out.append(Check(name=f"data@{c}", ok=False, detail=f"gating {at(c)} was not measured",
                             fix=f"add {c} to {levels_key} and re-run"))
            continue
        if lv.design_problems:
            out.append(Check(name=f"design@{c}", ok=False, detail=f"the rounds at {at(c)} do not follow the "
                             f"{lv.design} design: " + "; ".join(lv.design_problems[:_SHOWN]),
                             fix=f"re-run `sglab bench --stack {stack}`: a design's rounds are laid out by the bench"))
        recorded = result.design.design if result.design is not None else None
        if recorded is not None and recorded != lv.design:
            out.append(Check(name=f"design@{c}", ok=False, detail=f"the run records a {recorded} design but its "
                             f"rounds at {at(c)} are laid out as {lv.design}",
                             fix=f"re-run `sglab bench --stack {stack}`: a result whose rounds disagree with its "
                                 "design was edited, and cannot be evidence"))
        if lv.outcome == "no-data":
            if lv.design_pending:
                out.append(Check(name=f"data@{c}", ok=False, detail=f"at gating {at(c)} {lv.design_pending}",
                                 fix=f"let the run carry out its {lv.design} (re-run `sglab bench --stack {stack}` "
                                     "to completion): only the swapped period cancels the node difference"))
                continue
            out.append(Check(name=f"data@{c}", ok=False,
                             detail=f"no round at gating {at(c)} has successful requests from both arms",
                             fix="see the run's errors for why an arm failed, fix it and re-run"))
            continue
        gain = lv.gain(policy.metric)
        if gain.rounds < policy.min_rounds:
            out.append(Check(name=f"rounds@{c}", ok=False,
                             detail=f"only {gain.rounds} paired rounds at {at(c)} "
                                    f"(policy.min-rounds {policy.min_rounds})",
                             fix="raise load.rounds and re-run"))
        if gain.held in ("dependence", "drift") and gain.low is not None:
            out.append(Check(name=f"{gain.held}@{c}", ok=False, detail=f"at {at(c)} " + "; ".join(gain.notes[:1]),
                             fix=_HELD_FIX[gain.held].format(stack=stack)))
        fewest = min(lv.baseline_requests, lv.candidate_requests)
        if fewest < policy.min_requests:
            out.append(Check(name=f"requests@{c}", ok=False,
                             detail=f"only {fewest} successful requests per arm at {at(c)} "
                                    f"(policy.min-requests {policy.min_requests})",
                             fix="raise load.rounds or load.round-duration-s and re-run"))
    for lv in levels.values():
        if lv.baseline_error_rate > policy.error_cap:
            out.append(Check(name=f"baseline-errors@{lv.concurrency}", ok=False,
                             detail=f"the baseline failed {lv.baseline_error_rate:.1%} of requests at "
                                    f"{at(lv.concurrency)} (cap {policy.error_cap:.1%}); the comparison is unreliable",
                             fix=f"fix the baseline (see the run's errors) or lower {levels_key}, then re-run"
                             if label != "trace" else "fix the baseline (see the run's errors), then re-run"))
    return out


def guards(levels: dict[int, LevelVerdict], policy: PromotionPolicy, label: str = "concurrency") -> list[Check]:
    """`label` is the run's level label (level_label), for the details' words."""
    at = partial(level_phrase, label)
    out: list[Check] = []
    for lv in levels.values():
        ok = lv.candidate_error_rate <= policy.error_cap
        out.append(Check(name=f"errors@{lv.concurrency}", ok=ok,
                         detail=f"candidate error rate {lv.candidate_error_rate:.1%} "
                                f"({'≤' if ok else '>'} cap {policy.error_cap:.1%}) at {at(lv.concurrency)}",
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
                                 detail=f"{name} {UNMEASURABLE} at {at(c)}: no latency samples",
                                 fix="re-run with request samples kept"))
                continue
            out.append(_latency_guard(name, c, delta, cap, at(c)))
    return out


def _latency_guard(base_name: str, level: int, delta, cap: float, where: str) -> Check:
    """Non-inferiority on the interval of the p99 ratio (p99_ratio, below): fail when it lies beyond the
    cap, pass when it lies within, else undecided (a blocker); no interval (no request samples, too few rounds):
    the point estimate, said so."""
    name, knob = f"{base_name}@{level}", f"policy.{base_name.replace('-p99', '')}-p99-max-increase"
    if delta.low is None or delta.high is None:
        ok = delta.increase <= cap
        return Check(name=name, ok=ok,
                     detail=f"{base_name} {pct(delta.increase)} at {where} ({'within' if ok else 'beyond'} "
                     f"the allowed {cap:+.0%}; a point estimate: too few rounds with request samples for an interval)",
                     fix=None if ok else f"the candidate's {base_name} grew too much; tune it or raise {knob}")
    band = f"{pct(delta.increase)} [{pct(delta.low)}, {pct(delta.high)}]"
    if delta.low > cap:
        return Check(name=name, ok=False, detail=f"{base_name} {band} at {where} (beyond the allowed {cap:+.0%})",
                     fix=f"the candidate's {base_name} grew too much; tune it or raise {knob}")
    if delta.high <= cap:
        return Check(name=name, ok=True, detail=f"{base_name} {band} at {where} (within the allowed {cap:+.0%})")
    need = _requests_to_decide(delta, cap)
    return Check(name=name, ok=False, detail=f"{base_name} {band} at {where} {UNDECIDED} the allowed {cap:+.0%} "
                 f"(the interval straddles it{need})",
                 fix=("measure more requests at that level (load.round-duration-s, or more rounds: a re-run continues "
                      "the sequence) until the interval decides, or raise " + knob))


def _requests_to_decide(delta, cap: float) -> str:
    """', about N times the requests would likely decide it': the interval narrows as 1/sqrt(requests), so it
    clears the cap at this estimate once its half-width is the estimate's distance to the cap."""
    import math

    if delta.increase is None or delta.low is None or delta.high is None or delta.increase <= -1.0:
        return ""
    half = (math.log1p(delta.high) - math.log1p(delta.low)) / 2.0
    distance = abs(math.log1p(delta.increase) - math.log1p(cap))
    if distance <= 0.0 or half <= 0.0:
        return ""
    times = (half / distance) ** 2
    return (f"; about {times:.0f}x the requests would likely decide it" if times < 1000
            else "; the estimate sits at the cap")


def unable_to_measure(guard: Check) -> bool:
    """A guard that could not be evaluated (no samples) or has not decided yet: a blocker, not a failure."""
    return UNMEASURABLE in guard.detail or UNDECIDED in guard.detail


# ---- the result against its own plan ---------------------------------------------------------------

def planned_schedule(result: RunResult) -> tuple[dict[int, int] | None, str | None]:
    """(level -> measured rounds the run planned, a disagreement between the recorded schedule and the
    recorded load plan). The bench runner records the schedule; for older files it is read from the
    plan the way the runner applies it (load.rounds at gated levels, load.ungated-rounds elsewhere)."""
    recorded = result.integrity.schedule if result.integrity is not None else None
    plan = result.load_plan
    derived = None
    if plan is not None and plan.rounds is not None and not plan.get("interactive"):
        profile = plan.get("profile") or "concurrency"
        levels = plan.concurrency if profile == "concurrency" else (plan.get("rate") or {}).get("levels") \
            if profile == "rate" else None
        gated = list((result.policy.levels if result.policy is not None else None) or PromotionPolicy().levels)
        if result.sequential is not None:
            gated += [int(k) for k in result.sequential.stop_rule]  # the target's gated levels
        if levels:
            derived = {lv: plan.rounds if plan.ungated_rounds is None or lv in gated else plan.ungated_rounds
                       for lv in levels}
    if recorded is not None and derived is not None and recorded != derived:
        return recorded, (f"the recorded schedule {_levels_text(recorded)} does not match the load plan it "
                          f"recorded, which gives {_levels_text(derived)}")
    return (recorded if recorded is not None else derived), None


def _levels_text(schedule: dict[int, int]) -> str:
    return ", ".join(f"level {lv}: {n} rounds" for lv, n in sorted(schedule.items()))


def _schedule_problems(result: RunResult) -> list[str]:
    schedule, disagreement = planned_schedule(result)
    if schedule is not None and result.policy is not None and result.policy.get("method") == "sequential":
        # a sequential run stops a sequential level at its confidence sequence's decision, recomputed here from
        # its rounds and those of the earlier runs its sequence continues (embedded in the sealed result)
        policy = PromotionPolicy.model_validate(result.policy.model_dump(exclude_unset=True))
        schedule = {**schedule, **decided_rounds(result, policy, earlier_log_ratios(result, policy.metric))}
    out = [disagreement] if disagreement else []
    if schedule is None or not result.complete:
        return out  # an incomplete run is blocked as such; an interactive one has no schedule
    arms = [a.name for a in result.arms]
    for level, rounds in sorted(schedule.items()):
        lv = result.level(level)
        if lv is None:
            out.append(f"level {level} was planned ({rounds} rounds) but is not in the result")
            continue
        have = {(r.arm, r.round_index) for r in lv.rounds if not r.warmup}
        one_arm = design_of(lv, comparison_arms(result)) == "switchback"  # one arm a round (its ABBA turn)
        for index in range(rounds):
            missing = [arm for arm in arms if (arm, index) not in have]
            if one_arm and len(missing) < len(arms):
                continue
            if missing:
                out.append(f"level {level}: round {index + 1}/{rounds} of {', '.join(missing)} is missing")
        extra = sorted({i for _, i in have if i >= rounds})
        if extra:
            out.append(f"level {level}: rounds beyond the planned {rounds} are recorded ({len(extra)})")
    for lv in result.levels:
        if lv.concurrency not in schedule:
            out.append(f"level {lv.concurrency} is in the result but not in its plan ({_levels_text(schedule)})")
    return out


def _completeness_problems(result: RunResult) -> list[str]:
    if not result.complete:
        return []
    out = []
    plan = result.load_plan
    duration = plan.round_duration_s if plan is not None and not plan.get("interactive") else None
    for lv in result.levels:
        for r in lv.rounds:
            where = f"level {lv.concurrency} {'warm-up' if r.warmup else f'round {r.round_index + 1}'} {r.arm}"
            if not r.complete:
                out.append(f"{where} was cut short (interrupted)")
            elif duration and not r.warmup and r.window_s is not None and r.window_s < duration * 0.999:
                out.append(f"{where} measured {r.window_s:.2f} s of its {duration:g} s round (cut short)")
    return out


def _count_problems(result: RunResult) -> list[str]:
    """Per round: the counts it records = the request samples it holds (errors included); per arm and
    level: the summary = its measured rounds; with round-requests: every round = its quota."""
    out = []
    plan = result.load_plan
    # Segments end at their quota under these profiles (a trace's rounds end with the trace instead).
    fixed = plan is not None and not plan.get("interactive") and \
        (plan.get("profile") or "concurrency") in ("concurrency", "rate")
    quota = plan.round_requests if fixed else None
    warmup_quota = plan.warmup_requests if fixed else None
    for lv in result.levels:
        held: dict[tuple[str, int, bool], list[int]] = {}
        for s in lv.requests:
            n = held.setdefault((s.arm, s.round_index, s.warmup), [0, 0])
            n[0] += 1
            n[1] += s.error is not None
        for r in lv.rounds:
            where = f"level {lv.concurrency} {'warm-up' if r.warmup else f'round {r.round_index + 1}'} {r.arm}"
            n, errors = held.get((r.arm, r.round_index, r.warmup), [0, 0])
            if lv.requests and (n, errors) != (r.requests, r.errors):
                out.append(f"{where} records {r.requests} requests ({r.errors} errors) but holds {n} request "
                           f"samples ({errors} with an error)")
            want = warmup_quota if r.warmup else quota
            if want is not None and r.complete and not (r.warmup and not want) and r.requests != want:
                out.append(f"{where} has {r.requests} requests, not the {want} of load."
                           f"{'warmup-requests' if r.warmup else 'round-requests'}")
        for arm, summary in lv.arms.items():
            measured = [r for r in lv.rounds if r.arm == arm and not r.warmup]
            if measured and (summary.requests, summary.errors) != (sum(r.requests for r in measured),
                                                                  sum(r.errors for r in measured)):
                out.append(f"level {lv.concurrency} {arm}: the summary counts {summary.requests} requests "
                           f"({summary.errors} errors), its rounds {sum(r.requests for r in measured)} "
                           f"({sum(r.errors for r in measured)} errors)")
    return out


def evidence_problems(result: RunResult, earlier: dict[int, list[float]] | None = None) -> list[Check]:
    """Blockers for a result that does not match its own plan: a planned level or round missing, a
    'complete' run with a segment cut short, counts that disagree with the request samples kept."""
    fix = (f"re-run `sglab bench --stack {result.stack}`: a result whose contents disagree with its own plan "
           "was cut short or edited, and cannot be evidence")
    out = []
    for name, problems in (("plan", _schedule_problems(result)), ("complete", _completeness_problems(result)),
                           ("counts", _count_problems(result))):
        if problems:
            more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
            out.append(Check(name=f"evidence-{name}", ok=False,
                             detail="the result does not match its own plan: " + "; ".join(problems[:_SHOWN]) + more,
                             fix=fix))
    return out


# ---- a policy laxer than the recorded one ----------------------------------------------------------

def _key(field: str) -> str:
    return "policy." + field.replace("_", "-")


def policy_weakenings(recorded: PromotionPolicy, now: PromotionPolicy) -> list[str]:
    """`policy.<key>: ...` for every dimension in which `now` would let more runs through than `recorded`."""
    out = []
    for field in ("min_gain", "confidence", "min_rounds", "min_requests"):
        if getattr(now, field) < getattr(recorded, field):
            out.append(f"{_key(field)}: {getattr(now, field)} is lower than the recorded {getattr(recorded, field)}")
    if now.error_cap > recorded.error_cap:
        out.append(f"{_key('error_cap')}: {now.error_cap} is higher than the recorded {recorded.error_cap}")
    for field in ("ttft_p99_max_increase", "itl_p99_max_increase"):
        was, cap = getattr(recorded, field), getattr(now, field)
        if was is not None and (cap is None or cap > was):
            out.append(f"{_key(field)}: {'no cap' if cap is None else cap} is laxer than the recorded {was}")
    if now.output_parity_margin > recorded.output_parity_margin:
        out.append(f"{_key('output_parity_margin')}: {now.output_parity_margin} is wider than the recorded "
                   f"{recorded.output_parity_margin}")
    dropped = [lv for lv in recorded.levels if lv not in now.levels]
    if dropped:
        out.append(f"{_key('levels')}: {now.levels} no longer gates {dropped} (recorded {recorded.levels})")
    if now.metric != recorded.metric:
        out.append(f"{_key('metric')}: {now.metric} is not the recorded {recorded.metric}")
    # the confidence sequence is valid for any run and wider than a fixed-n interval: judging a fixed-n run
    # under it is stricter (the run must then pass it too); any other change of method is refused
    if now.method != recorded.method and now.method != "sequential":
        out.append(f"{_key('method')}: {now.method} is not the recorded {recorded.method}")
    return out


# The latency guards' intervals.

RESAMPLES = 1000
QUANTILE = 99.0
MIN_ROUNDS = 3  # fewer rounds than this cannot be resampled into an interval
GuardDecision = Literal["pass", "fail", "undecided"]


@dataclass(frozen=True)
class QuantileRatio:
    """The candidate's p99 over the baseline's (increase = ratio - 1) with its interval; None where unknown."""

    increase: float | None
    low: float | None
    high: float | None
    confidence: float
    rounds: int

    def decide(self, cap: float) -> GuardDecision | None:
        """pass / fail / undecided against `cap` (None: no interval)."""
        if self.low is None or self.high is None:
            return None
        if self.low > cap:
            return "fail"
        if self.high <= cap:
            return "pass"
        return "undecided"


def _values(request: RequestSample, which: str) -> list[float]:
    if which == "ttft":
        return [request.ttft_ms] if request.ttft_ms is not None else []
    return list(request.itl_ms)


def _weighted_quantiles(values: np.ndarray, groups: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of `values` when group g is drawn counts[b, g] times, for every resample b at once
    (resampling rounds with replacement = weighting each round's values by its draw count)."""
    order = np.argsort(values, kind="stable")
    v, g = values[order], groups[order]
    out = np.empty(counts.shape[0])
    for start in range(0, counts.shape[0], 100):  # chunks keep (resamples x values) small for ITL gaps
        w = counts[start:start + 100][:, g].astype(float)
        cum = np.cumsum(w, axis=1)
        target = q / 100.0 * cum[:, -1:]
        out[start:start + 100] = v[np.argmax(cum >= target, axis=1)]
    return out


def ratio_interval(base: list[np.ndarray], cand: list[np.ndarray], *, confidence: float = 0.95, seed: int = 0,
                   quantile: float = QUANTILE) -> QuantileRatio:
    """The interval from per-round value arrays of each arm (same rounds, in order): resample rounds, pool, take
    each arm's quantile, percentile interval of the log-ratio."""
    rounds = len(base)
    pooled = {"b": np.concatenate(base), "c": np.concatenate(cand)}
    estimate = float(np.percentile(pooled["c"], quantile, method="inverted_cdf")
                     / np.percentile(pooled["b"], quantile, method="inverted_cdf") - 1.0)
    if rounds < MIN_ROUNDS:
        return QuantileRatio(estimate, None, None, confidence, rounds)
    counts = np.zeros((RESAMPLES, rounds), dtype=np.int32)
    draws = np.random.default_rng(seed).integers(0, rounds, size=(RESAMPLES, rounds))
    np.add.at(counts, (np.arange(RESAMPLES)[:, None], draws), 1)
    p = {}
    for arm, per_round in (("b", base), ("c", cand)):
        groups = np.concatenate([np.full(len(v), k) for k, v in enumerate(per_round)])
        p[arm] = _weighted_quantiles(pooled[arm], groups, counts, quantile)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(p["c"] / p["b"])
    logs = logs[np.isfinite(logs)]
    if logs.size < RESAMPLES // 2:
        return QuantileRatio(estimate, None, None, confidence, rounds)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(logs, [tail, 100.0 - tail])
    return QuantileRatio(estimate, float(np.expm1(low)), float(np.expm1(high)), confidence, rounds)


def p99_ratio(level: LevelResult, base: str, cand: str, which: Literal["ttft", "itl"], *, confidence: float = 0.95,
              seed: int = 0) -> QuantileRatio:
    """Round-bootstrap interval of p99(cand) / p99(base) - 1 over the successful measured requests."""
    per_round: dict[int, dict[str, list[float]]] = defaultdict(lambda: {base: [], cand: []})
    for r in level.requests:
        if r.warmup or r.round_index < 0 or r.error is not None or r.arm not in (base, cand):
            continue
        per_round[r.round_index][r.arm].extend(_values(r, which))
    rounds = sorted(i for i, v in per_round.items() if v[base] and v[cand])
    if not rounds:
        return QuantileRatio(None, None, None, confidence, 0)
    return ratio_interval([np.asarray(per_round[i][base], dtype=float) for i in rounds],
                          [np.asarray(per_round[i][cand], dtype=float) for i in rounds], confidence=confidence,
                          seed=seed)
