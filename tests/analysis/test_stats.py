"""Intervals, rounds-to-decide, economics and attribution arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from sglab.analysis.attribution import attribute
from sglab.analysis.operating_point import crossover, level_economics
from sglab.analysis.sequential import rounds_to_decide
from sglab.analysis.samples import ArmLevelStats, log_ratio_ci, mean_ci
from sglab.analysis.synthetic import synthetic_result


def test_paired_t_interval_matches_the_textbook_formula() -> None:
    base = np.array([88.0, 90.0, 87.5, 89.0, 88.2, 90.1])
    cand = np.array([93.0, 95.5, 92.0, 94.8, 93.1, 94.9])
    ci = log_ratio_ci(base, cand, confidence=0.95)
    d = np.log(cand / base)
    half = sps.t.ppf(0.975, 5) * d.std(ddof=1) / math.sqrt(6)
    assert ci.low == pytest.approx(d.mean() - half) and ci.high == pytest.approx(d.mean() + half)
    gain, low, high = ci.as_gain()
    assert gain == pytest.approx(math.exp(d.mean()) - 1) and low < gain < high


def test_one_round_has_no_interval() -> None:
    ci = mean_ci(np.array([0.05]))
    assert ci.low is None and ci.high is None


def test_bootstrap_is_narrower_than_t_with_few_rounds() -> None:
    d = np.random.default_rng(1).normal(0.03, 0.02, 6)
    t = mean_ci(d, method="paired-t")
    b = mean_ci(d, method="bootstrap")
    assert (b.high - b.low) < (t.high - t.low)


def test_rounds_to_decide() -> None:
    far = rounds_to_decide(mean_log=0.05, sd_log=0.03, threshold_log=0.01, rounds_now=3)
    near = rounds_to_decide(mean_log=0.02, sd_log=0.03, threshold_log=0.01, rounds_now=3)
    assert far is not None and near is not None and 1 <= far < near
    assert rounds_to_decide(mean_log=0.01, sd_log=0.03, threshold_log=0.01, rounds_now=3) is None


def _stats(itl: float, accept: float | None) -> ArmLevelStats:
    return ArmLevelStats(10, 10, 0, None, None, itl, accept, "server" if accept else None)


def test_break_even_arithmetic_of_the_article() -> None:
    # 88.8 tok/s baseline -> 11.26 ms/token; candidate 94 tok/s at accept length 2.1.
    econ = level_economics(1, _stats(1000 / 88.8, None), _stats(1000 / 94.0, 2.1))
    assert econ.verify_cycle_ms == pytest.approx(2.1 * 1000 / 94.0)
    assert econ.break_even_accept_length == pytest.approx(2.1 * 88.8 / 94.0)
    assert econ.accept_margin == pytest.approx(94.0 / 88.8 - 1)


def test_crossover_interpolates_on_log2_concurrency() -> None:
    c = crossover({1: 0.1, 4: -0.1, 16: -0.2})
    assert c.status == "between" and c.concurrency == pytest.approx(2.0)
    assert crossover({1: 0.1, 4: 0.05}).status == "beyond"
    assert crossover({1: -0.1, 4: -0.05}).status == "below"


def test_attribution_parts_on_exact_data() -> None:
    result = synthetic_result(kind="attribute", attribution=(0.025, 0.033, 0.001), round_cv=0.0, shared_cv=0.0,
                              request_cv=0.0,
                              confounds=[{"key": "env NCCL_PROTO", "baseline": None, "candidate": "LL"}])
    att = attribute(result)
    assert att is not None and att.confounds_label == "NCCL alone"
    lv = att.levels[0]
    assert lv.component("confounds").estimate == pytest.approx(0.025)
    assert lv.component("speculation").estimate == pytest.approx(0.033)
    assert lv.component("interaction").estimate == pytest.approx(0.001)
    assert lv.component("total").estimate == pytest.approx(0.059)


def test_attribution_parts_add_up_on_noisy_data() -> None:
    result = synthetic_result(kind="attribute", attribution=(0.025, 0.033, 0.0), seed=7)
    for lv in attribute(result).levels:
        parts = sum(lv.component(k).estimate for k in ("confounds", "speculation", "interaction"))
        assert parts == pytest.approx(lv.component("total").estimate)
        assert all(c.low <= c.estimate <= c.high for c in lv.components)
    assert attribute(synthetic_result()) is None
