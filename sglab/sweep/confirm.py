"""The winner's confirmation A/B: a normal `kind: ab` run of the winner against the baseline, on fresh rounds.

The sweep's rounds picked the winner, so they are not its evidence (winner's curse). The confirmation
runs the winner as the stack's candidate (sglab/sweep/grid.py arm_stack with the NCCL variant in
sglab:nccl for both arms, so the gain is speculation's own and no confound blocks it), with a new
seed (new prompts and round orders) and sweep.confirm-rounds rounds at the gated levels, and is
judged by the normal verdict. The result records which sweep arm it confirms (`result.sweep`);
`sglab promote --stack S --result <confirmation run>` promotes that arm's serving config.

What `sglab promote` then needs from it (`confirmed_source`): the stack as the confirmed arm. A confirmation
result (`result.sweep` set) is evidence for the sweep arm it confirms, not for the stack's own candidate, so it
is only accepted when named explicitly (`--result`). Only the sealed result names the arm, and only by name: the
arm is the stack's grid's arm of that name as the grid is now (sglab/sweep/grid.py expand), an arm outside the
grid or recorded with other flags is refused, and promote then compares config hashes exactly as for any run, so
a stack edited since the confirmation is refused as stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglab.analysis.nodes import rounds_for_looks
from sglab.config.loader import LoadedStack
from sglab.config.loadplan import MAX_ROUNDS, MAX_SEED, LoadPlan
from sglab.core.errors import ConfigError
from sglab.load.request import BenchRequest
from sglab.results import integrity
from sglab.results.store import write_result
from sglab.schema.result import RunResult, SweepArmRecord, SweepConfirmation
from sglab.sweep.grid import Grid, arm_stack, expand
from sglab.sweep.run import SweepState

SEED_OFFSET = 7919  # the confirmation's seed: the sweep's + this (fresh prompts and orders, reproducible)


def winner_stack(loaded: LoadedStack, arm: dict[str, Any]) -> LoadedStack:
    """The stack with the sweep arm as its candidate, as the confirmation and its promotion read it."""
    return arm_stack(loaded, num_steps=arm["num_steps"], eagle_topk=arm["eagle_topk"],
                     num_draft_tokens=arm["num_draft_tokens"], adaptive=arm["adaptive"], nccl=arm["nccl"],
                     shared_nccl=True, algorithm=arm.get("algorithm"), draft_model_path=arm.get("draft_model_path"))


def confirmation_plan(loaded: LoadedStack, state: SweepState) -> LoadPlan:
    """sweep.confirm-rounds counts the sequence's looks: under a crossover or switchback (policy.design) each look
    is a pair or block of rounds, so the confirmation runs the rounds that give that many (at most MAX_ROUNDS)."""
    plan = LoadPlan.model_validate(state.plan).for_run()
    spec = loaded.config.sweep
    looks = spec.confirm_rounds if spec and spec.confirm_rounds else plan.rounds
    rounds = min(rounds_for_looks(loaded.config.policy.design, looks, plan.period_rounds), MAX_ROUNDS)
    return plan.model_copy(update={"seed": (plan.seed + SEED_OFFSET) % (MAX_SEED + 1), "rounds": rounds})


def sweep_record(state: SweepState, arm: dict[str, Any]) -> SweepConfirmation:
    return SweepConfirmation.model_validate({
        "sweep_run_id": state.run_id, "arm": arm, "selected_by": state.records,
        "note": "confirmation of the sweep's winner on fresh rounds; promote with "
                f"`sglab promote --stack {state.stack} --result <this run>`"})


def run_confirmation(loaded: LoadedStack, state: SweepState, grid: Grid, *, out: Path | None = None,
                     progress: bool = False) -> tuple[Any, Path]:
    """Run and judge the confirmation of the pick, the grid's arm of that name (never sweep.json's record of it);
    returns (result, run_dir) with result.sweep recorded."""
    from sglab.load.runner import run_bench
    from sglab.bench.sequential import judge_and_report

    picked = grid.arm(state.winner or "")
    if picked is None:
        raise ValueError(f"sweep {state.run_id} has no winner of the grid to confirm")
    arm = picked.record()
    stack = winner_stack(loaded, arm)
    request = BenchRequest(loaded=stack, plan=confirmation_plan(loaded, state), kind="ab",
                           target_kind=state.target if state.target == "sim" else "urls",
                           sim_env=dict(state.sim_env), out=out, progress=progress)
    # fixed rounds, also under the default sequential policy: its verdict is the confidence sequence at
    # those rounds (valid, stricter than the t), and a sequential stop at the source's min-gain could leave
    # the evidence short of a promotion target's higher one (docs/verdict.md, "Sequential decisions")
    result, run_dir = run_bench(request)
    result.sweep = sweep_record(state, arm)
    write_result(result, run_dir, overwrite=True)
    outcome = judge_and_report(result, run_dir) if result.complete else None
    state.confirmation = {"run_id": result.run_id, "path": str(run_dir), "outcome": outcome,
                          "complete": result.complete,
                          "sentence": result.verdict.sentence if result.verdict is not None else None}
    state.status = "confirmed" if outcome == "promote" else "not-confirmed"
    return result, run_dir


def confirmed_source(source: LoadedStack, result: RunResult, *, explicit: bool
                     ) -> tuple[LoadedStack | None, tuple[str, str] | None]:
    """(the stack with the confirmed arm as candidate, None) or (None, (why, fix)) when refused."""
    record = result.sweep
    if record is None:
        raise ValueError(f"run {result.run_id} is not a sweep's confirmation")
    arm = record.arm.model_dump(mode="json")
    run = result.run_id
    if not explicit:
        return None, (f"the newest run {run} is the confirmation of sweep arm {arm['name']} "
                      f"(sweep {record.sweep_run_id}), not of the stack's own candidate",
                      f"promote it explicitly: sglab promote --stack {source.name} --result <that run's "
                      "directory>, or run `sglab bench` for the stack's candidate")
    problem = integrity.verify(result)
    if problem is not None:
        return None, (f"run {run} cannot be trusted as evidence: {problem}",
                      "re-run the sweep's confirmation (`sglab sweep --resume <sweep run>`)")
    fix = f"run a new sweep of the stack's grid (`sglab sweep --stack {source.name}`) and promote its confirmation"
    try:
        grid = expand(source)
    except ConfigError as exc:
        return None, (f"the grid of stack '{source.name}' cannot be expanded: {exc.problem}", fix)
    found = grid.arm(str(arm["name"]))
    if found is None:
        return None, (f"run {run} confirms arm {arm['name']}, which is not an arm of stack '{source.name}''s grid "
                      "(sglab:sweep)", fix)
    try:
        same = SweepArmRecord.model_validate(arm) == SweepArmRecord.model_validate(found.record())  # as written
    except ValueError:
        same = False
    if not same:
        return None, (f"run {run} records arm {arm['name']} with other flags than stack '{source.name}''s grid gives "
                      "it", fix)
    try:
        return winner_stack(source, found.record()), None
    except ConfigError as exc:
        return None, (f"sweep arm {arm['name']} cannot be rebuilt from stack '{source.name}' as it is now: "
                      f"{exc.problem}", "re-run the sweep against the current stack")
