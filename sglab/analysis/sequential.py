"""Anytime-valid decisions on the paired per-round log-ratio: a confidence sequence you may watch.

A fixed-n t interval recomputed after every round and acted on when it first clears the line promotes far
more often than its nominal rate (benchmarks/decision_quality.py measures it). The bench's interval is a
*confidence sequence*: with probability >= confidence it covers the true mean at every round at once, so a
run may stop at the first look that clears the threshold, and a later run of the same pair may extend the
same sequence (sglab/analysis/accumulate.py), without raising the error rate.

The rule (`sequential_test`, vectorised in `look_codes`), docs/verdict.md "The rule" with its measurements:

- bounds: mean +- b_n sd / sqrt(n), b_n from a mixture of Wald/Rushton sequential-t likelihood ratios
  ("The boundary" below): exact at every look for i.i.d. Gaussian rounds of any spread;
- checks of that assumption ("The checks" below), which only ever widen or hold: dependent rounds
  widen both bounds by the AR(1) long-run variance and, strongly dependent, refuse a promotion; left skew
  lowers the lower bound; a falling gain holds a promotion; no promotion before the checks' floor (policy.checks:
  standard from 10 rounds, strict from 20 and a stricter dependence hold).

This is the one sequence sglab decides and draws on: the verdict, the bench's stop, the web UI's live band,
the canary judge, `sglab watch` and the sweep's race all read `bounds` or `sequential_test`, so what is drawn
is what decides. Lai's i.i.d. t-mixture sequence is kept in benchmarks/retired_rules.py, to compare against.

`rounds_to_decide` says how many more rounds would likely decide an inconclusive comparison (the verdict's
"about N more rounds").

The boundary: how many sample sds the mean must clear after n rounds.

The statistic is the one-sample t of the per-round log-ratios at a trial mean mu0, T_n(mu0). For rounds that
are i.i.d. N(mu, sigma^2), the likelihood ratio of T_n under mu = mu0 + delta * sigma against mu = mu0 is the
ratio of the noncentral-t density (noncentrality delta * sqrt(n), n - 1 degrees of freedom) to the central
one: it depends on the data only through T_n, whatever sigma is, and is a nonnegative martingale with mean 1
under mu = mu0 (Wald's sequential t-test in Rushton's 1950 form; the scale-invariance argument of Lai 1976
and of Perez-Ortiz, Lardy, de Heide & Grunwald 2024). Any average of such martingales over a prior on delta
is one too, so by Ville's inequality P(exists n: M_n(mu0) >= 1/a) <= a, and the bound

    lower_n = mean_n - b_n * sd_n / sqrt(n),  b_n = the T at which M_n reaches 2 / alpha,

holds at every round at once with probability >= 1 - alpha / 2 (the upper bound mirrors it: together a
1 - alpha confidence sequence, valid however often it is looked at and across runs that extend it).

The prior: 63% of its mass at delta = 0.5 and 27% at 1.6 (per-round effects of a third and of one-and-a-half
spreads above the line, the speculative gains of interest: +3% and +5.9% at a 2.9% spread), and 10% on Lai's
N(0, 1) mixture (closed form) so that the bound still shrinks to zero with many rounds (a point prior alone
would stop at delta / 2 spreads). benchmarks/decision_quality.py measures the choice against Lai's mixture
alone (docs/verdict.md, "The rule").

The checks of the sequence's assumptions, after every round: dependence, skew and drift of the rounds. The
confidence sequence is exact for independent, Gaussian rounds. Real servers on two nodes give neither: each node
drifts on its own (thermals, neighbours), so consecutive rounds are correlated and a run of them says less than
it seems; a candidate that stalls now and then makes the rounds skewed to the left, so a few rounds without a
stall look better than the mean; and a candidate whose gain fades makes the early rounds overstate it.
benchmarks/decision_quality.py measures each (docs/verdict.md). What the checks do, per look, from the rounds so
far:

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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
import numpy as np
from scipy import special
from scipy import stats as scipy_stats

from sglab.schema.result import Decision, Look, SequentialRecord


# The boundary of the sequence (see the module docstring): b_n for every n, by bisection.

POINTS = ((0.5, 0.63), (1.6, 0.27))  # (delta, weight) of the prior's point masses
LAI_WEIGHT = 0.10
LAI_G = 1.0
_T_MAX = 1e4  # beyond this T the bound counts as unbounded
_ITERATIONS = 60


def _lai_log_m(t: np.ndarray, n: np.ndarray) -> np.ndarray:
    nu = n - 1.0
    a = 1.0 + n * LAI_G
    return -0.5 * np.log(a) + 0.5 * n * (np.log1p(t * t / nu) - np.log1p(t * t / (nu * a)))


_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(48)


def log_point_lr(t: np.ndarray, n: np.ndarray, delta: float) -> np.ndarray:
    """log of the noncentral-t / central-t density ratio (noncentrality delta sqrt(n)) at `t`.

    With S = sqrt(n) t / sqrt(n - 1 + t^2) it is -n delta^2 / 2 + log I(delta S) - log I(0), where
    I(a) = integral over r > 0 of r^(n-1) exp(-r^2 / 2 + a r) (the scale integral of the invariant's density);
    I(a) by Gauss-Hermite about its mode (the integrand is near-Gaussian in r), I(0) in closed form. Matches
    scipy.stats.nct to 1e-6 from 5 rounds on and, unlike it, stays finite for thousands of rounds."""
    t, n = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(n, dtype=float))
    tt, nn = t[..., None], n[..., None]
    a = delta * np.sqrt(nn) * tt / np.sqrt(nn - 1.0 + tt * tt)
    mode = (a + np.sqrt(a * a + 4.0 * (nn - 1.0))) / 2.0
    width = 1.0 / np.sqrt((nn - 1.0) / (mode * mode) + 1.0)
    r = mode + width * _NODES
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(r > 0, (nn - 1.0) * np.log(np.where(r > 0, r, 1.0)) - r * r / 2.0 + a * r, -np.inf)
        peak = (nn - 1.0) * np.log(mode) - mode * mode / 2.0 + a * mode
        log_i = (peak[..., 0] + np.log(width[..., 0])
                 + np.log(np.sum(_WEIGHTS * np.exp(f - peak + _NODES * _NODES / 2.0), axis=-1)))
    log_i0 = (n / 2.0 - 1.0) * math.log(2.0) + special.gammaln(n / 2.0)
    return -n * delta * delta / 2.0 + log_i - log_i0


def log_mixture(t: np.ndarray, n: np.ndarray) -> np.ndarray:
    """log M_n at one-sample t statistic `t` after `n` rounds (arrays broadcast; n >= 2)."""
    t = np.asarray(t, dtype=float)
    n = np.asarray(n, dtype=float)
    terms = [math.log(w) + log_point_lr(t, n, d) for d, w in POINTS]
    terms.append(math.log(LAI_WEIGHT) + _lai_log_m(t, n))
    return np.logaddexp.reduce(np.stack(np.broadcast_arrays(*terms)), axis=0)


@lru_cache(maxsize=64)
def _boundary(alpha_side: float, n_max: int) -> np.ndarray:
    n = np.arange(2, n_max + 1, dtype=float)
    level = math.log(1.0 / alpha_side)
    with np.errstate(all="ignore"):
        reach = log_mixture(np.full(n.shape, _T_MAX), n) >= level
        lo, hi = np.zeros(n.shape), np.full(n.shape, _T_MAX)
        for _ in range(_ITERATIONS):  # M_n grows with T > 0: bisect every n at once
            mid = np.where(lo > 0, np.sqrt(lo * hi), hi / 2.0)
            above = log_mixture(mid, n) >= level
            hi = np.where(above, mid, hi)
            lo = np.where(above, lo, mid)
    out = np.full(n_max, np.inf)
    out[1:] = np.where(reach, hi, np.inf)
    return out


def boundary_t(rounds: int, *, confidence: float = 0.95) -> np.ndarray:
    """b_1..b_rounds: the t a one-sided bound needs after n rounds (index n - 1); inf where no t suffices."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    size = 32
    while size < rounds:
        size *= 2
    return _boundary(round((1.0 - confidence) / 2.0, 12), size)[:rounds]


def radius_factor(rounds: np.ndarray | int, *, confidence: float = 0.95) -> np.ndarray:
    """Half-width in sample sds (ddof 1) after `rounds` rounds, b_n / sqrt(n); inf where unbounded."""
    n = np.asarray(rounds, dtype=int)
    top = int(n.max()) if n.size else 1
    b = boundary_t(max(top, 2), confidence=confidence)
    safe = np.clip(n, 1, None)
    return np.where(n >= 2, b[safe - 1] / np.sqrt(safe), np.inf)


# The checks of the sequence's assumptions (see the module docstring).

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


# The rule.

# A look's Decision (sglab.schema.result, beside the records of the looks): promote: the lower bound clears
# log(1 + min-gain) and no check holds it; reject: the upper bound is below it (short of the minimum with
# confidence: cannot promote); futile (only with `futility` and max-rounds, from FUTILITY_MIN_ROUNDS on): even a
# true gain at the current upper bound would leave the lower bound at max-rounds (same spread) short of the
# minimum, and a reject is not within reach either; continue: none yet; inconclusive: none by max-rounds.
# Stopping early without promoting never raises the false-promotion rate.
PROMOTE, REJECT, FUTILE, NONE = 1, -1, -2, 0
_NAMES: dict[int, Decision] = {PROMOTE: "promote", REJECT: "reject", FUTILE: "futile"}

METHOD = "robust-t-sequence"
FUTILITY_MIN_ROUNDS = 12  # a loser's estimate is still too noisy before this to give up on its reject
REACH_SES = 1.0  # a reject counts as within reach unless an estimate this many standard errors lower misses it


def _finite_rounds(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim == 0:
        raise ValueError("values must be a sequence of per-round log-ratios")
    if not np.isfinite(x).all():
        raise ValueError("per-round log-ratios must be finite (a round with a zero or missing rate?)")
    return x


def _spread(sd: np.ndarray, factor: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(factor), np.inf, factor * sd)  # inf * 0 (a zero-spread run) stays unbounded


def bounds(values: np.ndarray, *, confidence: float = 0.95) -> tuple[RoundStats, np.ndarray, np.ndarray]:
    """The bench's (statistics, lower, upper) after each round along the last axis, checks applied."""
    x = _finite_rounds(values)
    stats = round_stats(x)
    b = boundary_t(x.shape[-1], confidence=confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        root_n = np.sqrt(stats.n)
        spread = stats.sd * stats.widen / root_n  # sd of the mean, dependence included
        lower_b = np.where(np.isinf(b), np.inf, b - stats.skew_excess() * (1.0 + 2.0 * b * b) / (6.0 * root_n))
    return stats, stats.mean - _spread(spread, lower_b), stats.mean + _spread(spread, np.broadcast_to(b, x.shape))


def look_codes(values: np.ndarray, *, threshold_log: float, confidence: float = 0.95, min_rounds: int = 2,
               max_rounds: int | np.ndarray | None = None, futility: bool = False, method: str = METHOD,
               checks: Checks = STANDARD) -> tuple[RoundStats, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(stats, lower, upper, code, held) after each round: code PROMOTE, REJECT, FUTILE or NONE; held the check
    (HELD_*) that keeps a lower bound above the threshold from promoting. `max_rounds` may differ
    per sequence (an array over the leading axes: continued sequences whose runs end at different rounds).
    `checks`: the holds (STANDARD or STRICT, as policy.checks names them)."""
    if method != METHOD:
        raise ValueError(f"unknown sequence method {method!r} (the one sequence is {METHOD!r})")
    stats, lower, upper = bounds(values, confidence=confidence)
    held = np.where(lower > threshold_log, checks_named(checks).held(stats), HELD_NONE)
    n = stats.n
    allowed = n >= min_rounds
    code = np.where(allowed & (lower > threshold_log) & (held == HELD_NONE), PROMOTE,
                    np.where(allowed & (upper < threshold_log), REJECT, NONE))
    if futility and max_rounds is not None:
        limit = np.asarray(max_rounds)[..., None] if np.ndim(max_rounds) else max_rounds
        at_max = radius_factor(np.maximum(limit, 2), confidence=confidence)
        widen = stats.widen
        with np.errstate(invalid="ignore"):
            hopeless = (allowed & (n >= FUTILITY_MIN_ROUNDS) & (n < limit)
                        & (upper < threshold_log + at_max * stats.sd * widen))
            # a loser is not given up on: at its estimate and spread it would be rejected by max-rounds were the
            # rounds as independent as they may be (a noisy autocorrelation must not turn a reject into "futile")
            reject_in_reach = stats.mean - REACH_SES * stats.sd / np.sqrt(n) + at_max * stats.sd < threshold_log
        code = np.where((code == NONE) & hopeless & ~reject_in_reach, FUTILE, code)
    return stats, lower, upper, code, held


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def sequential_test(log_ratios: Sequence[float] | np.ndarray, *, min_gain: float, confidence: float = 0.95,
                    min_rounds: int = 2, max_rounds: int | None = None, futility: bool = False,
                    earlier_rounds: int = 0, method: str = METHOD, checks: Checks | str = STANDARD
                    ) -> SequentialRecord:
    """Look after every round of `log_ratios` (log(candidate / baseline) per paired round) and stop at the
    first decision; fewer rounds than needed end `continue`. A pure function of its arguments.

    `earlier_rounds`: the first rounds are earlier runs' of the same sequence (sglab/analysis/accumulate.py);
    they were looked at then, so decisions start after them, and `max_rounds` counts this run's rounds only.
    Rounds beyond the limit are ignored. Recomputing from all rounds at each call is cheap (n <= a few
    hundred), so a caller can simply call this again after each new round. `checks`:
    the floor and holds (policy.checks: a name of CHECKS, or a Checks)."""
    checks = checks_named(checks)
    x = np.asarray(log_ratios, dtype=float).ravel()
    if earlier_rounds < 0:
        raise ValueError(f"earlier_rounds must be >= 0, got {earlier_rounds}")
    limit = None
    if max_rounds is not None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        limit = earlier_rounds + max_rounds
        x = x[:limit]
    threshold = math.log1p(min_gain)
    looks: list[Look] = []
    decision: Decision = "continue"
    notes: list[str] = []
    if x.size:
        stats, lower, upper, code, held = look_codes(x, threshold_log=threshold, confidence=confidence,
                                                     min_rounds=min_rounds, max_rounds=limit, futility=futility,
                                                     method=method, checks=checks)
        for i in range(x.size):
            decision = _NAMES.get(int(code[i]), "continue") if i >= earlier_rounds else "continue"
            if decision == "continue" and limit is not None and i + 1 >= limit:
                decision = "inconclusive"
            lo, hi = _finite(float(lower[i])), _finite(float(upper[i]))
            looks.append(Look(round_index=i, rounds=i + 1, mean_log=float(stats.mean[i]), lower_log=lo,
                              upper_log=hi, estimate=math.expm1(float(stats.mean[i])),
                              low=None if lo is None else math.expm1(lo), high=None if hi is None else math.expm1(hi),
                              decision=decision, held=HELD_NAMES.get(int(held[i])),
                              autocorrelation=float(stats.rho[i]), widen=float(stats.widen[i]),
                              skewness=float(stats.skew[i]), trend_t=float(stats.slope_t[i])))
            if decision != "continue":
                break
        last = len(looks) - 1
        notes = [s for s in (held_sentence(int(held[last]), stats, last, checks),
                             widen_sentence(stats, last)) if s]
    return SequentialRecord(method=method,
                            confidence=confidence, min_gain=min_gain, threshold_log=threshold,
                            min_rounds=min_rounds, max_rounds=max_rounds, futility=futility, checks=checks.name,
                            decision=decision,
                            rounds=len(looks), looks=looks, earlier_rounds=earlier_rounds, notes=notes)


def first_decision(values: np.ndarray, *, threshold_log: float, confidence: float = 0.95, min_rounds: int = 2,
                   max_rounds: int | None = None, futility: bool = False, checks: Checks = STANDARD
                   ) -> tuple[np.ndarray, np.ndarray]:
    """For many sequences at once (trials x rounds): the round count at the first decision (0 = none by
    the last round) and its code (PROMOTE, REJECT, FUTILE; NONE). For benchmarks and tests."""
    *_, code, _ = look_codes(values, threshold_log=threshold_log, confidence=confidence, min_rounds=min_rounds,
                             max_rounds=max_rounds, futility=futility, checks=checks)
    hit = code != NONE
    any_hit = hit.any(axis=-1)
    first = np.where(any_hit, hit.argmax(axis=-1), 0)
    picked = np.take_along_axis(code, first[..., None], axis=-1)[..., 0]
    return np.where(any_hit, first + 1, 0), np.where(any_hit, picked, NONE)


def method_phrase(method: str) -> str:
    """How a verdict's intervals were computed, for its table and report (`paired-t interval` as before)."""
    if method == "sequential":
        return "sequential: anytime-valid confidence sequence at the gated levels, paired-t at the others"
    return f"{method} interval"


def method_sentence(method: str, confidence: float) -> str:
    """The same for the report's prose: `paired-t 95% interval over paired rounds` as before."""
    if method == "sequential":
        return (f"{confidence:.0%} anytime-valid confidence sequence over paired rounds at the gated levels (a "
                "sequential run stops there at its decision; its checks widen it for dependent or skewed rounds), "
                "paired-t over the fixed rounds of the others")
    return f"{method} {confidence:.0%} interval over paired rounds"


# How many more rounds would likely decide an inconclusive comparison. Assumes the per-round spread stays what it
# was and the true gain is the measured one; then finds the smallest round count at which the interval would clear
# (or miss) the threshold with 80% probability: (t_{n-1} + z_0.8) * sd / sqrt(n) <= |mean - threshold|, all in
# log-ratio units. Under the sequential method the interval is the confidence sequence, wider than t at every n:
# (radius(n) + z_0.8 / sqrt(n)) * sd <= |mean - threshold|, and a promotion needs at least the floor of the
# sequence's checks (policy.checks, `Checks` above).

ASSURANCE = 0.8
MAX_ROUNDS = 200


def rounds_to_decide(*, mean_log: float, sd_log: float, threshold_log: float, rounds_now: int,
                     confidence: float = 0.95, assurance: float = ASSURANCE,
                     max_rounds: int = MAX_ROUNDS, method: str = "paired-t", checks: Checks | str = STANDARD
                     ) -> int | None:
    """Extra rounds needed (>= 1), or None when even `max_rounds` in total would likely not decide."""
    distance = abs(mean_log - threshold_log)
    if distance == 0.0:
        return None
    if sd_log == 0.0:
        return 1 if rounds_now < 2 else None
    z = scipy_stats.norm.ppf(assurance)
    tail = (1 + confidence) / 2
    first = max(rounds_now + 1, 2)
    if method == "sequential" and mean_log > threshold_log:
        first = max(first, checks_named(checks).promote_min_rounds)
    for total in range(first, max_rounds + 1):
        if method == "sequential":
            half_width = (float(radius_factor(total, confidence=confidence)) + z / math.sqrt(total)) * sd_log
        else:
            half_width = (scipy_stats.t.ppf(tail, total - 1) + z) * sd_log / math.sqrt(total)
        if half_width <= distance:
            return total - rounds_now
    return None
