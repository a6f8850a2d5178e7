"""One sweep's race replayed from its measured rounds: every look, every elimination, the pick and its P(correct).

The sweep saves its rounds, not its decisions: `race_record` replays sglab.sweep.race.Race over the
rounds of a gated level (a matrix rounds x (baseline, arm 1..K) of oriented log values, NaN where a
segment did not run) and returns what the rule decided at every look, what it would run next, and where
the measured rounds differ from what it asked for (evidence recomputed, never trusted).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from sglab.analysis.sequential import METHOD
from sglab.sweep.calibration import NodeOffset, arm_corrections
from sglab.sweep.race import CHALLENGERS, OUTCOMES, REASONS, Race

BASELINE = "baseline"
Reason = Literal["below-min", "not-best"]
Status = Literal["selected", "picked", "leader", "survivor", "eliminated"]
Outcome = Literal["selected", "picked", "leader", "no-winner", "continue"]


class RaceArm(BaseModel):
    """One arm at the race's last look, with its rank (1 = the pick)."""

    arm: str
    rank: int
    status: Status
    node: str | None = None  # the node it ran on (its values are corrected by that node's calibrated offset)
    rounds: int  # rounds this arm was measured in
    baseline_rounds: int = 0  # of those, the rounds the baseline ran too (what `estimate` is over)
    mean_log: float | None  # against the baseline, over the rounds both ran
    lower_log: float | None  # its confidence sequence at the arm level (None: unbounded)
    upper_log: float | None
    estimate: float | None
    low: float | None
    high: float | None
    eliminated_at: int | None = None  # the look (round count) that eliminated it
    reason: Reason | None = None
    gap_to_pick: float | None = None  # paired: exp(mean(g_arm - g_pick)) - 1 over the rounds both ran
    p_beats_pick: float | None = None  # estimated P(this arm is better than the pick); None: eliminated or the pick


class RaceLook(BaseModel):
    rounds: int
    planned: list[str]  # what the rule asked this round to run ("baseline" included)
    measured: list[str]  # what gave a value
    leader: str | None
    p_correct: float
    eliminated: dict[str, Reason] = Field(default_factory=dict)


class RaceRecord(BaseModel):
    method: str = "best-arm race"
    sequence: str = METHOD  # the race decides on the verdict's sequence (sglab.analysis.sequential)
    confidence: float  # familywise: the best arm is eliminated with probability <= 1 - confidence
    arm_confidence: float  # each sequence: 1 - (1 - confidence) / K
    min_gain: float
    threshold_log: float
    min_rounds: int
    max_rounds: int | None
    challengers: int
    outcome: Outcome
    winner: str | None  # the pick once the race stopped (selected, picked, leader); never a promotion
    leader: str | None  # the pick so far (also while the race continues)
    p_correct: float | None  # estimated P(the pick is the best arm) among the arms not eliminated
    p_correct_guaranteed: bool  # every other arm eliminated: P(correct) >= confidence by construction
    p_clears_min: float | None  # estimated P(the pick beats the baseline by min-gain)
    winner_cleared_min: bool  # the pick's confidence sequence with the baseline clears log(1 + min-gain)
    rounds: int  # looks taken
    arm_rounds: int  # measured segments, baseline included (the cost in arm-rounds)
    next_round: list[str]  # while `continue`: the baseline (if needed) and the arms of the next round
    challengers_now: list[str]  # the arms most likely to beat the pick, at the last look
    off_plan: list[int] = Field(default_factory=list)  # rounds that measured other arms than the rule asked for
    baseline_node: str | None = None
    calibration: list[NodeOffset] = Field(default_factory=list)  # the slot nodes against the baseline's node
    calibration_rounds: int = 0  # rounds of the calibration block before the race
    arms: list[RaceArm]
    looks: list[RaceLook]

    @property
    def survivors(self) -> list[str]:
        """Arms not eliminated, the pick included."""
        return [a.arm for a in self.arms if a.status != "eliminated"]


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _names(mask: np.ndarray, names: Sequence[str]) -> list[str]:
    return [([BASELINE, *names])[i] for i in np.nonzero(mask)[0]]


def race_record(names: Sequence[str], values: np.ndarray, *, min_gain: float, confidence: float = 0.95,
                min_rounds: int = 3, max_rounds: int | None = None, challengers: int = CHALLENGERS,
                arm_nodes: Sequence[str | None] | None = None, baseline_node: str | None = None,
                calibration: Sequence[NodeOffset] = (), calibration_rounds: int = 0) -> RaceRecord:
    """Replay the race look by look over `values` (rounds x (1 + K): the baseline, then `names`; oriented log
    values, NaN where a segment did not run). Rounds after the race stopped are ignored. Call it again after
    every round with all rounds so far. `arm_nodes` and `calibration`: where each arm ran and the nodes'
    calibrated offsets against `baseline_node` (sglab/sweep/calibration.py)."""
    names = list(names)
    if not names:
        raise ValueError("no arms to compare")
    if len(set(names)) != len(names) or BASELINE in names:
        raise ValueError("arm names must be unique and not 'baseline'")
    data = np.asarray(values, dtype=float).reshape(-1, len(names) + 1)
    if max_rounds is not None:
        data = data[:max_rounds]
    nodes = list(arm_nodes) if arm_nodes is not None else [baseline_node] * len(names)
    offset, half, ids = arm_corrections(nodes, baseline_node, calibration)
    race = Race(1, len(names), min_gain=min_gain, confidence=confidence, min_rounds=min_rounds,
                max_rounds=max_rounds, horizon=max(len(data), 1), challengers=challengers,
                offset_log=offset, halfwidth_log=half, node_ids=ids)
    looks: list[RaceLook] = []
    off_plan: list[int] = []
    for r, row in enumerate(data):
        if not race.running[0]:
            break
        planned = race.plan()[0]
        measured = np.isfinite(row)
        if not np.array_equal(planned, measured):
            off_plan.append(r + 1)
        before = race.alive[0].copy()
        race.observe(row[None, :])
        gone = before & ~race.alive[0]
        leader = int(race.leader[0])
        looks.append(RaceLook(rounds=r + 1, planned=_names(planned, names), measured=_names(measured, names),
                              leader=names[leader] if leader >= 0 else None, p_correct=float(race.p_correct[0]),
                              eliminated={names[j]: REASONS[int(race.reason[0, j])] for j in np.nonzero(gone)[0]}))
    record = _record(race, names, looks, off_plan, nodes)
    record.baseline_node, record.calibration = baseline_node, list(calibration)
    record.calibration_rounds = calibration_rounds
    return record


def _record(race: Race, names: list[str], looks: list[RaceLook], off_plan: list[int],
            nodes: list[str | None]) -> RaceRecord:
    outcome: Outcome = OUTCOMES[int(race.outcome[0])]  # type: ignore[assignment]
    alive, leader = race.alive[0], int(race.leader[0])
    winner = names[leader] if outcome in ("selected", "picked", "leader") and leader >= 0 else None
    measured = np.isfinite(race.values[0, :, : race.t])
    bmean = race.base_sum[0] / np.maximum(race.base_n[0], 1)
    order = [int(j) for j in np.argsort(-race.p_beats[0], kind="stable") if alive[j] and j != leader]
    top = [names[j] for j in order[: race.challengers] if race.p_beats[0, j] > 0.0]

    def arm(j: int) -> dict:
        lo, hi = _finite(float(race.base_lower[0, j])), _finite(float(race.base_upper[0, j]))
        has = race.base_n[0, j] > 0
        m = float(bmean[j]) if has else None
        n_pair = race.pair_n[0, j, leader] if leader >= 0 else 0
        gap = race.pair_sum[0, j, leader] / n_pair if leader >= 0 and j != leader and n_pair else None
        return dict(arm=names[j], node=nodes[j], rounds=int(measured[1 + j].sum()),
                    baseline_rounds=int(race.base_n[0, j]),
                    mean_log=m, lower_log=lo, upper_log=hi,
                    estimate=None if m is None else math.expm1(m), low=None if lo is None else math.expm1(lo),
                    high=None if hi is None else math.expm1(hi),
                    eliminated_at=int(race.eliminated_at[0, j]) or None,
                    reason=REASONS.get(int(race.reason[0, j])),
                    gap_to_pick=None if gap is None else math.expm1(float(gap)),
                    p_beats_pick=float(race.p_beats[0, j]) if alive[j] and j != leader else None)

    states = {j: arm(j) for j in range(len(names))}
    gone = [j for j in range(len(names)) if not alive[j]]
    rest = [j for j in range(len(names)) if alive[j] and j != leader]
    rest.sort(key=lambda j: -(states[j]["gap_to_pick"] if states[j]["gap_to_pick"] is not None else -math.inf))
    gone.sort(key=lambda j: (-states[j]["eliminated_at"], -(states[j]["mean_log"] or -math.inf)))
    ranked = ([leader] if leader >= 0 else []) + rest + gone
    arms = []
    for rank, j in enumerate(ranked, start=1):
        status: Status = ("eliminated" if not alive[j] else
                          outcome if j == leader and winner is not None else "survivor")  # type: ignore[assignment]
        arms.append(RaceArm(rank=rank, status=status, **states[j]))
    plan = race.plan()[0]
    lower_pick = float(race.base_lower[0, leader]) if leader >= 0 else -math.inf
    return RaceRecord(
        confidence=race.confidence, arm_confidence=race.arm_confidence,
        min_gain=race.min_gain, threshold_log=race.threshold_log, min_rounds=race.min_rounds,
        max_rounds=race.max_rounds, challengers=race.challengers, outcome=outcome, winner=winner,
        leader=names[leader] if leader >= 0 else None,
        p_correct=float(race.p_correct[0]) if leader >= 0 else None,
        p_correct_guaranteed=bool(race.guaranteed[0]),
        p_clears_min=float(race.p_clears_min[0]) if leader >= 0 else None,
        winner_cleared_min=winner is not None and lower_pick > race.threshold_log,
        rounds=int(race.looks[0]), arm_rounds=int(race.segments[0]),
        next_round=_names(plan, names) if outcome == "continue" else [], challengers_now=top,
        off_plan=off_plan, arms=arms, looks=looks)
