"""Confidence intervals for a candidate/baseline ratio, paired by round.

Each round gives one log-ratio log(candidate / baseline); the rounds are the independent units.
`paired-t` is a one-sample t interval on those log-ratios (scipy.stats.ttest_1samp): honest with
the handful of rounds a benchmark affords. `bootstrap` resamples the rounds (scipy.stats.bootstrap,
BCa); with few rounds it is too narrow, which benchmarks/decision_quality.py measures.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

CiMethod = Literal["paired-t", "bootstrap", "sequential"]  # sequential: the confidence sequence


@dataclass(frozen=True)
class MeanCI:
    """Mean of per-round values with its interval (None below two rounds)."""

    n: int
    mean: float
    sd: float
    low: float | None
    high: float | None
    confidence: float
    method: CiMethod
    held: str | None = None  # sequential: the check that keeps a clearing lower bound from promoting
    notes: tuple[str, ...] = ()  # sequential: what the checks did, in words

    def as_gain(self) -> tuple[float, float | None, float | None]:
        """For log-ratios: (gain, low, high) as relative gains, exp(.) - 1."""
        def back(x: float | None) -> float | None:
            return None if x is None else math.expm1(x)
        return math.expm1(self.mean), back(self.low), back(self.high)


def log_ratio_ci(baseline: np.ndarray, candidate: np.ndarray, *, confidence: float = 0.95,
                 method: CiMethod = "paired-t", seed: int = 0) -> MeanCI:
    """Interval for the mean per-round log(candidate / baseline); no interval below two rounds."""
    baseline = np.asarray(baseline, dtype=float)
    candidate = np.asarray(candidate, dtype=float)
    if baseline.shape != candidate.shape:
        raise ValueError("baseline and candidate must be paired round by round")
    d = np.log(candidate / baseline)
    return mean_ci(d, confidence=confidence, method=method, seed=seed)


def mean_ci(values: np.ndarray, *, confidence: float = 0.95, method: CiMethod = "paired-t",
            seed: int = 0, checks: str | None = None) -> MeanCI:
    """Interval for the mean of per-round values (already differences or log-ratios). `checks`: the sequence's
    floor and holds (policy.checks; None: assumptions.STANDARD), for method sequential."""
    d = np.asarray(values, dtype=float)
    n = int(d.size)
    if n == 0:
        return MeanCI(0, 0.0, 0.0, None, None, confidence, method)
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    if n < 2:
        return MeanCI(n, mean, sd, None, None, confidence, method)
    if method == "sequential":  # anytime-valid: the run may have stopped at this look (analysis/sequential.py)
        return _sequence_ci(d, confidence, checks)
    if sd == 0.0:
        return MeanCI(n, mean, sd, mean, mean, confidence, method)
    if method == "paired-t":
        ci = stats.ttest_1samp(d, 0.0).confidence_interval(confidence_level=confidence)
        low, high = float(ci.low), float(ci.high)
    elif method == "bootstrap":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=2000,
                                  method="BCa", random_state=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if not (math.isfinite(low) and math.isfinite(high)):
            res = stats.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=2000,
                                  method="percentile", random_state=np.random.default_rng(seed))
            low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    else:
        raise ValueError(f"unknown CI method {method!r}")
    return MeanCI(n, mean, sd, low, high, confidence, method)


def _sequence_ci(d: np.ndarray, confidence: float, checks: str | None) -> MeanCI:
    """The bench's confidence sequence at its last look, checks applied; a side the sequence cannot bound yet
    is None (a zero-spread run too: no spread is no evidence of bounds before the sequence has any)."""
    from sglab.analysis import assumptions
    from sglab.analysis.sequential import bounds

    stats, lower, upper = bounds(d, confidence=confidence)
    rule = assumptions.checks_named(checks or assumptions.STANDARD)
    held = int(rule.held(stats)[-1])
    notes = tuple(s for s in (assumptions.held_sentence(held, stats, checks=rule), assumptions.widen_sentence(stats))
                  if s)
    low, high = float(lower[-1]), float(upper[-1])
    return MeanCI(int(d.size), float(stats.mean[-1]), float(stats.sd[-1]), low if math.isfinite(low) else None,
                  high if math.isfinite(high) else None, confidence, "sequential",
                  held=assumptions.HELD_NAMES.get(held), notes=notes)


def relative_delta(baseline: float | None, candidate: float | None) -> float | None:
    """candidate / baseline - 1, or None when either is missing."""
    if baseline is None or candidate is None or baseline <= 0:
        return None
    return candidate / baseline - 1.0
