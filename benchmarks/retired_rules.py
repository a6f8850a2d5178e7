"""Rules sglab retired, kept only so the benchmarks can compare the product's rule with them.

- Lai's t-mixture confidence sequence (Lai 1976; Wang & Ramdas 2023): exact for i.i.d. Gaussian rounds and
  nothing more. The product decides everywhere on the robust sequence of sglab.analysis.sequential.
- Successive elimination of sweep arms, each on its own Lai sequence against the baseline at 1 - alpha / K:
  every survivor gets every round. The product's sweep runs the best-arm race (sglab/sweep/race.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from sglab.analysis.sequential import _finite_rounds, _spread, round_stats

DEFAULT_MIXTURE_G = 1.0
LAI_METHOD = "t-mixture-cs"


def radius_factor(rounds: np.ndarray | int, *, confidence: float = 0.95,
                  mixture_g: float = DEFAULT_MIXTURE_G) -> np.ndarray:
    """Lai's CS half-width in units of the sample sd (ddof=1) after `rounds` rounds; inf where unbounded."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if mixture_g <= 0.0:
        raise ValueError(f"mixture_g must be > 0, got {mixture_g}")
    n = np.asarray(rounds, dtype=float)
    out = np.full(n.shape, np.inf)
    ok = n >= 2
    if not ok.any():
        return out
    nn = n[ok]
    a = 1.0 + nn * mixture_g
    k = np.exp((0.5 * np.log(a) + math.log(1.0 / (1.0 - confidence))) * 2.0 / nn)
    bounded = k < a
    u = np.full(nn.shape, np.inf)
    u[bounded] = (k[bounded] - 1.0) / (1.0 - k[bounded] / a[bounded])
    out[ok] = np.sqrt((nn - 1.0) * u / nn)  # |mean - mu0| >= sd sqrt(nu u / n)  <=>  M_n(mu0) >= 1 / alpha
    return out



def cs_bounds(values: np.ndarray, *, confidence: float = 0.95,
              mixture_g: float = DEFAULT_MIXTURE_G) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lai's (mean, lower, upper) after each round along the last axis (leading axes: independent sequences)."""
    x = _finite_rounds(values)
    stats = round_stats(x)
    radius = _spread(stats.sd, radius_factor(stats.n, confidence=confidence, mixture_g=mixture_g))
    return stats.mean, stats.mean - radius, stats.mean + radius



Reason = Literal["below-min", "not-best"]
Status = Literal["selected", "leader", "survivor", "eliminated"]
SweepOutcome = Literal["selected", "leader", "no-winner", "continue"]


class ArmState(BaseModel):
    """One arm at the end (or at the current look) of the elimination, with its rank (1 = best)."""

    arm: str
    rank: int
    status: Status
    rounds: int  # rounds this arm was measured in (counted until its elimination)
    mean_log: float | None
    lower_log: float | None
    upper_log: float | None
    estimate: float | None
    low: float | None
    high: float | None
    eliminated_at: int | None = None  # the round count of the look that eliminated it
    reason: Reason | None = None


class EliminationLook(BaseModel):
    rounds: int
    survivors: list[str]
    eliminated: dict[str, Reason]


class EliminationRecord(BaseModel):
    method: str = LAI_METHOD  # elimination decides on Lai's i.i.d. sequence
    confidence: float  # familywise
    arm_confidence: float  # each arm's sequence: 1 - (1 - confidence) / K
    mixture_g: float
    min_gain: float
    threshold_log: float
    min_rounds: int
    max_rounds: int | None
    outcome: SweepOutcome
    winner: str | None  # selected or leader; a candidate for the confirmation A/B, not a promotion
    winner_cleared_min: bool  # the winner's lower bound is above log(1 + min-gain) (still needs confirmation)
    rounds: int  # looks taken
    arm_rounds: int  # rounds measured over all arms, baseline included (the cost in arm-rounds)
    arms: list[ArmState]
    looks: list[EliminationLook]

    @property
    def survivors(self) -> list[str]:
        """Arms that still get rounds (when outcome is `continue`)."""
        return [a.arm for a in self.arms if a.status == "survivor"]


def _none_if_inf(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


BELOW_MIN, NOT_BEST = 1, 2
_REASONS: dict[int, Reason] = {BELOW_MIN: "below-min", NOT_BEST: "not-best"}


def eliminate(lower: np.ndarray, upper: np.ndarray, *, threshold_log: float, min_rounds: int = 2,
              available: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The elimination rule over many sweeps at once: bounds are (trials x arms x rounds), each arm's
    sequence at its Bonferroni level. Returns per trial and arm the round count of its elimination
    (0 = never) and the reason code (BELOW_MIN, NOT_BEST), and per trial the looks taken and whether
    the data ran out for a survivor (`available`: rounds of data per trial and arm, default all)."""
    trials, k, total = lower.shape
    avail = np.full((trials, k), total) if available is None else np.asarray(available)
    alive = np.ones((trials, k), dtype=bool)
    running = np.ones(trials, dtype=bool)
    out_round = np.zeros((trials, k), dtype=int)
    out_reason = np.zeros((trials, k), dtype=int)
    looks = np.zeros(trials, dtype=int)
    starved = np.zeros(trials, dtype=bool)
    for i in range(total):
        short = running & (alive & (avail <= i)).any(axis=1)
        starved |= short
        running &= ~short
        if not running.any():
            break
        looks[running] = i + 1
        if i + 1 >= min_rounds:
            lo = np.where(alive, lower[:, :, i], -np.inf)
            best_lower = lo.max(axis=1, keepdims=True)
            up = upper[:, :, i]
            act = alive & running[:, None]
            below = act & (up < threshold_log)
            not_best = act & ~below & (up < best_lower)
            gone = below | not_best
            out_round[gone] = i + 1
            out_reason[below] = BELOW_MIN
            out_reason[not_best] = NOT_BEST
            alive &= ~gone
        left = alive.sum(axis=1)
        lone_cleared = (np.where(alive, lower[:, :, i], -np.inf).max(axis=1) > threshold_log) & (left == 1)
        running &= (left > 1) | ((left == 1) & ~lone_cleared)
    return out_round, out_reason, looks, starved


def successive_elimination(log_ratios: Mapping[str, Sequence[float] | np.ndarray], *, min_gain: float,
                           confidence: float = 0.95, min_rounds: int = 2, max_rounds: int | None = None,
                           mixture_g: float = DEFAULT_MIXTURE_G) -> EliminationRecord:
    """Replay the elimination look by look over each arm's per-round log-ratios (arm -> rounds).

    An arm's list may be longer than the round it was eliminated at (extra rounds are ignored) but a
    survivor needs every round up to the current look; when a survivor's data run out the record ends
    with outcome `continue` and `survivors` says who runs the next round. Call it again after each
    round with all rounds so far."""
    names = list(log_ratios)
    if not names:
        raise ValueError("no arms to compare")
    if len(set(names)) != len(names):
        raise ValueError("arm names must be unique")
    k = len(names)
    data = [np.asarray(log_ratios[a], dtype=float).ravel() for a in names]
    total = max(d.size for d in data)
    if max_rounds is not None:
        total = min(total, max_rounds)
    arm_conf = 1.0 - (1.0 - confidence) / k
    threshold = math.log1p(min_gain)
    mean = np.full((1, k, total), np.nan)
    lower = np.full((1, k, total), np.nan)
    upper = np.full((1, k, total), np.nan)
    avail = np.array([[min(d.size, total) for d in data]])
    for j, d in enumerate(data):
        if d.size:
            m, lo, up = cs_bounds(d[:total], confidence=arm_conf, mixture_g=mixture_g)
            mean[0, j, :m.size], lower[0, j, :m.size], upper[0, j, :m.size] = m, lo, up
    out_round, out_reason, looks_taken, starved = eliminate(lower, upper, threshold_log=threshold,
                                                           min_rounds=min_rounds, available=avail)
    rounds = int(looks_taken[0])
    gone = {names[j]: (int(out_round[0, j]), _REASONS[int(out_reason[0, j])]) for j in range(k) if out_round[0, j]}
    alive = [a for a in names if a not in gone]
    at_max = max_rounds is not None and rounds >= max_rounds and not starved[0]
    lone_lower = float(lower[0, names.index(alive[0]), rounds - 1]) if len(alive) == 1 and rounds else -math.inf
    if not alive:
        outcome: SweepOutcome = "no-winner"
    elif len(alive) == 1 and (lone_lower > threshold or at_max):
        outcome = "selected"
    elif len(alive) > 1 and at_max:
        outcome = "leader"
    else:
        outcome = "continue"

    def state(j: int) -> dict:
        a = names[j]
        n = gone[a][0] if a in gone else rounds
        n = min(n, int(avail[0, j]))
        if n == 0:
            return dict(arm=a, rounds=0, mean_log=None, lower_log=None, upper_log=None, estimate=None,
                        low=None, high=None)
        m, lo, hi = float(mean[0, j, n - 1]), _none_if_inf(float(lower[0, j, n - 1])), \
            _none_if_inf(float(upper[0, j, n - 1]))
        return dict(arm=a, rounds=n, mean_log=m, lower_log=lo, upper_log=hi, estimate=math.expm1(m),
                    low=None if lo is None else math.expm1(lo), high=None if hi is None else math.expm1(hi))

    states = {names[j]: state(j) for j in range(k)}

    def point(a: str) -> float:
        m = states[a]["mean_log"]
        return -math.inf if m is None else m

    ranked = sorted(alive, key=lambda a: -point(a)) + sorted(gone, key=lambda a: (-gone[a][0], -point(a)))
    winner = ranked[0] if outcome in ("selected", "leader") else None
    arms: list[ArmState] = []
    for rank, a in enumerate(ranked, start=1):
        status: Status = "eliminated" if a in gone else ("survivor" if a != winner else
                                                          "selected" if outcome == "selected" else "leader")
        arms.append(ArmState(rank=rank, status=status, eliminated_at=gone[a][0] if a in gone else None,
                             reason=gone[a][1] if a in gone else None, **states[a]))
    look_rows: list[EliminationLook] = []
    for r in range(1, rounds + 1):
        out = {a: why for a, (at, why) in gone.items() if at == r}
        look_rows.append(EliminationLook(rounds=r, eliminated=out,
                                         survivors=[a for a in names if a not in gone or gone[a][0] > r]))
    lower_w = states[winner]["lower_log"] if winner else None
    return EliminationRecord(
        confidence=confidence, arm_confidence=arm_conf, mixture_g=mixture_g, min_gain=min_gain,
        threshold_log=threshold, min_rounds=min_rounds, max_rounds=max_rounds, outcome=outcome, winner=winner,
        winner_cleared_min=lower_w is not None and lower_w > threshold, rounds=rounds,
        arm_rounds=sum(s.rounds for s in arms) + rounds, arms=arms, looks=look_rows)
