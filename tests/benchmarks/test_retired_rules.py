"""The retired rules the benchmarks compare the product's rule with (benchmarks/retired_rules.py): Lai's
t-mixture sequence is where its martingale reaches 1/alpha, and successive elimination keeps its guarantee."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from retired_rules import (  # noqa: E402 (benchmarks/ is a folder of scripts, not a package)
    BELOW_MIN, EliminationRecord, cs_bounds, eliminate, radius_factor, successive_elimination)

ALPHA = 0.05
SIGMA = 0.0276  # sd of a per-round log-ratio in a real simulator run
THRESHOLD = math.log1p(0.005)
GAINS = (0.059, 0.035, 0.02, 0.01, 0.0, -0.03, -0.08, -0.15)  # arm 0 is the best


def _arms(rng: np.random.Generator, gains: tuple[float, ...], trials: int, rounds: int,
          shared: float = 0.5) -> np.ndarray:
    """Per-round log(arm / baseline), trials x arms x rounds; the baseline's noise is common to all arms."""
    base = rng.normal(0.0, SIGMA * math.sqrt(shared), (trials, 1, rounds))
    own = rng.normal(0.0, SIGMA * math.sqrt(1 - shared), (trials, len(gains), rounds))
    return np.log1p(np.asarray(gains))[None, :, None] + own - base


def _run(x: np.ndarray, arm_confidence: float, max_rounds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _, lower, upper = cs_bounds(x[:, :, :max_rounds], confidence=arm_confidence)
    rnd, why, looks, _ = eliminate(lower, upper, threshold_log=THRESHOLD, min_rounds=3)
    return rnd, why, looks


def test_picks_the_true_best_and_rarely_eliminates_it() -> None:
    rng = np.random.default_rng(11)
    x = _arms(rng, GAINS, trials=1000, rounds=40)
    rnd, _, looks = _run(x, 1 - ALPHA / len(GAINS), 40)
    best_eliminated = float((rnd[:, 0] > 0).mean())
    assert best_eliminated <= ALPHA
    # the pick: the single survivor, else the survivors' best point estimate at max-rounds
    mean = np.cumsum(x, axis=2) / np.arange(1, 41)
    at_stop = np.take_along_axis(mean, (looks - 1)[:, None, None].repeat(len(GAINS), 1), axis=2)[:, :, 0]
    pick = np.where(rnd == 0, at_stop, -np.inf).argmax(axis=1)
    assert float((pick == 0).mean()) >= 0.95
    # and it is cheaper than running every arm for every round
    arm_rounds = np.where(rnd > 0, rnd, looks[:, None]).sum(axis=1) + looks
    assert float(arm_rounds.mean()) < 0.75 * 40 * (len(GAINS) + 1)


def test_familywise_error_needs_the_split_alpha() -> None:
    """All arms sit exactly at the minimum: eliminating any of them is an error. Bonferroni keeps the
    family's error <= alpha; giving each arm the full alpha does not (so the split is not decoration)."""
    rng = np.random.default_rng(12)
    x = _arms(rng, (0.005,) * 8, trials=3000, rounds=60)
    split, _, _ = _run(x, 1 - ALPHA / 8, 60)
    unsplit, _, _ = _run(x, 1 - ALPHA, 60)
    assert float((split > 0).any(axis=1).mean()) <= ALPHA
    assert float((unsplit > 0).any(axis=1).mean()) > ALPHA


def test_equal_best_arms_are_not_eliminated_as_not_best() -> None:
    rng = np.random.default_rng(13)
    x = _arms(rng, (0.03,) * 6 + (-0.1, -0.2), trials=1000, rounds=60)
    rnd, why, _ = _run(x, 1 - ALPHA / 8, 60)
    assert float((rnd[:, :6] > 0).any(axis=1).mean()) <= ALPHA
    assert (why[:, 6:] > 0).mean() > 0.99  # the clearly worse two are eliminated


def test_record_ranks_arms_with_round_and_reason() -> None:
    rng = np.random.default_rng(5)
    x = _arms(rng, GAINS, trials=1, rounds=60)[0]
    rec = successive_elimination({f"arm{i}": x[i] for i in range(len(GAINS))}, min_gain=0.005, min_rounds=3,
                                 max_rounds=60)
    assert rec.arms[0].arm == "arm0" and rec.arms[0].rank == 1
    assert rec.winner == "arm0" and rec.outcome in ("selected", "leader")
    assert rec.arm_confidence == pytest.approx(1 - ALPHA / 8)
    gone = [a for a in rec.arms if a.status == "eliminated"]
    assert gone and all(a.reason in ("below-min", "not-best") and a.eliminated_at == a.rounds for a in gone)
    assert [a.eliminated_at for a in gone] == sorted((a.eliminated_at for a in gone), reverse=True)
    worst = next(a for a in rec.arms if a.arm == "arm7")
    assert worst.reason == "below-min" and worst.high < 0.005
    assert rec.arm_rounds == sum(a.rounds for a in rec.arms) + rec.rounds
    assert [lk.rounds for lk in rec.looks] == list(range(1, rec.rounds + 1))
    assert EliminationRecord.model_validate_json(rec.model_dump_json()) == rec
    # the vectorised rule and the record agree
    _, lower, upper = cs_bounds(x[None, :, :60], confidence=rec.arm_confidence)
    rnd, _, _, _ = eliminate(lower, upper, threshold_log=THRESHOLD, min_rounds=3)
    assert {f"arm{i}": int(r) for i, r in enumerate(rnd[0]) if r} == {a.arm: a.eliminated_at for a in gone}


def test_replay_with_ragged_rounds_says_who_runs_next() -> None:
    rng = np.random.default_rng(6)
    x = _arms(rng, GAINS, trials=1, rounds=60)[0]
    full = successive_elimination({f"arm{i}": x[i] for i in range(8)}, min_gain=0.005, min_rounds=3)
    gone_at = {a.arm: a.eliminated_at for a in full.arms if a.eliminated_at}
    first = min(gone_at.values())
    # eliminated arms stop being measured: their series end at their elimination round
    cut = {f"arm{i}": x[i][:gone_at.get(f"arm{i}", first + 2)] for i in range(8)}
    part = successive_elimination(cut, min_gain=0.005, min_rounds=3)
    assert part.outcome == "continue" and part.rounds == first + 2
    assert set(part.survivors) == {a for a in cut if gone_at.get(a, 10 ** 6) > first + 2}


def test_no_arm_beats_the_baseline_means_no_winner() -> None:
    rng = np.random.default_rng(8)
    x = _arms(rng, (-0.05, -0.08, -0.1, -0.12), trials=1, rounds=60)[0]
    rec = successive_elimination({f"a{i}": x[i] for i in range(4)}, min_gain=0.005, min_rounds=3)
    assert rec.outcome == "no-winner" and rec.winner is None
    assert all(a.reason == "below-min" for a in rec.arms)
    _, lower, upper = cs_bounds(x[None], confidence=1 - ALPHA / 4)
    _, why, _, _ = eliminate(lower, upper, threshold_log=THRESHOLD, min_rounds=3)
    assert (why == BELOW_MIN).all()


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no arms"):
        successive_elimination({}, min_gain=0.005)


def _bayes_factor(x: np.ndarray, mu0: float, g: float) -> float:
    """Lai's t-mixture martingale M_n(mu0), written from its definition (not from radius_factor)."""
    n = x.size
    t2 = n * (x.mean() - mu0) ** 2 / x.var(ddof=1)
    a = 1 + n * g
    return a ** -0.5 * ((1 + t2 / (n - 1)) / (1 + t2 / ((n - 1) * a))) ** (n / 2)


@pytest.mark.parametrize("n", [5, 8, 16, 40])
def test_bounds_are_where_the_mixture_martingale_reaches_one_over_alpha(n: int) -> None:
    x = np.random.default_rng(n).normal(0.02, 0.03, n)
    _, lower, upper = cs_bounds(x, confidence=1 - ALPHA)
    for edge in (lower[-1], upper[-1]):
        assert _bayes_factor(x, edge, 1.0) == pytest.approx(1 / ALPHA, rel=1e-9)
    assert _bayes_factor(x, x.mean(), 1.0) < 1 / ALPHA
    assert _bayes_factor(x, upper[-1] + 1e-3, 1.0) > 1 / ALPHA


def test_unbounded_until_enough_rounds_then_shrinking() -> None:
    f = radius_factor(np.arange(1, 61), confidence=0.95, mixture_g=1.0)
    assert np.isinf(f[:4]).all() and np.isfinite(f[4:]).all()  # g = 1, alpha = 0.05: bounded from 5 rounds
    assert (np.diff(f[4:]) < 0).all()
    # wider than the fixed-n t interval (the price of validity at every look), narrower than 2x at 16 rounds
    t16 = sps.t.ppf(0.975, 15) / 4
    assert t16 < f[15] < 2 * t16
