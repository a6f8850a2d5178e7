"""What `sglab promote` needs from a sweep's confirmation run: the stack as the confirmed arm.

A confirmation result (`result.sweep` set) is evidence for the sweep arm it confirms, not for the
stack's own candidate, so it is only accepted when named explicitly (`--result`). Only the sealed result
names the arm, and only by name: the arm is the stack's grid's arm of that name as the grid is now
(sglab/sweep/grid.py expand), an arm outside the grid or recorded with other flags is refused, and
promote then compares config hashes exactly as for any run, so a stack edited since the confirmation is
refused as stale.
"""

from __future__ import annotations

from sglab.core.errors import ConfigError
from sglab.config.loader import LoadedStack
from sglab.schema.result import RunResult

ARM_KEYS = ("name", "num_steps", "eagle_topk", "num_draft_tokens", "adaptive", "nccl")


def confirmed_source(source: LoadedStack, result: RunResult, *, explicit: bool
                     ) -> tuple[LoadedStack | None, tuple[str, str] | None]:
    """(the stack with the confirmed arm as candidate, None) or (None, (why, fix)) when refused."""
    from sglab.sweep.confirm import winner_stack

    record = result.sweep or {}
    arm = record.get("arm")
    run = result.run_id
    if not isinstance(arm, dict) or any(k not in arm for k in ARM_KEYS):
        return None, (f"run {run} says it confirms a sweep arm but does not record which one completely",
                      "re-run the sweep's confirmation (`sglab sweep --resume <sweep run>`)")
    if not explicit:
        return None, (f"the newest run {run} is the confirmation of sweep arm {arm['name']} "
                      f"(sweep {record.get('sweep_run_id')}), not of the stack's own candidate",
                      f"promote it explicitly: sglab promote --stack {source.name} --result <that run's "
                      "directory>, or run `sglab bench` for the stack's candidate")
    from sglab.results import integrity
    from sglab.sweep.grid import expand
    from sglab.sweep.state import ArmRecord

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
        same = ArmRecord.model_validate(arm) == ArmRecord.model_validate(found.record())
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
