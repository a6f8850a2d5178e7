"""The live judge's decision over synthetic windows: the gain's sequence, each guard, skipped windows."""

from __future__ import annotations

import random

import pytest

from sglab.serving.judge import EXIT_CODES, decide
from sglab.serving.spec import JudgeSpec
from sglab.serving.windows import ArmWindow, Window

SPEC = JudgeSpec(stack="production", namespace="prod", prometheus_url="http://p:9090", scrape_interval_s=1,
                 window_s=60, min_windows=5, max_windows=40, min_gain=0.0, confidence=0.95, futility=True,
                 checks="standard",
                 ttft_p99_max_increase=0.2, itl_p99_max_increase=0.2, error_rate_max_increase=0.01,
                 accept_length_guard=True, break_even_accept_length=1.6, break_even_source="test",
                 category_label="category", category_min_share=0.1, category_max_loss=0.03,
                 min_requests_per_window=5, horizon_windows=30, control=True)


def arm(tok_s: float, *, ttft: float = 0.5, itl_p99: float = 0.02, errors: float = 0.0, accept: float = 2.0,
        requests: float = 100, categories: dict[str, float] | None = None) -> ArmWindow:
    count = 5000.0
    cats = {c: (1000.0 / v, 1000.0) for c, v in (categories or {}).items()}
    return ArmWindow(requests=requests, errors=errors, itl_sum_s=count / tok_s, itl_count=count, ttft_p99_s=ttft,
                     itl_p99_s=itl_p99, generated_tokens=accept * 1000, verify_calls=1000, categories=cats)


def windows(n: int, canary: dict, stable: dict | None = None, *, gain: float = 0.0, sd: float = 0.01,
            seed: int = 1) -> list[Window]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        base = 90.0 * (1 + rng.gauss(0, 0.03))  # the traffic mix moves both arms alike
        c = arm(base * (1 + gain) * (1 + rng.gauss(0, sd)), **canary)
        s = arm(base * (1 + rng.gauss(0, sd)), **(stable or {}))
        out.append(Window(end=1000.0 + 60 * k, window_s=60, arms={"canary": c, "stable": s}))
    return out


def first_decision(all_windows: list[Window], spec: JudgeSpec = SPEC):
    for k in range(1, len(all_windows) + 1):
        d = decide(all_windows[:k], spec)
        if d.outcome != "continue":
            return k, d
    return len(all_windows), d


def test_a_faster_canary_promotes_after_a_few_windows():
    k, d = first_decision(windows(40, {}, gain=0.05))
    assert d.outcome == "promote" and d.exit_code == 0, d.reason
    assert SPEC.min_windows <= k <= 12 and d.gain == pytest.approx(0.05, abs=0.02)
    assert d.gain_low > 0 and all(g.status != "fail" for g in d.guards)


def test_a_slower_canary_aborts():
    k, d = first_decision(windows(40, {}, gain=-0.15))
    assert d.outcome == "abort" and d.exit_code == 1 and k <= 8
    assert "below the minimum gain" in d.reason or "cannot reach" in d.reason


@pytest.mark.parametrize("seed", range(5))
def test_an_aa_canary_never_promotes(seed):
    k, d = first_decision(windows(40, {}, gain=0.0, seed=seed))
    assert d.outcome != "promote"


@pytest.mark.parametrize("canary, words", [
    ({"ttft": 0.9}, "ttft-p99"),
    ({"itl_p99": 0.05}, "itl-p99"),
    ({"errors": 20}, "error-rate"),
    ({"accept": 1.3}, "accept length vs break-even 1.60"),
    ({"categories": {"code": 100.0, "translation": 80.0}}, "category translation".split()[1]),
])
def test_each_guard_aborts_a_canary_that_is_otherwise_faster(canary, words):
    stable = {"categories": {"code": 90.0, "translation": 90.0}} if "categories" in canary else {}
    k, d = first_decision(windows(40, canary, stable, gain=0.05))
    assert d.outcome == "abort", d.reason
    assert "guard failed" in d.reason and words in d.reason


def test_a_guard_within_its_margin_but_not_yet_shown_holds_a_promotion_back():
    """TTFT p99 +25% on noisy windows: the gain is shown before the guard decides, so the judge waits."""
    rng = random.Random(3)
    ws = [Window(end=w.end, window_s=60, arms={**w.arms, "canary": ArmWindow(**{
        **w.arms["canary"].__dict__, "ttft_p99_s": 0.5 * 1.25 * (1 + rng.gauss(0, 0.3))})})
        for w in windows(12, {}, gain=0.08)]  # past the sequence's 10-round floor
    d = decide(ws, SPEC)
    (ttft,) = [g for g in d.guards if g.name == "ttft-p99"]
    assert ttft.status == "pending" and ttft.estimate > 0.2, ttft
    assert d.outcome == "continue" and "waiting on guard" in d.reason and "ttft-p99" in d.reason


def test_windows_without_enough_requests_are_skipped_not_paired():
    ws = windows(10, {}, gain=0.05)
    thin = Window(end=ws[-1].end + 60, window_s=60, arms={"canary": arm(95, requests=2), "stable": arm(90)})
    missing = Window(end=thin.end + 60, window_s=60, arms={"stable": arm(90)})
    d = decide(ws + [thin, missing], SPEC)
    assert d.windows_used == 10 and d.windows_skipped == 2


def test_no_decision_by_max_windows_is_an_abort():
    spec = SPEC.model_copy(update={"max_windows": 6, "futility": False, "min_gain": 0.05})
    d = decide(windows(6, {}, gain=0.05), spec)
    assert d.outcome == "abort" and "no decision within max-windows 6" in d.reason
    assert EXIT_CODES == {"promote": 0, "abort": 1, "continue": 3}


def test_strict_checks_promote_a_faster_canary_from_the_twentieth_window_only():
    """sglab:serving.canary.checks strict: the sequence's strict floor (windows that drift together are seen)."""
    k, d = first_decision(windows(40, {}, gain=0.05), SPEC.model_copy(update={"checks": "strict"}))
    assert d.outcome == "promote" and k == 20, (k, d.reason)
