"""`sglab bench` with policy.method sequential (the default): each sequentially run level runs until its
confidence sequence decides.

The two-arm case of the per-round control (sglab/load/rounds.py): after every round at a level the bench
runs sequentially, the paired log-ratios of policy.metric go to sglab.analysis.sequential.sequential_test
(with futility), once per gain the level is judged against: the stack's own min-gain at its gated levels,
and the promotion target's (`sglab:promote-to`, default production) at the levels that target gates, so the
evidence can decide the target's gate too. The level stops when every one of them has decided, or at the max
rounds. A continued sequence (sglab/analysis/accumulate.py) starts from the earlier runs' rounds of the same
pair. Every look is recorded in result.sequential (level -> record; `stop_rule`: level -> the lines it
stopped against, [gain, checks] each: a target may gate with stricter checks, policy.checks) and the level's last look
is printed with why it stopped; the verdict recomputes all of it
from the rounds. Other levels run their fixed load.ungated-rounds (and get the fixed-n interval).

A finished run is then judged (`judge_and_report`): its verdict stored, its table printed, its report written,
a step `sglab bench` and a sweep's confirmation share.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sglab.analysis.accumulate import SequenceError, continue_sequence, key_of
from sglab.analysis.nodes import design_of
from sglab.analysis.sequential import SequentialRecord, sequential_test
from sglab.analysis.stops import ESTIMATE_UNIT, StopLine, level_log_ratios, line_for, stop_reason, threshold_for
from sglab.analysis.verdict import judge
from sglab.core.untrusted import printable
from sglab.load.request import BenchRequest, RefusedError
from sglab.report.console import render_console
from sglab.results.store import write_result
from sglab.schema.result import LevelResult, RunResult, SequenceRecord, SequentialRun

if TYPE_CHECKING:
    from sglab.config.policy import PromotionPolicy

MAX_ROUNDS_FACTOR = 2  # default max rounds: twice load.rounds (docs/verdict.md measures max 32 vs fixed 16)


def max_rounds_for(plan_rounds: int, *, rounds_given: bool = False) -> int:
    """The most rounds a sequential level may get: the rounds given (the bench's --rounds: a budget the run may
    stop short of, never exceed), else MAX_ROUNDS_FACTOR x load.rounds."""
    return plan_rounds if rounds_given else MAX_ROUNDS_FACTOR * plan_rounds


def stop_rule(policy, target_policy=None) -> dict[int, list[StopLine]]:
    """level -> the lines a sequential level is run until it decides: the policy's at its gated levels and the
    target policy's at the target's, each with its policy's checks (the strictest line first decided last)."""
    out: dict[int, list[StopLine]] = {}
    # a target judged with a fixed-n interval must get fixed rounds: a sequential stop would be peeking at it
    sources = [policy] + ([target_policy] if target_policy is not None and target_policy.method == "sequential" else [])
    for source in sources:
        for level in source.levels:
            line = line_for(source, level)
            if line not in out.setdefault(level, []):
                out[level].append(line)
    return out


class SequentialBench:
    def __init__(self, request: BenchRequest, max_rounds: int, *, echo=None, target_policy=None,
                 earlier: dict[int, list[float]] | None = None, sequence: SequenceRecord | None = None) -> None:
        self.policy = request.loaded.config.policy
        self.plan = request.plan
        self.arms = [a.name for a in request.arms]
        self.max_rounds = max_rounds
        self.lines = stop_rule(self.policy, target_policy)
        self.earlier = {lv: list(v) for lv, v in (earlier or {}).items()}
        self.sequence = sequence
        self.records: dict[str, SequentialRecord] = {}
        self.others: dict[str, list[SequentialRecord]] = {}  # a level's records against the target's other gains
        self.decided: dict[int, bool] = {}
        self.looked: dict[int, int] = {}  # level -> the looks echoed so far
        self.echo = echo or (lambda text: print(text, file=sys.stderr))

    def gated(self, level: int) -> bool:
        return level in self.lines

    def rounds_at(self, level: int) -> int:
        return self.max_rounds if self.gated(level) else (self.plan.ungated_rounds or self.plan.rounds)

    def threshold(self, level: int) -> float:
        return threshold_for(self.policy, level)

    def arms_for_round(self, level: int, round_index: int) -> list[str]:
        if round_index >= self.rounds_at(level):
            return []
        if self.gated(level) and self.decided.get(level):
            return []
        return list(self.arms)

    def round_done(self, level: int, round_index: int, measured: LevelResult) -> None:
        if not self.gated(level):
            return
        records = self.tests(measured)
        main = records[0]
        self.records[str(level)] = main
        self.others[str(level)] = records[1:]
        self.decided[level] = all(r.decision != "continue" for r in records)
        look = main.last
        if look is None or (not self.decided[level] and self.looked.get(level) == look.rounds):
            return  # a round that completed no new estimate (a crossover's odd period) adds no look
        self.looked[level] = look.rounds
        design = design_of(measured)
        rounds = len({s.round_index for s in measured.rounds if not s.warmup and s.round_index >= 0})
        if not self.decided[level]:
            band = "unbounded" if look.low is None else f"[{look.low:+.1%}, {look.high:+.1%}]"
            unit = ESTIMATE_UNIT[design]
            where = f"round {look.rounds}" if unit == "round" else f"{unit} {look.rounds} (round {rounds})"
            self.echo(f"sequential c={level} {where}: gain {look.estimate:+.1%} {band} -> continue")
        else:
            for record in records:
                self.echo(stop_reason(level, record, design=design, measured_rounds=rounds))

    def tests(self, measured: LevelResult) -> list[SequentialRecord]:
        """One record per gain the level is run against; the first is the stack's own (or the target's, at a
        level only the target gates)."""
        before = self.earlier.get(measured.concurrency, [])
        mine = level_log_ratios(measured, self.policy.metric, self.policy)
        # max_rounds counts the sequence's looks, which a crossover's pairs or a switchback's blocks make fewer
        # than rounds: at the level's last round the looks it has are all it gets (undecided is inconclusive)
        rounds = len({s.round_index for s in measured.rounds if not s.warmup and s.round_index >= 0})
        last = rounds >= self.rounds_at(measured.concurrency) and len(mine) > 0
        cap = min(len(mine), self.max_rounds) if last else self.max_rounds
        return [sequential_test(before + mine, min_gain=line.gain, confidence=self.policy.confidence,
                                min_rounds=self.policy.min_rounds, max_rounds=cap, futility=True,
                                earlier_rounds=len(before), checks=line.checks)
                for line in self.lines[measured.concurrency]]

    def annotate(self, result: RunResult) -> None:
        stop_rule = {str(lv): [tuple(line) for line in lines] for lv, lines in self.lines.items()}
        others = {k: v for k, v in self.others.items() if v}
        result.sequential = SequentialRun.model_validate({**self.records, "stop_rule": stop_rule, "others": others,
                                                          "sequence": self.sequence})


def resolve_sequence(request: BenchRequest, *, fresh_reason: str | None = None
                     ) -> tuple[SequenceRecord | None, dict[int, list[float]]]:
    """The sequence a new run of this pair continues (record, level -> earlier log-ratios), before anything
    starts; (None, {}) for runs that cannot continue one. Refuses (RefusedError) when an earlier run of the
    sequence is missing or changed, any run of the stack's results cannot be trusted, or the run's load seed
    was already counted."""
    from sglab.load.runner import recorded_sim_env

    policy = request.loaded.config.policy
    sim_env, scale = recorded_sim_env(request)
    key = key_of(stack=request.loaded.name, kind=request.kind,
                 config_hash={a.name: a.config_hash for a in request.arms},
                 policy=policy.model_dump(mode="json", by_alias=False),
                 plan=request.plan.model_dump(mode="json", by_alias=False), target_kind=request.target_kind,
                 time_scale=scale, sim_env=sim_env, urls=dict(request.urls or {}))
    if key is None:
        return None, {}
    try:
        record = continue_sequence(request.loaded.name, key, policy, base=request.out, fresh_reason=fresh_reason,
                                   seed=request.plan.seed)
    except SequenceError as exc:
        raise RefusedError(f"{exc.why}; fix: {exc.fix}") from None
    earlier: dict[int, list[float]] = {}
    for run in record.runs:
        for level, ratios in run.levels.items():
            earlier.setdefault(int(level), []).extend(ratios)
    return record, earlier


def run_sequential(request: BenchRequest, *, rounds_given: bool = False,
                   target_policy=None, earlier: dict[int, list[float]] | None = None,
                   sequence: SequenceRecord | None = None,
                   earlier_levels: list | None = None):
    """run_bench with the sequential stop at the sequential levels; returns (result, run_dir).

    `rounds_given` says load.rounds came from --rounds (or a joined crossover's period 1), which is then the most
    rounds (see max_rounds_for); `target_policy`
    the promotion target's policy (its gated levels run sequentially too); `earlier` the continued sequence's
    log-ratios per level and `sequence` its record (sglab/analysis/accumulate.py), saved with every round;
    `earlier_levels` the rounds this run continues (a joined crossover's period 1, sglab/bench/crossover.py)."""
    from sglab.load.rounds import run_controlled

    limit = max_rounds_for(request.plan.rounds, rounds_given=rounds_given)
    # the recorded plan says what the run may measure: up to `limit` rounds at the sequential levels
    request = replace(request, plan=request.plan.model_copy(update={"rounds": limit}))
    controller = SequentialBench(request, limit, target_policy=target_policy, earlier=earlier, sequence=sequence)
    return run_controlled(request, controller, earlier=earlier_levels)


def promotion_target(loaded) -> tuple[str | None, PromotionPolicy | None, str | None]:
    """(target stack name, its policy, a note) for `sglab:promote-to`: the stack the evidence is going to. A target
    named on purpose must exist (ConfigError); the default (production) may be absent, said in the note."""
    from sglab.config.loader import load_stack, promotion_target_path

    name = loaded.config.promote_to
    if name == loaded.name:
        return None, None, None
    path = promotion_target_path(loaded.config, loaded.name, loaded.path.parent, loaded.path)
    if path is None:
        return name, None, f"no stack '{name}' next to {loaded.path.name}: only this stack's own gate is run"
    return name, load_stack(name, path=path).config.policy, None


def with_levels(request: BenchRequest, levels: list[int]) -> BenchRequest:
    """The request measuring `levels` too (the promotion target's gated levels), concurrency profile only."""
    if request.plan.profile != "concurrency" or set(levels) <= set(request.plan.concurrency):
        return request
    plan = request.plan.model_copy(update={"concurrency": sorted(set(request.plan.concurrency) | set(levels))})
    return replace(request, plan=plan)


def plan_sentence(lines: dict[int, list[StopLine]], policy, target: str | None, target_policy) -> str:
    """`sequential at 1 (+0.5% this stack, +2.0% production, strict checks) and 4 (+2.0% production, strict
    checks)`, for the start line."""
    parts = []
    for level, level_lines in sorted(lines.items()):
        who = []
        for line in level_lines:
            owners = [n for n, p in (("this stack", policy), (target, target_policy))
                      if p is not None and level in p.levels and line_for(p, level) == line]
            strict = "" if line.checks == "standard" else f", {line.checks} checks"
            who.append(f"{line.gain:+.1%} {' and '.join(owners)}{strict}")
        parts.append(f"{level} ({', '.join(who)})")
    return "sequential at " + ", ".join(parts)


@dataclass
class SequentialPlan:
    """What a sequential bench runs, decided before anything starts (`prepare`)."""

    target_policy: object | None = None
    sequence: SequenceRecord | None = None
    earlier: dict[int, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sentence: str = ""


def prepare(request: BenchRequest, *, quick: bool, rounds_given: bool,
            fresh: bool | str, own_gate_only: bool = False) -> tuple[BenchRequest, SequentialPlan]:
    """The request measuring the promotion target's gated levels too (not for --quick, a CI-sized smoke run), and
    the sequence it continues; RefusedError when an earlier run of the sequence is missing or changed."""
    plan = SequentialPlan()
    target, target_policy, note = promotion_target(request.loaded)
    plan.notes += [note] if note else []
    if target_policy is not None and (quick or own_gate_only):
        flag = "--quick" if quick else "--own-gate-only"
        plan.notes.append(f"{flag} runs only this stack's gate sequentially, not {target}'s: for evidence that "
                          f"{target}'s gate can pass, run without {flag}")
        target_policy = None
    if target_policy is not None and request.kind == "ab":
        request = with_levels(request, list(target_policy.levels))
        plan.target_policy = target_policy
    policy = request.loaded.config.policy
    reason = fresh if isinstance(fresh, str) else "--fresh-sequence" if fresh else None  # a string: why afresh
    plan.sequence, plan.earlier = resolve_sequence(request, fresh_reason=reason)
    if plan.sequence is not None and plan.sequence.runs:
        runs = ", ".join(r.run_id for r in plan.sequence.runs)
        rounds = ", ".join(f"{len(v)} rounds at {lv}" for lv, v in sorted(plan.earlier.items()))
        plan.notes.append(f"continues the sequence of runs {runs} ({rounds}): re-running this pair keeps the "
                          "sequence's error rate")
    elif plan.sequence is not None and plan.sequence.reason:
        plan.notes.append(f"a new sequence for this pair: {plan.sequence.reason}")
    limit = max_rounds_for(request.plan.rounds, rounds_given=rounds_given)
    plan.sentence = (f"{plan_sentence(stop_rule(policy, plan.target_policy), policy, target, plan.target_policy)} "
                     f"({policy.confidence:.0%} confidence sequence, stops at its decision, at most {limit} rounds)")
    return request, plan


# The judged end of a run.

def judge_and_report(result: RunResult, run_dir: Path) -> str | None:
    """Store the verdict in the result, write the report, print what `sglab compare` prints; returns the
    outcome. A sweep's confirmation (result.sweep) is promoted only by naming it, so its next step names this
    run's directory."""
    verdict = judge(result)
    if result.sweep is not None:
        verdict.promote_result = str(run_dir)
    result.verdict = verdict
    write_result(result, run_dir, overwrite=True)
    try:
        from sglab.report import write_report
    except ImportError:
        write_report = None
    report = write_report(result, run_dir, verdict) if write_report is not None else None
    # what `sglab compare` prints: the table, what served the arms (and the simulator label), the report
    print(printable(render_console(result, verdict, report), newlines=True, limit=None))
    return verdict.outcome
