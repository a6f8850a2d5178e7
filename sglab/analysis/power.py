"""How many more rounds would likely decide an inconclusive comparison.

Assumes the per-round spread stays what it was and the true gain is the measured one; then finds
the smallest round count at which the interval would clear (or miss) the threshold with 80%
probability: (t_{n-1} + z_0.8) * sd / sqrt(n) <= |mean - threshold|, all in log-ratio units. Under the
sequential method the interval is the confidence sequence, wider than t at every n:
(radius(n) + z_0.8 / sqrt(n)) * sd <= |mean - threshold|, and a promotion needs at least the floor of the
sequence's checks (policy.checks, sglab/analysis/assumptions.py).
"""

from __future__ import annotations

import math

from scipy import stats

from sglab.analysis.assumptions import STANDARD, Checks, checks_named
from sglab.analysis.sequence_bounds import radius_factor

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
    z = stats.norm.ppf(assurance)
    tail = (1 + confidence) / 2
    first = max(rounds_now + 1, 2)
    if method == "sequential" and mean_log > threshold_log:
        first = max(first, checks_named(checks).promote_min_rounds)
    for total in range(first, max_rounds + 1):
        if method == "sequential":
            half_width = (float(radius_factor(total, confidence=confidence)) + z / math.sqrt(total)) * sd_log
        else:
            half_width = (stats.t.ppf(tail, total - 1) + z) * sd_log / math.sqrt(total)
        if half_width <= distance:
            return total - rounds_now
    return None
