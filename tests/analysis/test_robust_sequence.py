"""The bench's sequence keeps its promise on rounds that are not i.i.d. Gaussian, and its defects."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sglab.analysis.sequential import (FUTILE, PROMOTE, REJECT, STANDARD, STRICT, first_decision, round_stats,
                                       sequential_test)
from sglab.analysis.samples import mean_ci

SD = 0.029  # per-round spread of the log-ratio measured on the simulator (docs/verdict.md)
THRESHOLD = math.log1p(0.005)
TRIALS = 4000  # sd of a 2% rate over 4000 runs: 0.22%


def _ar1(rng: np.random.Generator, rho: float, shape: tuple[int, int]) -> np.ndarray:
    z = rng.normal(0.0, SD, shape)
    out = np.empty(shape)
    out[:, 0] = z[:, 0]
    for r in range(1, shape[1]):
        out[:, r] = rho * out[:, r - 1] + math.sqrt(1 - rho * rho) * z[:, r]
    return out


def _promoted(x: np.ndarray) -> float:
    _, code = first_decision(x, threshold_log=THRESHOLD, min_rounds=3, max_rounds=32, futility=True)
    return float((code == PROMOTE).mean())


def test_dependent_rounds_of_identical_arms_rarely_promote() -> None:
    """AR(1) rounds at rho 0.5 (each node drifting on its own): the i.i.d. sequence promoted 5.7% of them."""
    assert _promoted(_ar1(np.random.default_rng(1), 0.5, (TRIALS, 32))) <= 0.025


def test_left_skewed_rounds_of_identical_arms_rarely_promote() -> None:
    """Skewness -2 (a centred, reflected exponential: rounds where the candidate stalls): was 4.0%."""
    e = np.random.default_rng(2).exponential(1.0, (TRIALS, 32))
    assert _promoted(SD * (1.0 - e)) <= 0.025


def test_a_fading_gain_of_mean_zero_rarely_promotes() -> None:
    """+1.5% falling to -1.5% over the 32 rounds (mean 0): was 2.9%."""
    drift = 0.015 - 0.03 * np.arange(32) / 31
    assert _promoted(drift + np.random.default_rng(3).normal(0.0, SD, (TRIALS, 32))) <= 0.02


def test_a_clear_loser_is_rejected_not_given_up_as_futile() -> None:
    """At -3% (sd 2.9%), futility ended 3.1% of the runs `futile` (an inconclusive verdict) instead of reject."""
    x = math.log1p(-0.03) + np.random.default_rng(4).normal(0.0, SD, (TRIALS, 32))
    _, code = first_decision(x, threshold_log=THRESHOLD, min_rounds=3, max_rounds=32, futility=True)
    assert float((code == FUTILE).mean()) <= 0.005
    assert float((code == REJECT).mean()) >= 0.99


def test_a_zero_spread_run_gets_no_bounds_where_the_sequence_has_none() -> None:
    """Three identical rounds: the sequence is unbounded at 3 rounds, so no interval (it was [+2%, +2%], a win)."""
    ci = mean_ci(np.array([0.02, 0.02, 0.02]), method="sequential")
    assert ci.low is None and ci.high is None
    assert sequential_test([0.02] * 3, min_gain=0.005).decision == "continue"


def _mixture_from_its_definition(t: float, n: int) -> float:
    """M_n(T) written out with scipy's noncentral t and Lai's closed form (not from sglab.analysis.sequential)."""
    from scipy import stats

    from sglab.analysis.sequential import LAI_G, LAI_WEIGHT, POINTS

    points = sum(w * stats.nct.pdf(t, n - 1, d * math.sqrt(n)) / stats.t.pdf(t, n - 1) for d, w in POINTS)
    a = 1 + n * LAI_G
    lai = a ** -0.5 * ((1 + t * t / (n - 1)) / (1 + t * t / ((n - 1) * a))) ** (n / 2)
    return points + LAI_WEIGHT * lai


@pytest.mark.parametrize("n", [6, 9, 16, 40])
def test_the_bound_is_where_the_mixture_martingale_reaches_two_over_alpha(n: int) -> None:
    from sglab.analysis.sequential import boundary_t

    b = float(boundary_t(n, confidence=0.95)[-1])
    assert _mixture_from_its_definition(b, n) == pytest.approx(2 / 0.05, rel=1e-5)
    assert _mixture_from_its_definition(0.9 * b, n) < 2 / 0.05


@pytest.mark.parametrize("sigma", [0.003, 0.03, 3.0])
def test_the_sequence_covers_iid_rounds_at_every_look(sigma: float) -> None:
    """Valid at every look at once, whatever the spread (looks from the first bounded round to 60)."""
    from sglab.analysis.sequential import bounds

    truth = 0.01
    x = np.random.default_rng(int(sigma * 1000) + 5).normal(truth, sigma, (4000, 60))
    _, lower, upper = bounds(x, confidence=0.95)
    assert float(((lower > truth) | (upper < truth)).any(axis=1).mean()) <= 0.05 + 0.01


def test_the_checks_only_widen() -> None:
    """Every check moves a bound outwards or holds a promotion; none ever narrows the i.i.d. bounds."""
    from sglab.analysis.sequential import bounds, radius_factor

    rng = np.random.default_rng(6)
    x = np.concatenate([_ar1(rng, 0.6, (200, 32)), SD * (1 - rng.exponential(1.0, (200, 32)))])
    stats, lower, upper = bounds(x)
    plain = radius_factor(np.arange(1, 33)) * stats.sd
    with np.errstate(invalid="ignore"):
        assert (lower[:, 2:] <= stats.mean[:, 2:] - plain[:, 2:] + 1e-15).all()
        assert (upper[:, 2:] >= stats.mean[:, 2:] + plain[:, 2:] - 1e-15).all()


def test_a_held_promotion_says_why() -> None:
    rng = np.random.default_rng(8)
    wobble = 0.1 + 0.01 * np.sin(np.arange(20) / 4) + rng.normal(0, 0.001, 20)  # each round like the one before
    rec = sequential_test(wobble, min_gain=0.005, max_rounds=20)
    held = [lk for lk in rec.looks if lk.held == "dependence"]
    assert held and rec.decision != "promote"
    assert any("strongly dependent" in n for n in rec.notes)
    # +7% falling to +3.5% over 24 rounds under 0.8% noise: a clear slope before the autocorrelation is significant
    falling = np.linspace(0.07, 0.035, 24) + np.random.default_rng(32).normal(0, 0.008, 24)
    assert any(lk.held == "drift" for lk in sequential_test(falling, min_gain=0.005, max_rounds=24).looks)


def test_the_strict_checks_hold_a_promotion_the_shipped_ones_allow() -> None:
    """sequential.STRICT (the design that meets AR(0.8), docs/verdict.md (f)) promotes from round 20 and refuses
    dependence on weaker evidence; the shipped checks promote this run at round 10."""
    clear = np.tile([0.05, 0.051, 0.049, 0.05, 0.0505, 0.0502, 0.0499, 0.05, 0.0501, 0.0498], 3)[None, :]
    rounds, code = first_decision(clear, threshold_log=math.log1p(0.005), checks=STANDARD)
    assert (int(rounds[0]), int(code[0])) == (10, PROMOTE)
    rounds, code = first_decision(clear, threshold_log=math.log1p(0.005), checks=STRICT)
    assert (int(rounds[0]), int(code[0])) == (STRICT.promote_min_rounds, PROMOTE) and STRICT.promote_min_rounds == 20
    # a lag-1 autocorrelation significant at 5% but not at 1% holds under STRICT only
    noise = np.random.default_rng(5).normal(0.0, 0.01, 20)
    x = np.empty(20)
    x[0] = noise[0]
    for r in range(1, 20):
        x[r] = 0.5 * x[r - 1] + noise[r]  # AR(1) rounds
    st = round_stats(x)
    z = (st.r1[-1] + 1 / 20) * math.sqrt(20)
    assert 1.645 < z < 2.33 and st.rho[-1] > 0.4
    assert STANDARD.held(st)[-1] == 0 and STRICT.held(st)[-1] == 2
