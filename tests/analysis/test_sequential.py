"""The confidence sequence stays valid under continuous monitoring; a fixed-n t interval does not."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from sglab.analysis.sequential import (FUTILE, PROMOTE, PROMOTE_MIN_ROUNDS, SequentialRecord, bounds, first_decision,
                                       radius_factor, sequential_test)

ALPHA = 0.05
TOLERANCE = 0.01  # Monte Carlo slack: sd of a 5% rate over 4000 sequences is 0.34%


def _ever_excludes(lower: np.ndarray, upper: np.ndarray, truth: float, first_look: int = 1) -> float:
    """Fraction of sequences whose interval misses the truth at some look (looks from `first_look` on)."""
    miss = (lower > truth) | (upper < truth)
    return float(miss[:, first_look - 1:].any(axis=1).mean())


def _t_bounds(x: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The fixed-n paired-t interval recomputed after every round (what peeking at stats.mean_ci does)."""
    n = np.arange(1, x.shape[1] + 1)
    mean = np.cumsum(x, axis=1) / n
    sd = np.sqrt(np.maximum((np.cumsum(x * x, axis=1) - n * mean * mean) / np.maximum(n - 1, 1), 0.0))
    q = sps.t.ppf((1 + confidence) / 2, np.maximum(n - 1, 1))
    half = np.where(n >= 2, q * sd / np.sqrt(n), np.inf)
    return mean - half, mean + half


@pytest.mark.parametrize("sigma", [0.003, 0.03, 3.0])
def test_coverage_under_continuous_monitoring_and_t_interval_fails_it(sigma: float) -> None:
    rng = np.random.default_rng(int(sigma * 1000))
    truth = 0.01
    x = rng.normal(truth, sigma, size=(4000, 60))
    _, lower, upper = bounds(x, confidence=1 - ALPHA)
    cs_error = _ever_excludes(lower, upper, truth)
    t_low, t_high = _t_bounds(x, 1 - ALPHA)
    t_error = _ever_excludes(t_low, t_high, truth, first_look=3)
    assert cs_error <= ALPHA + TOLERANCE
    # the same check applied to the fixed-n t interval fails: peeking at it inflates the error
    assert t_error > 3 * ALPHA
    # but at one fixed look the t interval is right (so the failure above is the peeking, not a bug)
    assert abs(float(((t_low[:, 15] > truth) | (t_high[:, 15] < truth)).mean()) - ALPHA) < TOLERANCE


def test_stopping_at_first_promote_keeps_false_promotions_below_alpha() -> None:
    rng = np.random.default_rng(7)
    threshold = math.log1p(0.005)
    x = rng.normal(threshold, 0.0276, size=(4000, 60))  # true gain exactly at the minimum: promoting is wrong
    _, decision = first_decision(x, threshold_log=threshold, confidence=1 - ALPHA, min_rounds=3)
    assert float((decision == 1).mean()) <= ALPHA / 2 + TOLERANCE
    t_low, _ = _t_bounds(x, 1 - ALPHA)
    assert float((t_low[:, 2:] > threshold).any(axis=1).mean()) > 2 * ALPHA


def test_a_clear_gain_promotes_early_and_every_look_is_recorded() -> None:
    x = np.random.default_rng(1).normal(math.log1p(0.059), 0.0276, 60)
    rec = sequential_test(x, min_gain=0.005, confidence=0.95, min_rounds=3, max_rounds=60)
    assert rec.decision == "promote" and rec.rounds < 16
    assert [lk.rounds for lk in rec.looks] == list(range(1, rec.rounds + 1))
    assert [lk.round_index for lk in rec.looks] == list(range(rec.rounds))
    assert all(lk.decision == "continue" for lk in rec.looks[:-1]) and rec.looks[-1].decision == "promote"
    assert rec.looks[0].low is None and rec.looks[0].high is None  # unbounded at one round
    last = rec.looks[-1]
    assert last.low is not None and last.low > 0.005 and last.low < last.estimate < last.high
    assert last.estimate == pytest.approx(math.expm1(x[:rec.rounds].mean()))
    assert SequentialRecord.model_validate_json(rec.model_dump_json()) == rec


def test_a_clear_loss_rejects_and_a_gain_at_the_minimum_ends_inconclusive() -> None:
    rng = np.random.default_rng(2)
    lose = sequential_test(rng.normal(math.log1p(-0.05), 0.0276, 60), min_gain=0.005, max_rounds=60)
    assert lose.decision == "reject" and lose.looks[-1].high < 0.005
    edge = sequential_test(np.full(20, math.log1p(0.005)) + rng.normal(0, 0.0276, 20), min_gain=0.005,
                           max_rounds=20)
    assert edge.decision == "inconclusive" and edge.rounds == 20
    short = sequential_test(rng.normal(0.0, 0.0276, 4), min_gain=0.005, max_rounds=20)
    assert short.decision == "continue" and short.rounds == 4


def test_min_rounds_and_max_rounds_are_honoured() -> None:
    x = np.array([0.05, 0.051, 0.049, 0.05, 0.0505, 0.0502, 0.0499, 0.05, 0.0501, 0.0498])
    early = sequential_test(x, min_gain=0.005)
    assert early.decision == "promote" and early.rounds == PROMOTE_MIN_ROUNDS  # no promotion before 10 rounds
    assert early.looks[-2].held == "rounds" and early.looks[-2].low > 0.005
    late = sequential_test(np.concatenate([x, x]), min_gain=0.005, min_rounds=12)
    assert late.decision == "promote" and late.rounds == 12
    capped = sequential_test(np.random.default_rng(3).normal(0, 0.03, 30), min_gain=0.005, max_rounds=6)
    assert capped.rounds <= 6 and capped.decision in ("inconclusive", "reject", "promote")


def test_identical_arms_give_a_point_interval_and_reject() -> None:
    rec = sequential_test(np.zeros(8), min_gain=0.005)
    assert rec.decision == "reject" and rec.looks[-1].low == 0.0 == rec.looks[-1].high


def test_vectorised_first_decision_matches_the_record() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(0.02, 0.03, size=(50, 30))
    rounds, sign = first_decision(x, threshold_log=math.log1p(0.005), min_rounds=3)
    for row, r, s in zip(x, rounds, sign):
        rec = sequential_test(row, min_gain=0.005, min_rounds=3)
        if r == 0:
            assert rec.decision == "continue" and rec.rounds == 30
        else:
            assert rec.rounds == r and rec.decision == ("promote" if s == 1 else "reject")


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        sequential_test([0.01, float("nan"), 0.02], min_gain=0.005)
    with pytest.raises(ValueError, match="confidence"):
        radius_factor(5, confidence=1.5)
    with pytest.raises(ValueError, match="max_rounds"):
        sequential_test([0.01], min_gain=0.005, max_rounds=0)


def test_futility_stops_hopeless_runs_early_and_never_adds_a_promotion() -> None:
    rng = np.random.default_rng(9)
    threshold = math.log1p(0.005)
    for gain, faster in ((0.0, True), (0.03, False)):
        x = math.log1p(gain) + rng.normal(0.0, 0.0276, size=(4000, 32))
        plain_rounds, plain = first_decision(x, threshold_log=threshold, min_rounds=3, max_rounds=32)
        fut_rounds, fut = first_decision(x, threshold_log=threshold, min_rounds=3, max_rounds=32, futility=True)
        # a futility stop only ends a run early without promoting: its promotions are a subset
        assert not ((fut == PROMOTE) & (plain != PROMOTE)).any()
        used = lambda r: np.where(r == 0, 32, r).mean()  # noqa: E731
        if faster:
            # (losers keep going to their reject, so a run near zero stops later than it did: 0.81, was < 0.75)
            assert (fut == FUTILE).mean() > 0.5 and used(fut_rounds) < 0.85 * used(plain_rounds)
        else:  # a real gain is almost never given up on
            assert (plain == PROMOTE).mean() - (fut == PROMOTE).mean() < 0.01
    rec = sequential_test(rng.normal(0.0, 0.0276, 32), min_gain=0.005, min_rounds=3, max_rounds=32,
                          futility=True)
    assert rec.futility and rec.decision in ("futile", "reject") and rec.rounds < 32
    # without max-rounds there is nothing to be futile against
    assert sequential_test(rng.normal(0.0, 0.0276, 32), min_gain=0.005, futility=True).decision != "futile"


# ---- sequential is the default; results recorded under the fixed-n design are judged as they were --------

V1 = Path(__file__).parents[1] / "data" / "results" / "v1-article-replay.json"


def test_the_default_method_is_sequential_and_the_fixed_n_methods_stay_selectable() -> None:
    from sglab.config.policy import PromotionPolicy

    assert PromotionPolicy().method == "sequential"
    assert PromotionPolicy(method="paired-t").method == "paired-t"
    assert PromotionPolicy(method="bootstrap").interval_method(1) == "bootstrap"


@pytest.mark.parametrize("drop_method", [False, True])
def test_an_old_result_recorded_under_paired_t_is_still_judged_with_it(drop_method: bool) -> None:
    import json

    from sglab.analysis.verdict import judge, policy_of
    from sglab.schema.result import RunResult

    raw = json.loads(V1.read_text(encoding="utf-8"))
    assert raw["policy"]["method"] == "paired-t"
    expected = judge(RunResult.model_validate(raw))
    if drop_method:  # a writer that left the key out: it predates `sequential`, and paired-t was the default
        del raw["policy"]["method"]
    v = judge(RunResult.model_validate(raw))
    assert v.method == "paired-t"
    got, want = v.level(1).decode, expected.level(1).decode
    assert (got.low, got.high) == (want.low, want.high)
    # what the new default would give: a wider interval, so the fallback is not the new default in disguise
    result = RunResult.model_validate(raw)
    sequential = judge(result, policy_of(result).model_copy(update={"method": "sequential"}))
    assert sequential.level(1).decode.low is None or sequential.level(1).decode.low < got.low


def test_a_sequential_policy_gives_the_gated_level_the_sequence_and_the_others_the_fixed_n_t() -> None:
    from sglab.analysis.samples import mean_ci, paired
    from sglab.analysis.synthetic import synthetic_result
    from sglab.analysis.verdict import judge

    result = synthetic_result(gain=0.04, levels=(1, 4), rounds=8, policy={"method": "sequential", "levels": [1]})
    v = judge(result)
    assert v.method == "sequential"
    for level, method in ((1, "sequential"), (4, "paired-t")):
        _, data = paired(result.level(level), "decode_tok_per_s", ["baseline", "candidate"])
        ci = mean_ci(np.log(data[:, 1] / data[:, 0]), method=method)
        assert v.level(level).decode.low == pytest.approx(math.expm1(ci.low))
        assert v.level(level).decode.high == pytest.approx(math.expm1(ci.high))


def test_judging_a_fixed_n_run_under_the_sequence_is_stricter_and_the_reverse_a_loosening() -> None:
    from sglab.analysis.checks import policy_weakenings
    from sglab.config.policy import PromotionPolicy

    fixed, seq = PromotionPolicy(method="paired-t"), PromotionPolicy(method="sequential")
    assert policy_weakenings(fixed, seq) == []
    assert policy_weakenings(seq, fixed) == ["policy.method: paired-t is not the recorded sequential"]
    assert policy_weakenings(fixed, PromotionPolicy(method="bootstrap"))  # narrower: refused as before


def test_a_fixed_n_run_under_a_sequential_policy_is_checked_against_its_plan_not_a_stop() -> None:
    from sglab.analysis.checks import _schedule_problems
    from sglab.analysis.synthetic import synthetic_result

    result = synthetic_result(levels=(1,), rounds=16, gain=0.06, policy={"method": "sequential", "levels": [1]})
    assert _schedule_problems(result) == []  # its 16 planned rounds, though its sequence decided earlier
    from sglab.schema.result import SequentialRun

    result.sequential = SequentialRun()  # it claims to have stopped on its sequence: then it went on too long
    assert any("beyond the planned" in p for p in _schedule_problems(result))


def test_the_stop_is_said_with_its_round_its_band_and_the_line_it_cleared() -> None:
    from sglab.analysis.stops import stop_reason

    x = np.random.default_rng(3).normal(0.05, 0.01, 40)
    rec = sequential_test(x, min_gain=0.005, min_rounds=3, max_rounds=32, futility=True)
    assert rec.decision == "promote"
    line = stop_reason(1, rec)
    assert line.startswith(f"c=1: promote at round {rec.rounds} of at most 32: the 95% confidence sequence "
                           f"[{rec.last.low:+.1%}, {rec.last.high:+.1%}] clears +0.5%")
    rec = sequential_test(-0.1 + 0.01 * np.random.default_rng(4).normal(size=40), min_gain=0.005, min_rounds=3,
                          max_rounds=32)
    assert rec.decision == "reject" and "lies below +0.5%" in stop_reason(4, rec)
    rec = sequential_test(0.005 + 0.03 * np.random.default_rng(5).normal(size=6), min_gain=0.005, max_rounds=6)
    assert rec.decision == "inconclusive" and "still straddles +0.5%" in stop_reason(1, rec)


def test_futility_does_not_give_up_on_a_clear_loser_that_a_few_more_rounds_reject() -> None:
    # eagle-default's measured c=1 rounds with the suite prompts (4 s rounds, simulators at 3x): -17.5%, sd 9.2%.
    # At round 6 the upper bound (+3.0%) could not clear +0.5% by round 32: futile, an inconclusive verdict;
    # a reject is within reach at that estimate, so the run goes on to it.
    x = [-0.106, -0.135, -0.315, -0.205, -0.062, -0.227]
    head = sequential_test(x, min_gain=0.005, min_rounds=3, max_rounds=32, futility=True)
    assert head.decision == "continue" and head.last.high is not None and head.last.high > 0.005
    rng = np.random.default_rng(11)
    more = x + list(rng.normal(-0.175, 0.092, 26))
    rec = sequential_test(more, min_gain=0.005, min_rounds=3, max_rounds=32, futility=True)
    assert rec.decision == "reject" and rec.rounds < 16
    # near the threshold the futility stop still ends the run early
    flat = sequential_test(np.random.default_rng(12).normal(0.0, 0.0235, 32), min_gain=0.005, min_rounds=3,
                           max_rounds=32, futility=True)
    assert flat.decision == "futile" and flat.rounds < 32


def test_an_inconclusive_sequential_run_asks_for_the_rounds_its_sequence_needs() -> None:
    """The fixed-n formula under-counts what a confidence sequence needs; the advice names --rounds."""
    from sglab.analysis.sequential import rounds_to_decide
    from sglab.analysis.synthetic import synthetic_result
    from sglab.analysis.verdict import judge, next_step
    from sglab.config.policy import PromotionPolicy

    fixed = rounds_to_decide(mean_log=0.02, sd_log=0.03, threshold_log=0.005, rounds_now=6)
    seq = rounds_to_decide(mean_log=0.02, sd_log=0.03, threshold_log=0.005, rounds_now=6, method="sequential")
    assert fixed is not None and seq is not None and seq > fixed
    v = judge(synthetic_result(gain=0.012, levels=(1,), rounds=6, round_cv=0.02), PromotionPolicy(method="sequential"))
    assert v.outcome == "inconclusive" and v.more_rounds
    step = next_step(v)
    assert step is not None and f"--rounds {v.more_rounds}" in step and "--max-rounds" not in step
