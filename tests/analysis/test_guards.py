"""TTFT / ITL p99 guards decide on an interval of the p99 ratio, not on a point estimate."""

from __future__ import annotations

import math

import numpy as np

from sglab.analysis.checks import p99_ratio, ratio_interval
from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.config.policy import PromotionPolicy

QUIET = dict(round_cv=0.005, shared_cv=0.005, request_cv=0.01)


def _spread_ttft(result, factor: float, log_sd: float, seed: int = 0):
    """Every request's TTFT redrawn: lognormal with `log_sd`, the candidate's scaled by `factor` (its p99 too)."""
    rng = np.random.default_rng(seed)
    for level in result.levels:
        for r in level.requests:
            scale = factor if r.arm == "candidate" else 1.0
            r.ttft_ms = float(60.0 * scale * math.exp(rng.normal(0.0, log_sd)))
    return result


def test_the_interval_covers_the_true_ratio_and_narrows_with_requests() -> None:
    rng = np.random.default_rng(3)
    widths = []
    for per_round in (10, 80):
        base = [np.exp(rng.normal(0, 0.3, per_round)) for _ in range(16)]
        cand = [1.35 * np.exp(rng.normal(0, 0.3, per_round)) for _ in range(16)]
        q = ratio_interval(base, cand)
        assert q.low < 0.35 < q.high
        widths.append(q.high - q.low)
    assert widths[1] < widths[0] / 2
    assert ratio_interval(base[:2], cand[:2]).low is None  # two rounds cannot be resampled into an interval


def test_a_guard_near_its_cap_is_undecided_and_blocks_instead_of_passing_by_chance() -> None:
    """+12% on ~100 noisy requests per arm against a +20% cap: the point estimate passed it; the interval
    straddles the cap, so the verdict cannot promote (a blocker, not a rejection)."""
    result = _spread_ttft(synthetic_result(gain=0.08, levels=(1,), rounds=10, **QUIET), 1.12, 0.35)
    policy = PromotionPolicy(ttft_p99_max_increase=0.2)
    v = judge(result, policy)
    delta = v.level(1).ttft_p99
    assert delta.low is not None and delta.low < 0.2 < delta.high
    assert v.outcome == "inconclusive" and v.statistical_outcome == "promote"
    assert any(b.name == "ttft-p99@1" and "cannot yet be told from the allowed +20%" in b.detail for b in v.blockers)


def test_a_guard_shown_beyond_its_cap_rejects_and_one_shown_within_passes() -> None:
    policy = PromotionPolicy(ttft_p99_max_increase=0.2)
    bad = judge(_spread_ttft(synthetic_result(gain=0.08, levels=(1,), rounds=10, **QUIET), 2.0, 0.1), policy)
    assert bad.outcome == "reject" and any(g.name == "ttft-p99@1" and not g.ok for g in bad.guards)
    good = judge(_spread_ttft(synthetic_result(gain=0.08, levels=(1,), rounds=10, **QUIET), 1.0, 0.05), policy)
    assert good.outcome == "promote"
    assert any(g.name == "ttft-p99@1" and g.ok and "(within the allowed +20%)" in g.detail for g in good.guards)


def test_the_guard_interval_resamples_rounds_not_requests() -> None:
    """Requests of one round share its state: a round-level shift must widen the interval (a request-level
    bootstrap would not see it)."""
    result = synthetic_result(gain=0.0, levels=(1,), rounds=12, **QUIET)
    rng = np.random.default_rng(5)
    shift = {i: math.exp(rng.normal(0, 0.4)) for i in range(12)}
    for r in result.level(1).requests:
        r.ttft_ms = 60.0 * (shift[r.round_index] if r.arm == "candidate" else 1.0) * math.exp(rng.normal(0, 0.02))
    q = p99_ratio(result.level(1), "baseline", "candidate", "ttft")
    assert q.high - q.low > 0.3
