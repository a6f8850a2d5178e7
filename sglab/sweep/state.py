"""A sweep's saved state (sweep.json beside its result.json), written after every round.

The measurements themselves are the run's result.json (kind `sweep`, sealed); sweep.json is not sealed, so
nothing in it decides anything on a resume: the arms are rebuilt from the grid by name, the race records, the
pick and the confirmation are recomputed from the sealed results (sglab/sweep/run.py load_resume). It is read
through the one bounded reader into a typed model whose counts and rounds are bounded by the config's own
limits, so a damaged or hostile file is one ConfigError (file, key, fix), never a traceback or an allocation.
The race records (sglab.sweep.race.RaceRecord, one per gated level) are kept so the outputs and a
reader see every look without rerunning the statistics.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from sglab.config.loadplan import MAX_CONCURRENCY, MAX_LEVELS, MAX_ROUNDS, LoadPlan
from sglab.core.errors import ConfigError
from sglab.core.untrusted_json import read_json
from sglab.results.store import RESULT_LIMITS, write_json_atomic

STATE_FILE = "sweep.json"
STATE_LIMITS = replace(RESULT_LIMITS, what="a sweep state",
                       fix="give a sweep.json sglab wrote")
BASELINE = "baseline"  # the arm every candidate is compared with
MAX_ARMS = 4096  # arms of one sweep (a grid is a product of short lists; no sweep runs this many)
Status = Literal["running", "interrupted", "swept", "no-winner", "confirming", "confirmed", "not-confirmed"]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Text = Annotated[str, Field(max_length=4000)]
Count = Annotated[int, Field(ge=0, le=MAX_CONCURRENCY)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ArmRecord(_Strict):
    """SweepArm.record() as saved: only compared with the grid's own arm of that name, never run as it is."""

    name: Name
    num_steps: Count
    eagle_topk: Count
    num_draft_tokens: Count
    adaptive: bool
    variant: Name
    nccl: Annotated[dict[Name, Text], Field(max_length=64)]
    config_hash: Name
    algorithm: Name | None = None
    draft_model_path: Text | None = None


class SkippedRecord(_Strict):
    name: Name
    reason: Text


class ConfirmationRecord(_Strict):
    run_id: Name
    path: Text
    outcome: Name | None = None
    complete: bool
    sentence: Text | None = None


def _typed(model: type[BaseModel]):
    """Validate a saved dict as `model` and keep it a dict (the outputs read it as one)."""
    return AfterValidator(lambda value: model.model_validate(value).model_dump(mode="json", exclude_unset=True))


class SweepState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: Name
    stack: Name
    quick: bool = False
    metric: Name
    gated_levels: Annotated[list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]], Field(max_length=MAX_LEVELS)]
    max_rounds: Annotated[int, Field(ge=1, le=MAX_ROUNDS)]
    arms: Annotated[list[Annotated[dict[str, Any], _typed(ArmRecord)]], Field(max_length=MAX_ARMS)]
    skipped: Annotated[list[Annotated[dict[str, str], _typed(SkippedRecord)]],
                       Field(max_length=MAX_ARMS * 4)] = Field(default_factory=list)
    notes: Annotated[list[Text], Field(max_length=256)] = Field(default_factory=list)
    baseline_hash: Name
    # level (str) -> RaceRecord; recomputed from the result on every resume
    records: Annotated[dict[Name, dict], Field(max_length=MAX_LEVELS)] = Field(default_factory=dict)
    contenders: Annotated[list[Name], Field(max_length=MAX_ARMS)] = Field(default_factory=list)
    finalists: Annotated[list[Name], Field(max_length=MAX_ARMS)] = Field(default_factory=list)
    status: Status = "running"
    winner: Name | None = None
    winner_cleared_min: bool = False
    confirmation: Annotated[dict[str, Any], _typed(ConfirmationRecord)] | None = None
    plan: dict[str, Any] = Field(default_factory=dict)  # the load plan the sweep ran (a LoadPlan's dump)
    sim_env: Annotated[dict[Name, Text], Field(max_length=256)] = Field(default_factory=dict)
    target: Literal["sim", "urls", "in-cluster"] = "sim"
    # Where the simulators run (arm -> node of sim.nodes, the calibration arms included) and the calibration
    # block's length: what to start and run, never what decides (the result's rounds record the nodes).
    arm_nodes: Annotated[dict[Name, Name], Field(max_length=MAX_ARMS + 16)] = Field(default_factory=dict)
    calibration_rounds: Annotated[int, Field(ge=0, le=MAX_ROUNDS)] = 0

    def arm(self, name: str) -> dict[str, Any] | None:
        return next((a for a in self.arms if a["name"] == name), None)

    def save(self, run_dir: Path) -> Path:
        return write_json_atomic(run_dir / STATE_FILE, self.model_dump(mode="json"), overwrite=True)


def load_state(run_dir: Path) -> SweepState:
    """The saved state, read by the bounded reader; ConfigError (file, key, fix) when it is not one."""
    path = run_dir / STATE_FILE
    if not path.exists():
        raise ConfigError(path, None, f"does not exist: {run_dir} is not a sweep run",
                          "give a sweep's run id or directory (results/<stack>/<run-id>/)")
    try:
        state = SweepState.model_validate(read_json(path, STATE_LIMITS))
        LoadPlan.model_validate(state.plan)  # bounded by the load plan's own limits (rounds, levels, seconds)
        return state
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = [] if exc.title == "SweepState" else ["plan"]
        raise ConfigError(path, ".".join(str(p) for p in [*where, *err["loc"]])[:200], str(err["msg"])[:300],
                          "the file is damaged or not a sweep's state; start the sweep again") from None
