"""`sglab bench` with policy.method sequential (the default): each gated level runs until its confidence
sequence decides.

The two-arm case of the sweep's per-round control (sglab/load/rounds.py): after every round at a gated
level the paired log-ratios of policy.metric go to sglab.analysis.sequential.sequential_test (with
futility); `continue` runs another round, promote / reject / futile stop the level, and the max rounds
end it `inconclusive`. Every look is recorded in result.sequential and the level's last look is printed
with why it stopped; the verdict recomputes the interval from the rounds with the same sequence
(policy.method sequential in sglab/analysis/stats.py), so stopping at a look that clears the threshold
keeps the error rate. Ungated levels run their fixed load.ungated-rounds (and get the fixed-n interval).
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

from sglab import metrics
from sglab.analysis.samples import paired
from sglab.analysis.sequential import Look, SequentialRecord, sequential_test
from sglab.load.request import BenchRequest, RefusedError
from sglab.results.schema import LevelResult, RunResult

MAX_ROUNDS_FACTOR = 2  # default max rounds: twice load.rounds (docs/verdict.md measures max 32 vs fixed 16)


def max_rounds_for(plan_rounds: int, *, max_rounds: int | None = None, rounds_given: bool = False) -> int:
    """The most rounds a gated level may get: --max-rounds, else an explicit --rounds (a budget the run
    may stop short of, never exceed), else MAX_ROUNDS_FACTOR x load.rounds."""
    if max_rounds is not None:
        return max_rounds
    return plan_rounds if rounds_given else MAX_ROUNDS_FACTOR * plan_rounds


def threshold_for(policy, level: int) -> float:
    """The gain a gated level must clear: min-gain, or -margin where sglab:traffic declares non-inferiority."""
    traffic = getattr(policy, "traffic", None)
    margin = traffic.non_inferiority.get(level) if traffic is not None else None
    return -margin if margin is not None else policy.min_gain


def level_log_ratios(level: LevelResult, metric: str) -> list[float]:
    """log(candidate / baseline) of `metric` per paired round, oriented so that larger is better."""
    _, data = paired(level, metric, ["baseline", "candidate"])
    worse, better = metrics.get(metric).improvement(data[:, 0], data[:, 1]) if data.size else ([], [])
    return [math.log(b / w) for w, b in zip(worse, better)]


def _pct(x: float | None) -> str:
    return "unbounded" if x is None else f"{x:+.1%}"


def stop_reason(level: int, record: SequentialRecord, label: str = "c") -> str:
    """One line: where a gated level stopped and why, e.g. `c=1: promote at round 9 of at most 32: the 95%
    confidence sequence [+1.2%, +5.0%] clears +0.5%`."""
    look: Look | None = record.last
    head = f"{label}={level}: {record.decision} at round {record.rounds} of at most {record.max_rounds}"
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
        why = (f"{cs} {band} could not clear {line} by round {record.max_rounds} even if the gain were its upper "
               f"end (futility stop, never a promotion)")
    elif record.decision == "inconclusive":
        why = f"{cs} {band} still straddles {line} at the last allowed round"
    else:
        why = f"{cs} {band} has not decided yet"
    return f"{head}: {why} (gain {look.estimate:+.1%})"


class SequentialBench:
    def __init__(self, request: BenchRequest, max_rounds: int, *, echo=None) -> None:
        self.policy = request.loaded.config.policy
        self.plan = request.plan
        self.arms = [a.name for a in request.arms]
        self.max_rounds = max_rounds
        self.records: dict[str, dict] = {}
        self.echo = echo or (lambda text: print(text, file=sys.stderr))

    def gated(self, level: int) -> bool:
        return level in self.policy.levels

    def rounds_at(self, level: int) -> int:
        return self.max_rounds if self.gated(level) else (self.plan.ungated_rounds or self.plan.rounds)

    def threshold(self, level: int) -> float:
        return threshold_for(self.policy, level)

    def arms_for_round(self, level: int, round_index: int) -> list[str]:
        if round_index >= self.rounds_at(level):
            return []
        record = self.records.get(str(level))
        if self.gated(level) and record is not None and record["decision"] != "continue":
            return []
        return list(self.arms)

    def round_done(self, level: int, round_index: int, measured: LevelResult) -> None:
        if not self.gated(level):
            return
        record = self.test(measured)
        self.records[str(level)] = record.model_dump(mode="json")
        look = record.last
        if look is None:
            return
        if record.decision == "continue":
            band = "unbounded" if look.low is None else f"[{look.low:+.1%}, {look.high:+.1%}]"
            self.echo(f"sequential c={level} round {look.rounds}: gain {look.estimate:+.1%} {band} -> continue")
        else:
            self.echo(stop_reason(level, record))

    def test(self, measured: LevelResult) -> SequentialRecord:
        return sequential_test(level_log_ratios(measured, self.policy.metric),
                               min_gain=self.threshold(measured.concurrency), confidence=self.policy.confidence,
                               min_rounds=self.policy.min_rounds, max_rounds=self.max_rounds, futility=True)

    def annotate(self, result: RunResult) -> None:
        result.sequential = dict(self.records)


def run_sequential(request: BenchRequest, *, max_rounds: int | None = None, rounds_given: bool = False):
    """run_bench with the sequential stop at the gated levels; returns (result, run_dir).

    `max_rounds` is --max-rounds (refused below policy.min-rounds: it could never decide); `rounds_given`
    says load.rounds came from --rounds, which is then the most rounds (see max_rounds_for)."""
    from sglab.load.rounds import run_controlled

    min_rounds = request.loaded.config.policy.min_rounds
    if max_rounds is not None and max_rounds < min_rounds:
        raise RefusedError(f"--max-rounds {max_rounds} is below policy.min-rounds {min_rounds}; "
                           "give at least that many")
    limit = max_rounds_for(request.plan.rounds, max_rounds=max_rounds, rounds_given=rounds_given)
    # the recorded plan says what the run may measure: up to `limit` rounds at the gated levels
    request = replace(request, plan=request.plan.model_copy(update={"rounds": limit}))
    return run_controlled(request, SequentialBench(request, limit))


def decided_rounds(result: RunResult, policy) -> dict[int, int]:
    """Per gated level of a sequential run: the rounds it should have measured, recomputed from its own rounds
    (its first decision, else its max rounds = the recorded load.rounds). For the evidence checks: a run that
    stopped before its sequence decided, or went on after, does not match its plan.

    Only a run that says it stopped on its sequence (result.sequential, written by run_sequential) is
    checked this way; the looks' contents are not trusted, only recomputed. A run without them ran its
    plan's fixed rounds (a fixed-n run judged with the sequence is judged validly, only more strictly), and
    an early-stopped run whose looks were removed misses the rounds its plan (the max rounds) names."""
    if getattr(policy, "method", None) != "sequential" or result.load_plan is None or result.sequential is None:
        return {}
    limit = result.load_plan.rounds
    out = {}
    for level in result.levels:
        if level.concurrency not in policy.levels:
            continue
        record = sequential_test(level_log_ratios(level, policy.metric),
                                 min_gain=threshold_for(policy, level.concurrency), confidence=policy.confidence,
                                 min_rounds=policy.min_rounds, max_rounds=limit, futility=True)
        out[level.concurrency] = record.rounds if record.decision != "continue" else limit
    return out


def stop_lines(result: RunResult, label: str = "c") -> list[str]:
    """The recorded stop of every gated level of a sequential run (for the end of the console output)."""
    out = []
    for key, data in sorted((result.sequential or {}).items(), key=lambda kv: int(kv[0])):
        out.append(stop_reason(int(key), SequentialRecord.model_validate(data), label))
    return out
