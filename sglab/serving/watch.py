"""The standing control after the rollout: is the promoted config still faster than the same server without
speculation, on the traffic production serves now?

Per window, log(serving decode tok/s / control decode tok/s) over the last horizon-windows windows: the
gain's confidence sequence (the bench's, `sequential_test` / `bounds`) says whether it is still above
zero, and since which window it is shown below zero (the traffic mix no longer suits the draft: roll back).
Per-category gains say which traffic moved. The same check runs in the cluster on a schedule (the watch
CronJob); its Job fails (exit 1) when the gain is below zero, so the usual failed-Job alert fires.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sglab.analysis.sequential import bounds, sequential_test
from sglab.serving.judge import usable
from sglab.serving.prometheus import Prometheus
from sglab.serving.spec import JudgeSpec
from sglab.serving.windows import Window, fetch_windows

SERVING, CONTROL = "serving", "control"
Status = Literal["holding", "below-zero", "no-data"]
# No data (a quiet night) is no alarm: only a gain shown below zero fails the CronJob's Job (which pages).
EXIT_CODES: dict[str, int] = {"holding": 0, "below-zero": 1, "no-data": 0}


@dataclass
class CategoryGain:
    category: str
    share: float
    estimate: float
    low: float | None
    high: float | None
    below_zero: bool


@dataclass
class WatchReport:
    status: Status
    windows: int
    skipped: int
    gain: float | None
    low: float | None
    high: float | None
    since: float | None  # end time of the window from which the gain is shown below zero
    categories: list[CategoryGain] = field(default_factory=list)
    rollback_command: str = ""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def sentence(self) -> str:
        if self.gain is None:
            return f"no paired windows of serving and control ({self.skipped} could not be paired)"
        shown = (f"live gain {self.gain:+.1%} decode tok/s over the standing control, {self.windows} windows "
                 f"(CS {_pct(self.low)} to {_pct(self.high)})")
        if self.status == "below-zero":
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since)) if self.since else "?"
            losing = [c.category for c in self.categories if c.below_zero]
            why = f"; slower on {', '.join(losing)}" if losing else ""
            return (f"{shown}: dropped below zero (shown since the window ending {when}){why}; the traffic no "
                    f"longer suits the draft. Roll back: {self.rollback_command}")
        return f"{shown}: holding"


def _pct(value: float | None) -> str:
    return "unbounded" if value is None else f"{value:+.1%}"


def _cs_last(values: list[float], spec: JudgeSpec) -> tuple[float, float | None, float | None]:
    stats, lower, upper = bounds(np.asarray(values, dtype=float), confidence=spec.confidence)
    lo, hi = float(lower[-1]), float(upper[-1])
    return (math.expm1(float(stats.mean[-1])), math.expm1(lo) if math.isfinite(lo) else None,
            math.expm1(hi) if math.isfinite(hi) else None)


def watch_report(windows: list[Window], spec: JudgeSpec) -> WatchReport:
    """The report over `windows` (oldest first): serving vs control."""
    pairs, ends, skipped = [], [], 0
    for w in windows:
        if usable(w, spec, (SERVING, CONTROL)) is None:
            pairs.append((w.arms[SERVING], w.arms[CONTROL]))
            ends.append(w.end)
        else:
            skipped += 1
    gains = [math.log(s.decode_tok_per_s / c.decode_tok_per_s) for s, c in pairs]
    report = WatchReport("no-data", len(gains), skipped, None, None, None, None, rollback_command=spec.rollback_command)
    if len(gains) < 2:
        return report
    report.gain, report.low, report.high = _cs_last(gains, spec)
    record = sequential_test(gains, min_gain=0.0, confidence=spec.confidence, min_rounds=spec.min_windows,
                             checks=spec.checks)
    below = record.decision == "reject" or (report.high is not None and report.high < 0)
    if below:
        report.status = "below-zero"
        report.since = ends[record.rounds - 1] if record.decision == "reject" else ends[-1]
    else:
        report.status = "holding" if len(gains) >= spec.min_windows else "no-data"
    report.categories = _categories(pairs, spec) if spec.category_label else []
    return report


def _categories(pairs: list, spec: JudgeSpec) -> list[CategoryGain]:
    tokens: dict[str, float] = {}
    for serving, _ in pairs:
        for cat, (_, count) in serving.categories.items():
            tokens[cat] = tokens.get(cat, 0.0) + count
    total = sum(tokens.values()) or 1.0
    out = []
    for cat in sorted(tokens, key=lambda c: -tokens[c]):
        values = [math.log(a / b) for s, c in pairs if (a := s.category_tok_per_s(cat))
                  and (b := c.category_tok_per_s(cat))]
        if len(values) < 2:
            continue
        estimate, low, high = _cs_last(values, spec)
        out.append(CategoryGain(cat, tokens[cat] / total, estimate, low, high, high is not None and high < 0))
    return out


def watch_once(prom: Prometheus, spec: JudgeSpec, *, now: float | None = None,
               horizon_windows: int | None = None) -> tuple[WatchReport, list[Window]]:
    """One look over the last horizon windows ending now (the CronJob's run, `sglab watch`)."""
    now = time.time() if now is None else now
    horizon = horizon_windows or spec.horizon_windows
    arms = {SERVING: spec.revision("stable"), CONTROL: spec.control_labels()}
    start = now - spec.settle_s - horizon * spec.window_s
    windows = fetch_windows(prom, arms, start=start, now=now, window_s=spec.window_s, settle_s=spec.settle_s,
                            category_label=spec.category_label)
    return watch_report(windows, spec), windows
