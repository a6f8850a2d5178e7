"""A sweep's saved state (sweep.json beside its result.json), written after every round.

The measurements themselves are the run's result.json (kind `sweep`); the race records here
(sglab.sweep.race_record.RaceRecord, one per gated level) are recomputed from it at every round
and on resume (evidence recomputed, never trusted), and kept so the outputs and a reader see every look
without rerunning the statistics.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from sglab.core.errors import ConfigError
from sglab.results.store import RESULT_LIMITS, write_json_atomic
from sglab.core.untrusted_json import read_json

STATE_FILE = "sweep.json"
STATE_LIMITS = replace(RESULT_LIMITS, what="a sweep state", fix="give a sweep.json sglab wrote")
BASELINE = "baseline"  # the arm every candidate is compared with
Status = Literal["running", "interrupted", "swept", "no-winner", "confirming", "confirmed", "not-confirmed"]


class SweepState(BaseModel):
    run_id: str
    stack: str
    quick: bool = False
    metric: str
    gated_levels: list[int]
    max_rounds: int
    arms: list[dict[str, Any]]  # SweepArm.record() of every candidate
    skipped: list[dict[str, str]] = Field(default_factory=list)  # name, reason
    notes: list[str] = Field(default_factory=list)
    baseline_hash: str
    records: dict[str, dict] = Field(default_factory=dict)  # level (str) -> RaceRecord
    contenders: list[str] = Field(default_factory=list)  # not eliminated at any gated level so far
    finalists: list[str] = Field(default_factory=list)  # the pick and its challengers: what ungated levels run
    status: Status = "running"
    winner: str | None = None
    winner_cleared_min: bool = False
    confirmation: dict[str, Any] | None = None  # run_id, path, outcome, sentence
    plan: dict[str, Any] = Field(default_factory=dict)  # the load plan the sweep ran (its --quick etc.)
    sim_env: dict[str, str] = Field(default_factory=dict)
    target: str = "sim"

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
        return SweepState.model_validate(read_json(path, STATE_LIMITS))
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise ConfigError(path, ".".join(str(p) for p in err["loc"])[:200], err["msg"],
                          "the file is damaged or not a sweep's state; start the sweep again") from None
