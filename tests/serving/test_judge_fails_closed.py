"""The live judge sees a failing canary: a window whose canary served requests without a token, an absent error
series and a non-physical (negative) increase fail closed instead of being skipped or read as zero."""

from __future__ import annotations

from dataclasses import replace

from sglab.serving.judge import decide
from sglab.serving.windows import ArmWindow, Window, arm_window

from tests.serving.test_judge import SPEC, windows


def _with_canary(ws: list[Window], k: int, canary: ArmWindow) -> list[Window]:
    out = list(ws)
    out[k] = Window(end=ws[k].end, window_s=ws[k].window_s, arms={**ws[k].arms, "canary": canary})
    return out


def test_a_canary_that_fails_every_request_of_a_window_aborts() -> None:
    """Requests served, no inter-token latency, no tokens: every request failed (was skipped before)."""
    ws = windows(12, {}, gain=0.08)
    dead = replace(ws[3].arms["canary"], itl_sum_s=0.0, itl_count=0.0, generated_tokens=0.0, verify_calls=0.0)
    d = decide(_with_canary(ws, 3, dead), SPEC)
    assert d.outcome == "abort" and "without a token" in d.reason and d.windows_skipped == 0


def test_an_absent_error_series_fails_closed() -> None:
    values = {"requests": 100.0, "itl_sum": 50.0, "itl_count": 5000.0, "generated": 2000.0, "verify": 1000.0}
    canary = arm_window(values, {}, {})
    assert any("no error series" in p for p in canary.problems)
    d = decide(_with_canary(windows(12, {}, gain=0.08), 5, canary), SPEC)
    assert d.outcome == "abort" and "no error series" in d.reason


def test_a_negative_increase_fails_closed() -> None:
    values = {"requests": 100.0, "errors": -3.0, "itl_sum": 50.0, "itl_count": 5000.0, "generated": 2000.0,
              "verify": 1000.0}
    canary = arm_window(values, {}, {})
    assert canary.errors == -3.0 and any("negative" in p for p in canary.problems)
    d = decide(_with_canary(windows(12, {}, gain=0.08), 2, canary), SPEC)
    assert d.outcome == "abort" and "negative" in d.reason


def test_a_healthy_window_reads_as_before() -> None:
    values = {"requests": 100.0, "errors": 0.0, "itl_sum": 50.0, "itl_count": 5000.0, "generated": 2000.0,
              "verify": 1000.0}
    canary = arm_window(values, {}, {})
    assert canary.problems == () and canary.decode_tok_per_s == 100.0
