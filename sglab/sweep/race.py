"""Best-arm identification for a sweep: the contenders, not every survivor, get the next rounds.

A sweep compares K arms with one baseline. A round measures some of them, one segment each (every
arm is a deployed server; on a cluster, a wave's fixed slots). What a round measures is the oriented
log value of the gate metric per segment, g = log(value) (negated where lower is better), so within
a round the differences g_i - g_j compare two arms and g_j - g_baseline an arm with the baseline,
with whatever the round shares (drift, neighbours) cancelled.

Sequences. Every pair of arms has its within-round differences over the rounds where both ran; every
arm has its differences with the baseline over the rounds where both ran. Each is the anytime-valid
confidence sequence that `sglab.analysis.sequential.sequential_test` decides on (`bounds`), at
level 1 - alpha/K (alpha = 1 - policy.confidence). tests/sweep/test_best_arm.py checks that every
elimination below is the decision sequential_test takes on that one sequence.

Elimination, the family-wise guarantee: an arm is eliminated `below-min` when its sequence with the
baseline lies below log(1 + min-gain), `not-best` when an arm still in the race is above it (the
pair's lower bound > 0). The true best arm can only be eliminated if one of the K sequences that
involve it (its K - 1 pairs, its baseline sequence) misses its mean: probability <= alpha, however
the rounds were allocated (they are chosen from past rounds only, so each sequence is still a
sequence of independent rounds: optional skipping).

Allocation, top-two style (Russo 2016, "Simple Bayesian algorithms for best-arm identification";
LUCB, Kalyanakrishnan et al. ICML 2012, which samples the leader and its strongest challenger): the
first min-rounds rounds run every arm and the baseline (screening); after that a round runs the pick
and the `challengers` arms most likely to beat it, and the baseline only while the pick is not yet
estimated to clear min-gain. The far arms are not eliminated, they simply get no rounds they do not
need; the eliminated ones never get one again.

P(correct selection), the estimate beside the pick: the product over the arms still in the race of
P(the arm is not better than the pick), each from the pair's mean gap and a round noise pooled over
the pick's pairs (Student t with the pooled degrees of freedom). It is an estimate (flat prior,
normal rounds, similar noise per arm), not a guarantee; benchmarks/sweep_quality.py measures how it
compares with the real pick accuracy. A race where every other arm was eliminated has the
guarantee instead: the pick is the best with probability >= policy.confidence.

Slot nodes. Where the arms run on other nodes than the baseline (a sweep's slots), `offset_log` (per arm: its
node's calibrated offset, sglab/sweep/calibration.py) is subtracted from every value of the arm, and each bound
widens by the calibration half-widths it involves (`halfwidth_log` per arm; none between two arms of one node,
`node_ids`); the sequences then run at 1 - alpha * (1 - CALIBRATION_ALPHA_SHARE) / K, the calibration having spent
the rest. Subtracting a constant keeps each sequence one of independent rounds.

Stop: one arm left (`selected`), none left (`no-winner`), P(correct selection) >= policy.confidence
(`picked`), or max-rounds (`leader`). A pick the rounds show clearly below min-gain (estimated
P(clears min-gain) < alpha) is not stopped on: the race goes on with the baseline until the
elimination decides. The pick then goes to a confirmation A/B on fresh rounds (winner's curse).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from sglab.analysis.sequential import bounds
from sglab.sweep.calibration import CALIBRATION_ALPHA_SHARE

BELOW_MIN, NOT_BEST = 1, 2  # why an arm was eliminated
CONTINUE, SELECTED, PICKED, LEADER, NO_WINNER = 0, 1, 2, 3, 4
OUTCOMES = {CONTINUE: "continue", SELECTED: "selected", PICKED: "picked", LEADER: "leader", NO_WINNER: "no-winner"}
REASONS = {BELOW_MIN: "below-min", NOT_BEST: "not-best"}
CHALLENGERS = 2  # per round beside the pick (benchmarks/sweep_quality.py measures 1 and 2)


def latest_bounds(a: np.ndarray, b: np.ndarray, *, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (rounds, lower, upper) of the confidence sequence of a - b over the rounds (last axis) where both
    are finite, at its latest round; unbounded sides are -inf/+inf."""
    both = np.isfinite(a) & np.isfinite(b)
    n = both.sum(axis=-1)
    lower = np.full(n.shape, -np.inf)
    upper = np.full(n.shape, np.inf)
    if not n.size or not n.any():
        return n, lower, upper
    order = np.argsort(~both, axis=-1, kind="stable")  # the rounds both ran, in order, first
    d = np.take_along_axis(np.where(both, a - b, 0.0), order, axis=-1)[..., : int(n.max())]
    _, lo, up = bounds(d, confidence=confidence)
    at = np.maximum(n - 1, 0)[..., None]
    has = n > 0
    lower[has] = np.take_along_axis(lo, at, axis=-1)[..., 0][has]
    upper[has] = np.take_along_axis(up, at, axis=-1)[..., 0][has]
    return n, lower, upper


def _mean_var(n: np.ndarray, total: np.ndarray, squares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, total / np.maximum(n, 1), 0.0)
        var = np.where(n > 1, np.maximum(squares - n * mean * mean, 0.0) / np.maximum(n - 1, 1), np.nan)
    return mean, var


class Race:
    """Many sweeps of the same K arms at once (trials x arms), one round at a time: `plan()` says which arms (and
    whether the baseline) run the next round, `observe()` takes what they measured. Column 0 of both is the
    baseline, columns 1..K the arms. The sweep replays one trial from its saved rounds; the benchmark runs
    thousands: the same decisions either way."""

    def __init__(self, trials: int, arms: int, *, min_gain: float, confidence: float = 0.95, min_rounds: int = 3,
                 max_rounds: int | None = None, horizon: int | None = None, challengers: int = CHALLENGERS,
                 offset_log: np.ndarray | None = None, halfwidth_log: np.ndarray | None = None,
                 node_ids: np.ndarray | None = None) -> None:
        if arms < 1:
            raise ValueError("a race needs at least one arm")
        if not 0.5 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
        horizon = horizon or max_rounds
        if horizon is None:
            raise ValueError("give max_rounds or horizon (the most rounds the race can see)")
        self.trials, self.k = trials, arms
        self.min_gain, self.confidence, self.min_rounds = min_gain, confidence, max(min_rounds, 2)
        self.max_rounds, self.challengers = max_rounds, challengers
        # per arm, or per trial and arm (the benchmark's trials each calibrate their own nodes)
        self.offset_log = np.broadcast_to(np.zeros(arms) if offset_log is None else offset_log, (trials, arms))
        half = np.broadcast_to(np.zeros(arms) if halfwidth_log is None else halfwidth_log, (trials, arms))
        nodes = np.zeros(arms, dtype=int) if node_ids is None else np.asarray(node_ids)
        self.calibrated = bool((half != 0).any() or (self.offset_log != 0).any())
        self.base_widen = half
        self.pair_widen = np.where(nodes[:, None] == nodes[None, :], 0.0, half[:, :, None] + half[:, None, :])
        share = CALIBRATION_ALPHA_SHARE if self.calibrated else 0.0
        self.arm_confidence = 1.0 - (1.0 - confidence) * (1.0 - share) / arms
        self.threshold_log = math.log1p(min_gain)
        self.values = np.full((trials, arms + 1, horizon), np.nan)
        self.t = 0
        shape = (trials, arms, arms)
        self.pair_n, self.pair_sum, self.pair_sq = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self.pair_lower, self.pair_upper = np.full(shape, -np.inf), np.full(shape, np.inf)  # of g_i - g_j
        self.base_n, self.base_sum, self.base_sq = (np.zeros((trials, arms)) for _ in range(3))
        self.base_lower, self.base_upper = np.full((trials, arms), -np.inf), np.full((trials, arms), np.inf)
        self.alive = np.ones((trials, arms), dtype=bool)
        self.eliminated_at = np.zeros((trials, arms), dtype=int)  # the look (round count) that eliminated it
        self.reason = np.zeros((trials, arms), dtype=int)
        self.running = np.ones(trials, dtype=bool)
        self.outcome = np.full(trials, CONTINUE)
        self.looks = np.zeros(trials, dtype=int)
        self.segments = np.zeros(trials, dtype=int)  # measured segments, baseline included: the cost
        self._assess()

    # ---- what the rounds say ------------------------------------------------------------------------------

    def _assess(self) -> None:
        """The pick (leader), each arm's chance of beating it, P(correct selection), P(pick clears min-gain)."""
        k, rows = self.k, np.arange(self.trials)
        mean, var = _mean_var(self.pair_n, self.pair_sum, self.pair_sq)
        other = self.alive[:, :, None] & self.alive[:, None, :] & ~np.eye(k, dtype=bool) & (self.pair_n > 0)
        worst = np.where(other, mean, np.inf).min(axis=2)  # each arm's smallest paired lead over the others
        leader = np.where(self.alive, worst, -np.inf).argmax(axis=1)
        n, m, v = self.pair_n[rows, leader], mean[rows, leader], var[rows, leader]
        rivals = self.alive & (np.arange(k)[None, :] != leader[:, None])
        usable = rivals & (n >= 2) & np.isfinite(v)
        df = np.where(usable, n - 1, 0).sum(axis=1)
        pooled = np.where(usable, (n - 1) * np.nan_to_num(v), 0.0).sum(axis=1) / np.maximum(df, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            z = m / np.sqrt(np.maximum(pooled, 1e-18)[:, None] / np.maximum(n, 1))
        beats = np.where(usable, stats.t.sf(np.nan_to_num(z, nan=0.0), np.maximum(df, 1)[:, None]), 0.0)
        self.p_beats = np.where(rivals & ~usable, 0.5, beats)  # P(arm j is better than the pick)
        self.leader = np.where(self.alive.any(axis=1), leader, -1)
        self.p_correct = np.prod(1.0 - self.p_beats, axis=1)
        bmean, bvar = _mean_var(self.base_n, self.base_sum, self.base_sq)
        nb, mb, vb = self.base_n[rows, leader], bmean[rows, leader], bvar[rows, leader]
        with np.errstate(invalid="ignore", divide="ignore"):
            zb = (mb - self.threshold_log) / np.sqrt(np.maximum(np.nan_to_num(vb), 1e-18) / np.maximum(nb, 1))
        self.p_clears_min = np.where(nb >= 2, stats.t.cdf(np.nan_to_num(zb, nan=0.0), np.maximum(nb - 1, 1)), 0.5)

    # ---- the next round ------------------------------------------------------------------------------------

    def plan(self) -> np.ndarray:
        """(trials, 1 + K) bool: the baseline (column 0) and the arms of the next round; all False where done."""
        out = np.zeros((self.trials, self.k + 1), dtype=bool)
        screening = self.running & (self.looks < self.min_rounds)
        out[screening, 0] = True
        out[screening, 1:] = self.alive[screening]
        rest = np.nonzero(self.running & ~screening)[0]
        if rest.size:
            out[rest, 1 + self.leader[rest]] = True
            order = np.argsort(-self.p_beats[rest], axis=1, kind="stable")[:, : self.challengers]
            for c in range(order.shape[1]):
                pick = order[:, c]
                out[rest, 1 + pick] |= self.p_beats[rest, pick] > 0.0
            out[rest, 0] = self.p_clears_min[rest] < self.confidence
        return out

    # ---- one round measured --------------------------------------------------------------------------------

    def observe(self, values: np.ndarray) -> None:
        """One round: (trials, 1 + K) oriented log values, NaN where a segment did not run (or gave no value)."""
        values = np.asarray(values, dtype=float).reshape(self.trials, self.k + 1)
        if self.t >= self.values.shape[2]:
            raise ValueError(f"the race has room for {self.values.shape[2]} rounds")
        values = np.where(self.running[:, None], values, np.nan)
        values[:, 1:] -= self.offset_log  # each arm as if on the baseline's node (NaN stays NaN)
        self.values[:, :, self.t] = values
        self.t += 1
        self.looks[self.running] += 1
        ran = np.isfinite(values)
        self.segments += ran.sum(axis=1)
        arm_ran, g = ran[:, 1:], np.nan_to_num(values[:, 1:])
        both = arm_ran[:, :, None] & arm_ran[:, None, :] & ~np.eye(self.k, dtype=bool)
        diff = g[:, :, None] - g[:, None, :]
        self.pair_n += both
        self.pair_sum += np.where(both, diff, 0.0)
        self.pair_sq += np.where(both, diff * diff, 0.0)
        with_base = arm_ran & ran[:, :1]
        to_base = g - np.nan_to_num(values[:, :1])
        self.base_n += with_base
        self.base_sum += np.where(with_base, to_base, 0.0)
        self.base_sq += np.where(with_base, to_base * to_base, 0.0)
        self._update_bounds(both, with_base)
        self._eliminate()
        self._assess()
        self._stop()

    def _update_bounds(self, both: np.ndarray, with_base: np.ndarray) -> None:
        """Recompute the sequences that got a round (only those change), from min-rounds rounds on."""
        data = self.values[:, :, : self.t]
        t_idx, i, j = np.nonzero(np.triu(both, 1) & (self.pair_n >= self.min_rounds))
        if t_idx.size:
            _, lo, up = latest_bounds(data[t_idx, 1 + i], data[t_idx, 1 + j], confidence=self.arm_confidence)
            lo, up = lo - self.pair_widen[t_idx, i, j], up + self.pair_widen[t_idx, i, j]
            self.pair_lower[t_idx, i, j], self.pair_upper[t_idx, i, j] = lo, up
            self.pair_lower[t_idx, j, i], self.pair_upper[t_idx, j, i] = -up, -lo
        t_idx, j = np.nonzero(with_base & (self.base_n >= self.min_rounds))
        if t_idx.size:
            _, lo, up = latest_bounds(data[t_idx, 1 + j], data[t_idx, 0], confidence=self.arm_confidence)
            self.base_lower[t_idx, j] = lo - self.base_widen[t_idx, j]
            self.base_upper[t_idx, j] = up + self.base_widen[t_idx, j]

    def _eliminate(self) -> None:
        live = self.alive & self.running[:, None]
        below = live & (self.base_upper < self.threshold_log)
        beaten = (self.alive[:, :, None] & (self.pair_lower > 0.0)).any(axis=1)  # an arm in the race is better
        not_best = live & ~below & beaten
        gone = below | not_best
        look = np.broadcast_to(self.looks[:, None], gone.shape)
        self.eliminated_at[gone] = look[gone]
        self.reason[below], self.reason[not_best] = BELOW_MIN, NOT_BEST
        self.alive &= ~gone

    def _stop(self) -> None:
        left = self.alive.sum(axis=1)
        not_below = self.p_clears_min >= 0.5  # the pick is not more likely short of min-gain than not
        at_max = self.looks >= self.max_rounds if self.max_rounds is not None else np.zeros(self.trials, bool)
        active = self.running & ((self.looks >= self.min_rounds) | at_max)
        out = np.select([left == 0, (left == 1) & not_below, (left > 1) & (self.p_correct >= self.confidence)
                         & not_below, at_max], [NO_WINNER, SELECTED, PICKED, LEADER], CONTINUE)
        done = active & (out != CONTINUE)
        self.outcome[done] = out[done]
        self.running &= ~done

    @property
    def guaranteed(self) -> np.ndarray:
        """Per trial: the race ended with every other arm eliminated, so the pick is the best with probability
        >= confidence (`selected`, or `leader` at max-rounds for a lone arm not yet shown above min-gain)."""
        return (self.outcome != CONTINUE) & (self.outcome != NO_WINNER) & (self.alive.sum(axis=1) == 1)
