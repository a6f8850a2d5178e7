"""The sweep run: every candidate against one baseline, interleaved and paired by round, with elimination.

One `sglab sim` per arm (or the given URLs). At a gated level (policy.levels) every round runs the
baseline and the arms still in the race; after the round each arm's per-round log-ratio against the
baseline (policy.metric) goes to successive elimination (sglab/analysis/elimination.py), and the arms
it eliminates get no further rounds. A gated level ends when the elimination decides (or at
sweep.max-rounds); the next gated level starts over with the arms not eliminated so far. Ungated
levels run those arms for load.ungated-rounds (for the Pareto plot). The winner then goes to a
confirmation A/B (sglab/sweep/confirm.py): the sweep's own rounds are never its evidence.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from sglab.analysis.elimination import EliminationRecord, successive_elimination
from sglab.analysis.samples import paired
from sglab.config.loader import LoadedStack
from sglab.config.models import LoadPlan
from sglab.results.schema import LevelResult, RunResult
from sglab.results.store import create_run_dir, new_run_id
from sglab.sweep.grid import Grid
from sglab.sweep.state import SweepState
from sglab.untrusted import printable

BASELINE = "baseline"


def say(text: str) -> None:
    """Progress, one line per round, seen at once also when stdout is a file or a pipe."""
    print(printable(text, limit=None), flush=True)


def log_ratios(level: LevelResult, metric: str, arms: list[str]) -> dict[str, list[float]]:
    """arm -> log(arm / baseline) per round where both were measured, in round order."""
    out: dict[str, list[float]] = {}
    for arm in arms:
        _, data = paired(level, metric, [BASELINE, arm])
        out[arm] = [math.log(c / b) for b, c in data] if data.size else []
    return out


class SweepController:
    """Which arms run each round, from the elimination records; saves the state after every round."""

    def __init__(self, state: SweepState, plan: LoadPlan, policy, run_dir: Path, *, echo=say) -> None:
        self.state = state
        self.plan = plan
        self.policy = policy
        self.run_dir = run_dir
        self.echo = echo
        self.ungated_rounds = plan.ungated_rounds or plan.rounds

    def gated(self, level: int) -> bool:
        return level in self.state.gated_levels

    def rounds_at(self, level: int) -> int:
        return self.state.max_rounds if self.gated(level) else self.ungated_rounds

    def record(self, level: int) -> EliminationRecord | None:
        raw = self.state.records.get(str(level))
        return EliminationRecord.model_validate(raw) if raw else None

    def racing(self, level: int) -> list[str]:
        """The arms of the next round at a gated level: its elimination's survivors (all contenders at first)."""
        rec = self.record(level)
        if rec is None:
            return list(self.state.contenders)
        return rec.survivors if rec.outcome == "continue" else []

    def arms_for_round(self, level: int, round_index: int) -> list[str]:
        if self.state.status == "no-winner" or round_index >= self.rounds_at(level):
            return []
        arms = self.racing(level) if self.gated(level) else list(self.state.contenders)
        return [BASELINE, *arms] if arms else []

    def update(self, level: int, measured: LevelResult) -> EliminationRecord:
        """Recompute the level's elimination from all its rounds (also on resume)."""
        arms = [a for a in self.state.contenders if any(r.arm == a for r in measured.rounds)]
        rec = successive_elimination(log_ratios(measured, self.state.metric, arms), min_gain=self.policy.min_gain,
                                     confidence=self.policy.confidence, min_rounds=self.policy.min_rounds,
                                     max_rounds=self.state.max_rounds)
        self.state.records[str(level)] = rec.model_dump(mode="json")
        if rec.outcome != "continue":
            self.state.contenders = [a.arm for a in rec.arms if a.status != "eliminated"]
            if rec.outcome == "no-winner":
                self.state.status = "no-winner"
                self.state.winner = None
            else:
                self.state.winner, self.state.winner_cleared_min = rec.winner, rec.winner_cleared_min
        return rec

    def round_done(self, level: int, round_index: int, measured: LevelResult) -> None:
        if self.gated(level):
            rec = self.update(level, measured)
            gone = [f"{a.arm} ({a.reason})" for a in rec.arms if a.eliminated_at == rec.rounds]
            lead = next((a for a in rec.arms if a.status != "eliminated"), None)
            best = f"; best so far {lead.arm} {lead.estimate:+.1%}" if lead and lead.estimate is not None else ""
            self.echo(f"sweep c={level} round {round_index + 1}/{self.state.max_rounds}: "
                      f"{len(rec.survivors) if rec.outcome == 'continue' else 0} racing"
                      + (f", eliminated {', '.join(gone)}" if gone else "") + best
                      + ("" if rec.outcome == "continue" else f" -> {rec.outcome} {rec.winner or ''}".rstrip()))
        else:
            self.echo(f"sweep c={level} round {round_index + 1}/{self.ungated_rounds} (ungated)")
        self.state.save(self.run_dir)


def new_state(loaded: LoadedStack, grid: Grid, plan: LoadPlan, *, run_id: str, quick: bool,
              sim_env: dict[str, str], target: str) -> SweepState:
    stack = loaded.config
    return SweepState(
        run_id=run_id, stack=loaded.name, quick=quick, metric=stack.policy.metric,
        gated_levels=[c for c in stack.policy.levels if c in plan.concurrency],
        max_rounds=stack.sweep.max_rounds if stack.sweep else 32, arms=[a.record() for a in grid.arms],
        skipped=[{"name": s.name, "reason": s.reason} for s in grid.skipped], notes=list(grid.notes),
        baseline_hash=grid.baseline.config_hash, contenders=[a.name for a in grid.arms],
        plan=plan.model_dump(mode="json"), sim_env=dict(sim_env), target=target)


def sweep_request(loaded: LoadedStack, grid: Grid, plan: LoadPlan, names: list[str], **kw):
    from sglab.load.rounds import ArmsRequest  # the runner imports Locust (gevent): only when running

    arms = [grid.baseline] + [a.arm for a in grid.arms if a.name in names]
    return ArmsRequest(loaded=loaded, plan=plan, kind="sweep", arm_specs=arms, **kw)


def run_sweep(loaded: LoadedStack, grid: Grid, plan: LoadPlan, *, quick: bool = False, target: str = "sim",
              urls: dict[str, str] | None = None, sim_env: dict[str, str] | None = None, out: Path | None = None,
              progress: bool = False, echo=say) -> tuple[SweepState, RunResult, Path]:
    """Run the sweep's measurement (no confirmation); the state is saved after every round."""
    from sglab.load.rounds import run_controlled

    if not grid.arms:
        raise ValueError("the grid has no runnable arm (every combination was skipped)")
    run_id = new_run_id()
    run_dir = create_run_dir(loaded.name, run_id, base=out)
    state = new_state(loaded, grid, plan, run_id=run_id, quick=quick, sim_env=sim_env or {}, target=target)
    state.save(run_dir)
    controller = SweepController(state, plan, loaded.config.policy, run_dir, echo=echo)
    request = sweep_request(loaded, grid, plan, state.contenders, target_kind=target, urls=urls or {},
                            sim_env=sim_env or {}, out=out, progress=progress)
    result, run_dir = run_controlled(request, controller, run_id=run_id, run_dir=run_dir)
    finish(state, result, run_dir)
    return state, result, run_dir


def resume_sweep(loaded: LoadedStack, grid: Grid, run_dir: Path, result: RunResult, state: SweepState, *,
                 urls: dict[str, str] | None = None, progress: bool = False, echo=say
                 ) -> tuple[SweepState, RunResult, Path]:
    """Continue an interrupted sweep in its own run directory, from its saved rounds."""
    from sglab.load.rounds import run_controlled

    now = {a.name: a.config_hash for a in grid.arms}
    changed = [a["name"] for a in state.arms if now.get(a["name"]) != a["config_hash"]]
    if changed or grid.baseline.config_hash != state.baseline_hash:
        raise ValueError(f"stack '{loaded.name}' changed since sweep {state.run_id} started (arms "
                         f"{changed or ['baseline']} hash differently); start a new sweep")
    plan = LoadPlan.model_validate(state.plan)
    controller = SweepController(state, plan, loaded.config.policy, run_dir, echo=echo)
    state.status, state.records, state.contenders = "running", {}, [a["name"] for a in state.arms]
    for level in result.levels:  # recompute every decision from the saved rounds
        if controller.gated(level.concurrency) and state.status == "running":
            controller.update(level.concurrency, level)
    echo(f"resuming sweep {state.run_id}: {len(state.contenders)} arms still in it")
    request = sweep_request(loaded, grid, plan, state.contenders, target_kind=state.target, urls=urls or {},
                            sim_env=state.sim_env, out=run_dir.parent.parent, progress=progress)
    result, run_dir = run_controlled(request, controller, run_dir=run_dir, resume=result)
    finish(state, result, run_dir)
    return state, result, run_dir


def sweep_verdict(state: SweepState) -> dict:
    """The sweep's decision as a result's verdict (what `--result-configmap` hands to the Pulumi program): the
    ranking (arm, gain, interval, eliminated when and why, per gated level) and the leader with its config hash.
    A leader is a candidate for the confirmation A/B, never a promotion."""
    from sglab.sweep.outputs import ranking_rows

    winner = state.arm(state.winner) if state.winner else None
    rows = ranking_rows(state)
    if winner is None:
        sentence = (f"sweep of {len(state.arms)} arms: no arm beat the baseline by policy.min-gain; nothing to "
                    "confirm" if state.status == "no-winner" else f"sweep of {len(state.arms)} arms: {state.status}")
    else:
        row = next((r for r in reversed(rows) if r["arm"] == state.winner), None)
        shown = "" if row is None or row["gain"] is None else (
            f" {row['gain']:+.1%} at c={row['level']}" + ("" if row["low"] is None or row["high"] is None else
                                                         f" [{row['low']:+.1%}, {row['high']:+.1%}]"))
        sentence = (f"sweep of {len(state.arms)} arms: leader {state.winner}{shown} "
                    f"({'clears' if state.winner_cleared_min else 'does not clear'} policy.min-gain); "
                    "confirm it with a fresh A/B before promoting")
    return {"kind": "sweep", "outcome": state.status, "sentence": sentence, "metric": state.metric,
            "winner": state.winner, "winner_config_hash": winner["config_hash"] if winner else None,
            "winner_cleared_min": state.winner_cleared_min, "arms": [a["name"] for a in state.arms],
            "ranking": rows}


def finish(state: SweepState, result: RunResult, run_dir: Path) -> None:
    if not result.complete:
        state.status = "interrupted"
        print(f"sweep interrupted ({result.incomplete_reason}); continue with: sglab sweep --stack {state.stack} "
              f"--resume {state.run_id}", file=sys.stderr)
    elif state.status != "no-winner":
        state.status = "swept" if state.winner else "no-winner"
    state.save(run_dir)
