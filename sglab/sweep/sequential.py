"""`sglab bench` with policy.method sequential: each gated level runs until its confidence sequence decides.

The two-arm case of the sweep's per-round control (sglab/load/rounds.py): after every round at a gated
level the paired log-ratios of policy.metric go to sglab.analysis.sequential.sequential_test (with
futility); `continue` runs another round, promote / reject / futile stop the level, and --max-rounds
ends it `inconclusive`. Every look is recorded in result.sequential; the verdict recomputes the
interval from the rounds with the same sequence (policy.method sequential in sglab/analysis/stats.py),
so stopping at a look that clears the threshold keeps the error rate. Ungated levels run their fixed
load.ungated-rounds.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

from sglab import metrics
from sglab.analysis.samples import paired
from sglab.analysis.sequential import SequentialRecord, sequential_test
from sglab.load.request import BenchRequest, RefusedError
from sglab.results.schema import LevelResult, RunResult

MAX_ROUNDS_FACTOR = 2  # default --max-rounds: twice load.rounds (docs/verdict.md measures max 32 vs fixed 16)


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
        traffic = getattr(self.policy, "traffic", None)
        margin = traffic.non_inferiority.get(level) if traffic is not None else None
        return -margin if margin is not None else self.policy.min_gain

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
        if look is not None:
            band = "unbounded" if look.low is None else f"[{look.low:+.1%}, {look.high:+.1%}]"
            self.echo(f"sequential c={level} round {look.rounds}: gain {look.estimate:+.1%} {band} -> {look.decision}")

    def test(self, measured: LevelResult) -> SequentialRecord:
        _, data = paired(measured, self.policy.metric, ["baseline", "candidate"])
        worse, better = metrics.get(self.policy.metric).improvement(data[:, 0], data[:, 1]) if data.size else ([], [])
        d = [math.log(b / w) for w, b in zip(worse, better)]
        return sequential_test(d, min_gain=self.threshold(measured.concurrency), confidence=self.policy.confidence,
                               min_rounds=self.policy.min_rounds, max_rounds=self.max_rounds, futility=True)

    def annotate(self, result: RunResult) -> None:
        result.sequential = dict(self.records)


def run_sequential(request: BenchRequest, *, max_rounds: int | None = None):
    """run_bench with the sequential stop at the gated levels; returns (result, run_dir)."""
    from sglab.load.rounds import run_controlled

    limit = max_rounds or MAX_ROUNDS_FACTOR * request.plan.rounds
    if limit < request.loaded.config.policy.min_rounds:
        raise RefusedError(f"--max-rounds {limit} is below policy.min-rounds {request.loaded.config.policy.min_rounds}; "
                           "give at least that many")
    # the recorded plan says what the run may measure: up to `limit` rounds at the gated levels
    request = replace(request, plan=request.plan.model_copy(update={"rounds": limit}))
    return run_controlled(request, SequentialBench(request, limit))


def decided_rounds(result: RunResult, policy) -> dict[int, int]:
    """Per gated level of a sequential run: the rounds it should have measured, recomputed from its own rounds
    (its first decision, else its max rounds = the recorded load.rounds). For the evidence checks: a run that
    stopped before its sequence decided, or went on after, does not match its plan."""
    if getattr(policy, "method", None) != "sequential" or result.load_plan is None:
        return {}
    limit = result.load_plan.rounds
    out = {}
    for level in result.levels:
        if level.concurrency not in policy.levels:
            continue
        _, data = paired(level, policy.metric, ["baseline", "candidate"])
        worse, better = metrics.get(policy.metric).improvement(data[:, 0], data[:, 1]) if data.size else ([], [])
        record = sequential_test([math.log(b / w) for w, b in zip(worse, better)], min_gain=policy.min_gain,
                                 confidence=policy.confidence, min_rounds=policy.min_rounds, max_rounds=limit,
                                 futility=True)
        out[level.concurrency] = record.rounds if record.decision != "continue" else limit
    return out
