"""The checks of the sequence's assumptions, after every round: dependence, skew and drift of the rounds.

The confidence sequence (sglab/analysis/sequential.py) is exact for independent, Gaussian rounds. Real
servers on two nodes give neither: each node drifts on its own (thermals, neighbours), so consecutive rounds
are correlated and a run of them says less than it seems; a candidate that stalls now and then makes the
rounds skewed to the left, so a few rounds without a stall look better than the mean; and a candidate whose
gain fades makes the early rounds overstate it. benchmarks/decision_quality.py measures each (docs/verdict.md).
What the checks do, per look, from the rounds so far:

- dependence: the lag-1 autocorrelation of the rounds about their mean, bias-corrected for few rounds
  (Marriott & Pope 1954: E[r1] ~ rho - (1 + 3 rho) / n, so rho ~ (n r1 + 1) / (n - 3)), widens the sequence by
  the long-run variance of an AR(1) series, sqrt((1 + rho) / (1 - rho)) (rho clipped to [0, 0.9]); above
  DEPENDENT (from 6 rounds), when the lag-1 autocorrelation is also significant (one-sided 1%: i.i.d. rounds
  are taken for dependent ones at 0.2-0.7% of final looks), the rounds are too dependent to promote on at all.
- skew: a sample skewness below -1 null sd (sqrt(6 / n)) moves the lower bound down by Johnson's (1978)
  skewness term of the t statistic, gamma (1 + 2 b^2) / (6 sqrt(n)) in units of sd / sqrt(n).
- drift: a least-squares slope of the rounds over their index with t < -3 (from 6 rounds) holds a promotion:
  the gain is clearly falling while it is measured.
- and no promotion before the checks' floor (10 rounds, STANDARD; 20, STRICT), the fewest from which these checks can
  see anything
  (before it, a dependent or skewed run of rounds looks like a clear gain: the measured table).

The floor and the dependence hold are one `Checks` value, chosen by policy.checks (CHECKS, by name):
STANDARD promotes from round 10; STRICT (promotion from 20 rounds, dependence refused at 5% significance)
also keeps AR(0.8) rounds at <= 2% false promotions, at the price of every early stop (docs/verdict.md (f)
measures both; stacks/Pulumi.production.yaml gates with STRICT).

Every statistic is computed for all looks at once (last axis = rounds, leading axes = independent runs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PROMOTE_MIN_ROUNDS = 10
CHECK_MIN_ROUNDS = 6
DEPENDENT = 0.4
DEPENDENT_Z = 2.33  # and the lag-1 autocorrelation significant at one-sided 1%: (r1 + 1/n) sqrt(n) > z
RHO_CAP = 0.9
SKEW_NULL_SDS = 1.0
FALLING_T = -3.0

HELD_NONE, HELD_ROUNDS, HELD_DEPENDENT, HELD_FALLING = 0, 1, 2, 3
HELD_NAMES = {HELD_ROUNDS: "rounds", HELD_DEPENDENT: "dependence", HELD_FALLING: "drift"}


@dataclass(frozen=True)
class RoundStats:
    """Running statistics after each round (arrays shaped like the input)."""

    n: np.ndarray
    mean: np.ndarray
    sd: np.ndarray  # ddof 1
    rho: np.ndarray  # bias-corrected lag-1 autocorrelation (0 below 4 rounds)
    r1: np.ndarray  # the plain lag-1 autocorrelation about the running mean
    skew: np.ndarray  # adjusted sample skewness G1 (0 below 3 rounds)
    slope: np.ndarray  # least-squares slope per round (0 below 3 rounds)
    slope_t: np.ndarray  # its t statistic (0 below 4 rounds)

    @property
    def widen(self) -> np.ndarray:
        """sqrt of the AR(1) long-run variance factor: how much wider dependence makes the sequence."""
        rho = np.clip(self.rho, 0.0, RHO_CAP)
        return np.sqrt((1.0 + rho) / (1.0 - rho))

    def skew_excess(self) -> np.ndarray:
        """The part of a negative skew beyond SKEW_NULL_SDS of its null sd (<= 0; 0 when not significant)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            null_sd = np.sqrt(6.0 / np.maximum(self.n, 1.0))
        return np.minimum(self.skew + SKEW_NULL_SDS * null_sd, 0.0)


@dataclass(frozen=True)
class Checks:
    """When a promotion must wait, whatever the bounds say; `name` is its policy.checks value."""

    name: str = "standard"
    promote_min_rounds: int = PROMOTE_MIN_ROUNDS
    dependent: float = DEPENDENT
    dependent_z: float = DEPENDENT_Z

    def held(self, stats: RoundStats) -> np.ndarray:
        """Why a promotion must wait at each look (HELD_*)."""
        n = stats.n
        checked = n >= CHECK_MIN_ROUNDS
        dependent = (stats.rho > self.dependent) & ((stats.r1 + 1.0 / n) * np.sqrt(n) > self.dependent_z)
        return np.where(n < self.promote_min_rounds, HELD_ROUNDS,
                        np.where(checked & dependent, HELD_DEPENDENT,
                                 np.where(checked & (stats.slope_t < FALLING_T), HELD_FALLING, HELD_NONE)))


STANDARD = Checks()
STRICT = Checks("strict", promote_min_rounds=20, dependent_z=1.645)
CHECKS = {c.name: c for c in (STANDARD, STRICT)}


def checks_named(checks: "Checks | str") -> Checks:
    """The Checks a policy.checks value (or a recorded one) names; ValueError for an unknown name."""
    if isinstance(checks, Checks):
        return checks
    if checks not in CHECKS:
        raise ValueError(f"unknown checks {checks!r} (use {' or '.join(map(repr, CHECKS))})")
    return CHECKS[checks]


def round_stats(values: np.ndarray) -> RoundStats:
    x = np.asarray(values, dtype=float)
    n = np.arange(1, x.shape[-1] + 1, dtype=float)
    y = x - x[..., :1]  # sums about the first round keep the running moments free of cancellation
    s1, s2, s3 = np.cumsum(y, -1), np.cumsum(y * y, -1), np.cumsum(y ** 3, -1)
    m = s1 / n
    ss = np.maximum(s2 - n * m * m, 0.0)  # sum of squares about the running mean
    sd = np.sqrt(ss / np.maximum(n - 1.0, 1.0))
    lag = np.concatenate([np.zeros(y.shape[:-1] + (1,)), np.cumsum(y[..., 1:] * y[..., :-1], -1)], -1)
    # sum_{r<n} (y_r - m)(y_{r+1} - m), with sum_{r<n} y_r = s1 - y_n and sum_{1<r<=n} y_r = s1 (y_1 = 0)
    cross = lag - m * ((s1 - y) + s1) + (n - 1.0) * m * m
    index = np.arange(x.shape[-1], dtype=float)
    sxx = n * (n * n - 1.0) / 12.0
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = np.where((n >= 4) & (ss > 0), cross / ss, 0.0)
        rho = np.clip(np.where(n >= 4, (n * r1 + 1.0) / (n - 3.0), 0.0), -1.0, 1.0)
        c2, c3 = ss / n, s3 / n - 3.0 * m * s2 / n + 2.0 * m ** 3
        g1 = np.where((n >= 3) & (c2 > 0), c3 / c2 ** 1.5 * np.sqrt(n * (n - 1.0)) / (n - 2.0), 0.0)
        slope = np.where(n >= 3, (np.cumsum(y * index, -1) - (n - 1.0) / 2.0 * s1) / sxx, 0.0)
        resid = np.maximum(ss - slope * slope * sxx, 0.0) / (n - 2.0)
        slope_t = np.where((n >= 4) & (resid > 0), slope / np.sqrt(resid / sxx), 0.0)
    return RoundStats(n=np.broadcast_to(n, x.shape), mean=m + x[..., :1], sd=sd, rho=np.nan_to_num(rho),
                      r1=np.nan_to_num(r1),
                      skew=np.nan_to_num(g1), slope=np.nan_to_num(slope), slope_t=np.nan_to_num(slope_t))


def held_sentence(code: int, stats: RoundStats, index: int = -1, checks: Checks = STANDARD) -> str | None:
    """Why a promotion waits, in words (None when nothing holds it), at one look of a single run."""
    n = int(stats.n[index])
    if code == HELD_ROUNDS:
        return (f"no promotion before {checks.promote_min_rounds} rounds ({n} so far; {checks.name} checks): fewer "
                "cannot show whether the rounds are independent")
    if code == HELD_DEPENDENT:
        return (f"the rounds are strongly dependent (lag-1 autocorrelation {float(stats.rho[index]):+.2f} over {n} "
                f"rounds, above {checks.dependent:+.2f}): a node drifting on its own makes a run of rounds say far "
                "less than it seems, so the sequence cannot promote on them")
    if code == HELD_FALLING:
        return (f"the gain falls while it is measured ({float(np.expm1(stats.slope[index])) * 100:+.2f} points "
                f"per round, t = {float(stats.slope_t[index]):.1f}): the early rounds overstate it")
    return None


def widen_sentence(stats: RoundStats, index: int = -1) -> str | None:
    """What the checks did to the bounds at one look, in words (None when nothing)."""
    parts = []
    factor = float(stats.widen[index])
    if factor > 1.0005:
        parts.append(f"widened x{factor:.2f} for dependent rounds (lag-1 autocorrelation "
                     f"{float(stats.rho[index]):+.2f})")
    if float(stats.skew_excess()[index]) < 0:
        parts.append(f"its lower bound moved down for left skew (skewness {float(stats.skew[index]):+.2f}: "
                     "rounds where the candidate stalls)")
    return "; ".join(parts) or None
