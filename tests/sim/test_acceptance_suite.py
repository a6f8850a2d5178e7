"""The bundled suite, templated, accepts like the calibration: the shipped stacks send it, and the simulator's
timing was calibrated on the article's real-prompt accept length (2.1 at 5 steps)."""

from __future__ import annotations

import pytest

from sglab.load.datasets import load_suite
from sglab.sim.acceptance import CATEGORY_ACCEPT_OFFSETS, CATEGORY_PROFILES, ContentAcceptance
from sglab.sim.tokens import RANDOM, classify
from sglab.sim.profile import SimProfile

PROFILE = SimProfile()
ORDER = ("code", "maths", "extraction", "summarisation", "long-context", "chat", "translation")


def _mix(depth: int, templated: bool, by_token: bool = False) -> tuple[float, float]:
    """(suite mix E[a], calibrated E[a]) at this depth: by request, or Σ tokens / Σ cycles by output token."""
    content = ContentAcceptance(PROFILE.accept_prob_by_position, PROFILE.accept_prob_tail, depth=depth)
    records = load_suite().records
    lengths = [content.model(classify(r.text), templated).expected_accept_length() for r in records]
    if by_token:
        weights = [r.output_tokens for r in records]
        value = sum(weights) / sum(w / a for w, a in zip(weights, lengths))
    else:
        value = sum(lengths) / len(lengths)
    return value, content.default.expected_accept_length()


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
def test_the_templated_suite_mix_reproduces_the_calibrated_accept_length(depth):
    by_request, calibrated = _mix(depth, templated=True)
    assert by_request == pytest.approx(calibrated, rel=0.005)
    by_token, _ = _mix(depth, templated=True, by_token=True)
    assert by_token == pytest.approx(calibrated, rel=0.02)


def test_the_article_numbers_hold_on_the_suite():
    assert _mix(5, templated=True)[0] == pytest.approx(2.1, abs=0.01)
    assert _mix(2, templated=True)[0] == pytest.approx(1.691, abs=0.005)


def test_raw_suite_text_accepts_less_than_templated():
    for depth in (1, 2, 5):
        raw, calibrated = _mix(depth, templated=False)
        assert raw < 0.98 * calibrated


@pytest.mark.parametrize("depth", [1, 2, 3, 5, 7])
def test_categories_keep_the_speed_bench_order_around_random(depth):
    content = ContentAcceptance(PROFILE.accept_prob_by_position, PROFILE.accept_prob_tail, depth=depth)
    expected = [content.model(c, True).expected_accept_length() for c in ORDER]
    assert expected == sorted(expected, reverse=True) and len(set(expected)) == len(expected)
    random_text = content.model(RANDOM, True).expected_accept_length()
    assert expected[-1] < random_text < expected[0]


def test_profiles_are_the_calibration_plus_their_offset():
    """Every p_i is calibrated p_i + the category's offset + one shift per position shared by all categories."""
    assert set(CATEGORY_ACCEPT_OFFSETS) == set(CATEGORY_PROFILES) == set(ORDER)
    calibrated = (*PROFILE.accept_prob_by_position, PROFILE.accept_prob_tail)
    for i in range(len(calibrated)):
        shifts = [((CATEGORY_PROFILES[c].by_position + (CATEGORY_PROFILES[c].tail,))[i] - calibrated[i]
                   - CATEGORY_ACCEPT_OFFSETS[c]) for c in ORDER]
        assert max(shifts) - min(shifts) <= 0.0011  # 3-decimal rounding
        assert abs(shifts[0]) < 0.03
