"""One sequence wherever a decision is shown: the verdict's look, the web UI's live band, `sglab watch` and the
sweep's race read the same bounds from the same rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sglab.analysis.samples import comparison_arms, paired
from sglab.analysis.sequential import sequential_test
from sglab.analysis.synthetic import synthetic_result
from sglab.serving.watch import watch_report
from sglab.sweep.race import latest_bounds
from sglab.ui.views import gain_series

from serving.test_judge import SPEC
from serving.test_watch import _windows


def _log_ratios(result) -> np.ndarray:
    (level,) = result.levels
    _, data = paired(level, "decode_tok_per_s", list(comparison_arms(result)))
    return np.log(data[:, 1] / data[:, 0])


@pytest.mark.parametrize("gain", [0.04, 0.0, -0.03])
def test_the_ui_band_the_watch_and_the_race_draw_the_verdicts_sequence(gain: float) -> None:
    result = synthetic_result(levels=(1,), rounds=24, gain=gain, seed=7)
    logs = _log_ratios(result)
    record = sequential_test(logs, min_gain=0.0, confidence=0.95, max_rounds=len(logs))
    verdict_looks = {look.rounds: look for look in record.looks}

    (band,) = gain_series(result)["levels"]
    for point in band["points"]:
        look = verdict_looks.get(point["rounds"])
        if look is None:  # the verdict stopped earlier: it decided
            continue
        assert point["low"] == (None if look.low is None else pytest.approx(look.low))
        assert point["high"] == (None if look.high is None else pytest.approx(look.high))

    n = len(record.looks)  # the watch and the race see the rounds up to the verdict's last look
    report = watch_report(_windows([math.expm1(v) for v in logs[:n]]), SPEC)
    last = record.looks[-1]
    assert report.low == (None if last.low is None else pytest.approx(last.low, rel=1e-6))
    assert report.high == (None if last.high is None else pytest.approx(last.high, rel=1e-6))

    _, lower, upper = latest_bounds(logs[None, :n], np.zeros((1, n)), confidence=0.95)
    assert (last.lower_log is None and lower[0] == -np.inf) or lower[0] == pytest.approx(last.lower_log)
    assert (last.upper_log is None and upper[0] == np.inf) or upper[0] == pytest.approx(last.upper_log)
