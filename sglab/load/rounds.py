"""Rounds decided one at a time: the bench runner's machinery with a controller choosing each round's arms.

`BenchRun` runs a fixed number of rounds of every arm. A sequential bench (policy.method sequential)
stops a level when its confidence sequence decides, and a sweep drops eliminated arms: both give a
`RoundController` that says which arms run the next round (none: the level is done) and hears about
every finished round. Everything else is the runner's own: the simulators, warm-ups, the seeded
round orders (the arms left in a round keep their relative order), segments, the watchdog, signals.
The result is saved after every round, so an interrupted run keeps (and a sweep can resume from)
every finished round.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sglab.config.arms import ArmSpec
from sglab.load.request import BenchRequest, reached_arms
from sglab.load.runner import BenchProgress, BenchRun
from sglab.load.schedule import round_orders
from sglab.load.summary import arm_level_summary
from sglab.schema.result import LevelResult, RunResult
from sglab.results.store import create_run_dir, new_run_id


class RoundController(Protocol):
    def rounds_at(self, level: int) -> int:
        """The most rounds this level may get."""

    def arms_for_round(self, level: int, round_index: int) -> list[str]:
        """The arms of this round (the baseline included); empty: the level is done. The design decides which
        of them run (sglab/load/design.py): a switchback round runs the one arm in turn."""

    def round_done(self, level: int, round_index: int, measured: LevelResult) -> None:
        """After every complete round, with every round of the level so far."""


@dataclass
class ArmsRequest(BenchRequest):
    """A bench request with an explicit arm list (a sweep's candidates and its baseline)."""

    arm_specs: list[ArmSpec] = field(default_factory=list)

    @property
    def arms(self) -> list[ArmSpec]:  # type: ignore[override]
        return list(self.arm_specs) if self.arm_specs else super().arms


class ControlledRun(BenchRun):
    """BenchRun whose rounds come from a controller; `earlier` holds levels measured before a resume."""

    def __init__(self, request: BenchRequest, targets, controller: RoundController, *, run_id: str | None = None,
                 earlier: list[LevelResult] | None = None) -> None:
        super().__init__(request, targets, run_id=run_id)
        self.controller = controller
        self.earlier = {lv.concurrency: lv for lv in earlier or []}
        self.levels = [lv for lv in earlier or []]

    def rounds_at(self, level: int) -> int:
        return self.controller.rounds_at(level)

    def _level_result(self, level: int, rounds: list, requests: list) -> LevelResult:
        names = [a for a in self.arm_names if any(r.arm == a for r in rounds)]
        summaries = {arm: arm_level_summary([s for s in requests if s.arm == arm], [r for r in rounds if r.arm == arm])
                     for arm in names}
        return LevelResult(concurrency=level, arms=summaries, rounds=list(rounds),
                           requests=sorted(requests, key=lambda s: s.start_s))

    def _store(self, measured: LevelResult) -> None:
        self.levels = [lv for lv in self.levels if lv.concurrency != measured.concurrency] + [measured]
        self.levels.sort(key=lambda lv: self.profile.levels().index(lv.concurrency)
                         if lv.concurrency in self.profile.levels() else 10**6)

    def run_level(self, level: int, progress: BenchProgress, result: RunResult) -> None:
        plan = self.plan
        total = self.rounds_at(level)
        before = self.earlier.get(level)
        # a resumed level keeps its complete rounds; a round cut short is measured again
        done = _complete_rounds(before) if before is not None else 0
        rounds = [r for r in (before.rounds if before else []) if 0 <= r.round_index < done]
        old_requests = [q for q in (before.requests if before else []) if 0 <= q.round_index < done]
        first = self.controller.arms_for_round(level, done) if done < total else []
        if not first:
            return
        progress.level(level, len(first) * (total - done + (1 if plan.warmup_requests else 0)))
        self._set_users(self.profile.users_for(level))
        # a controller whose rounds change arms (a sweep's race) names every arm the level may run
        warm_arms = getattr(self.controller, "warmup_arms", lambda _level: first)(level)
        warm = self.enter_period(level, done, total, progress, warm_arms, level_start=True)
        orders = round_orders(self.arm_names, plan.seed, level, total)
        for round_index in range(done, total):
            arms = self.controller.arms_for_round(level, round_index) if round_index > done else first
            if not arms or self.interrupted:
                break
            warm += self.enter_period(level, round_index, total, progress, arms)
            if self.interrupted:
                break
            in_round = self.placement.arms_of(self.period, [a for a in orders[round_index] if a in arms])
            for position, arm in enumerate(in_round):
                rounds.append(self.segment(level, round_index, position, arm, warmup=False, progress=progress))
                progress.advance(f"round {round_index + 1}/{total} done")
                if self.interrupted:
                    break
            new = self.collector.samples(level=level)
            measured = self._level_result(level, warm + rounds, old_requests + new)
            self._store(measured)
            if self.interrupted is None:
                self.controller.round_done(level, round_index, measured)
            annotate = getattr(self.controller, "annotate", None)
            if annotate is not None:
                annotate(result)  # e.g. every look of a sequential test, saved with the round
            self.save(result)
            if self.interrupted:
                break


def _complete_rounds(level: LevelResult) -> int:
    """Rounds from the first of the level on whose every segment completed (round indices are dense)."""
    by_round: dict[int, list[bool]] = {}
    for r in level.rounds:
        if r.round_index >= 0:
            by_round.setdefault(r.round_index, []).append(r.complete)
    n = 0
    while n in by_round and all(by_round[n]):
        n += 1
    return n


def run_controlled(request: BenchRequest, controller: RoundController, *, run_id: str | None = None,
                   run_dir: Path | None = None, resume: RunResult | None = None,
                   earlier: list[LevelResult] | None = None) -> tuple[RunResult, Path]:
    """run_bench with a controller: start (or reach) the arms, check their live flags, run, write the result.
    With `resume` (and its run_dir) the earlier levels are kept and the run continues in the same file; with
    `earlier` a new run continues those levels' rounds (a joined crossover's period 1, sglab/bench/crossover.py)."""
    run_id = run_id or (resume.run_id if resume else new_run_id())
    fresh = run_dir is None
    run_dir = run_dir or create_run_dir(request.loaded.name, run_id, base=request.out)
    started = False
    try:
        with reached_arms(request, run_dir) as (targets, infos, mismatches):
            run = ControlledRun(request, targets, controller, run_id=run_id,
                                earlier=resume.levels if resume else earlier)
            result = run.build_result(infos, mismatches)
            if resume is not None:
                known = {a.name for a in infos}
                result.started_at = resume.started_at
                result.arms = infos + [a for a in resume.arms if a.name not in known]
                result.config_hash = {**resume.config_hash, **result.config_hash}
            started = True
            result = run.execute(result, run_dir)
    finally:
        if not started and fresh:
            shutil.rmtree(run_dir, ignore_errors=True)
    return result, run_dir
