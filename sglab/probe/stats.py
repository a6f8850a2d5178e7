"""Median with a distribution-free interval: the order-statistic confidence interval of the median.

Latency samples are skewed (a long tail from preemption and clock changes), so no normal approximation:
the number of samples below the true median is Binomial(n, 1/2), which gives ranks j < k with
P(x_(j) <= median <= x_(k)) >= confidence exactly, whatever the distribution (no scipy: this runs in
the server image too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MedianCI:
    median: float
    low: float
    high: float
    n: int
    coverage: float


def _binom_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return math.fsum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2.0 ** n


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def median_ci(values: list[float], confidence: float = 0.95) -> MedianCI:
    """The median and the narrowest symmetric order-statistic interval covering it with >= confidence.

    With too few samples for that coverage the interval is the whole range and `coverage` says what it
    actually is (n=5 covers 94%, n=6 97%).
    """
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    n = len(ordered)
    # ranks (1-based) j and n-j+1; coverage = 1 - 2 P(B <= j-1)
    best_j = 1
    for j in range(1, n // 2 + 1):
        if 1 - 2 * _binom_cdf(j - 1, n) >= confidence:
            best_j = j
        else:
            break
    coverage = 1 - 2 * _binom_cdf(best_j - 1, n)
    return MedianCI(median(ordered), ordered[best_j - 1], ordered[n - best_j], n, coverage)
