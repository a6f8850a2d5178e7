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
node's calibrated offset, "The calibration" below) is subtracted from every value of the arm, and each bound
widens by the calibration half-widths it involves (`halfwidth_log` per arm; none between two arms of one node,
`node_ids`); the sequences then run at 1 - alpha * (1 - CALIBRATION_ALPHA_SHARE) / K, the calibration having spent
the rest. Subtracting a constant keeps each sequence one of independent rounds.

Stop: one arm left (`selected`), none left (`no-winner`), P(correct selection) >= policy.confidence
(`picked`), or max-rounds (`leader`). A pick the rounds show clearly below min-gain (estimated
P(clears min-gain) < alpha) is not stopped on: the race goes on with the baseline until the
elimination decides. The pick then goes to a confirmation A/B on fresh rounds (winner's curse).

The replay. The sweep saves its rounds, not its decisions: `race_record` replays sglab.sweep.race.Race over the
rounds of a gated level (a matrix rounds x (baseline, arm 1..K) of oriented log values, NaN where a segment did
not run) and returns what the rule decided at every look, what it would run next, and where the measured rounds
differ from what it asked for (evidence recomputed, never trusted).

The calibration: how much faster or slower each slot node runs the baseline's own config. A sweep's arms run on
slot nodes, its baseline on a node of its own; a node's speed adds the same offset to every round an arm runs
there, which the race's paired rounds cannot cancel (docs/load.md, "Designs"). Before a gated level's race, a
calibration block runs the baseline config on every slot node beside the baseline for `sweep.calibration-rounds`
rounds: the mean per-round log ratio is the node's offset against the baseline's node, with a Student t interval
at level 1 - alpha * CALIBRATION_ALPHA_SHARE / S (S slot nodes calibrated). The race subtracts the offset of an
arm's node from its values and widens every bound by the intervals' half-widths it involves (none between two
arms on one node), its own sequences at 1 - alpha * (1 - share) / K: with probability at least 1 - alpha every
calibration interval holds its node's offset and every sequence of the best arm holds its mean, so the race's
family-wise guarantee stands with the node effects removed.

Which rounds calibrated and which node served which arm are read from the sealed result (RoundSample.node),
never from sweep.json: a calibration arm is the baseline config named `baseline@<node>`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from sglab.analysis.sequential import METHOD, bounds
from sglab.schema.result import NodeOffset, RaceArm, RaceArmStatus, RaceLook, RaceOutcome, RaceRecord

# The calibration of the slot nodes.

CALIBRATION_ALPHA_SHARE = 0.5  # of 1 - policy.confidence, spent on the node offsets' intervals
PREFIX = "baseline@"


def calibration_arm(node: str) -> str:
    """The name of the baseline config running on `node` during a calibration block."""
    return f"{PREFIX}{node}"


def calibrated_node(arm: str) -> str | None:
    """The node a calibration arm ran on (None: not a calibration arm)."""
    return arm[len(PREFIX):] if arm.startswith(PREFIX) else None


def node_offsets(values: np.ndarray, nodes: Sequence[str], *, confidence: float) -> list[NodeOffset]:
    """`values`: rounds x (1 + S) oriented log values of the calibration block (the baseline, then the baseline
    config on each of `nodes`; NaN where a segment gave none). Each node's interval is at 1 - alpha * share / S."""
    data = np.asarray(values, dtype=float).reshape(-1, len(nodes) + 1)
    alpha = (1.0 - confidence) * CALIBRATION_ALPHA_SHARE / max(len(nodes), 1)
    out = []
    for s, node in enumerate(nodes):
        both = np.isfinite(data[:, 0]) & np.isfinite(data[:, 1 + s])
        diff = data[both, 1 + s] - data[both, 0]
        n = int(diff.size)
        mean = float(diff.mean()) if n else None
        half = None
        if n >= 2:
            half = float(stats.t.ppf(1.0 - alpha / 2.0, n - 1) * diff.std(ddof=1) / math.sqrt(n))
        out.append(NodeOffset(node=node, rounds=n, mean_log=mean, halfwidth_log=half,
                              estimate=None if mean is None else math.expm1(mean),
                              low=None if mean is None or half is None else math.expm1(mean - half),
                              high=None if mean is None or half is None else math.expm1(mean + half)))
    return out


def arm_corrections(arm_nodes: Sequence[str | None], baseline_node: str | None, offsets: Sequence[NodeOffset]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per arm: (offset to subtract, the half-width its bounds widen by, a node id: arms on one node share it).
    No calibration at all: nothing is corrected (the gaps include the nodes, as the sweep's output says). Otherwise
    an arm on the baseline's node needs no correction, and one on a node without a measured offset gets an
    unbounded half-width (the race can then never decide on it)."""
    by_node = {o.node: o for o in offsets}
    ids = {node: i for i, node in enumerate(dict.fromkeys([baseline_node, *arm_nodes]))}
    offset = np.zeros(len(arm_nodes))
    half = np.zeros(len(arm_nodes))
    for j, node in enumerate(arm_nodes if offsets else []):
        if node == baseline_node:
            continue
        found = by_node.get(node or "")
        if found is None or found.mean_log is None or found.halfwidth_log is None:
            half[j] = math.inf
            continue
        offset[j], half[j] = found.mean_log, found.halfwidth_log
    return offset, half, np.array([ids[node] for node in arm_nodes])


# The race.

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


# One sweep's race replayed from its measured rounds: every look, every elimination, the pick and its
# P(correct), as a RaceRecord (sglab/schema/result.py: sweep.json and a confirmation's result hold it).

BASELINE = "baseline"
RACE = "best-arm race"  # RaceRecord.method


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
    calibrated offsets against `baseline_node` (node_offsets)."""
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
    outcome: RaceOutcome = OUTCOMES[int(race.outcome[0])]  # type: ignore[assignment]
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
        status: RaceArmStatus = ("eliminated" if not alive[j] else
                                 outcome if j == leader and winner is not None else "survivor")  # type: ignore[assignment]
        arms.append(RaceArm(rank=rank, status=status, **states[j]))
    plan = race.plan()[0]
    lower_pick = float(race.base_lower[0, leader]) if leader >= 0 else -math.inf
    return RaceRecord(
        method=RACE, sequence=METHOD, confidence=race.confidence, arm_confidence=race.arm_confidence,
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
