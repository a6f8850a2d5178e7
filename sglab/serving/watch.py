"""The standing control after the rollout: is the promoted config still faster than the same server without
speculation, on the traffic production serves now?

Per window, log(serving decode tok/s / control decode tok/s) over the last horizon-windows windows: the
gain's confidence sequence (the bench's, `sequential_test` / `bounds`) says whether it is still above
zero, and since which window it is shown below zero (the traffic mix no longer suits the draft: roll back).
Per-category gains say which traffic moved. The same check runs in the cluster on a schedule (the watch
CronJob); its Job fails (exit 1) when the gain is below zero, so the usual failed-Job alert fires.

The control is the serving config without speculation only while both run the same shared config (image,
server flags, env, NCCL: the pods' sglab/shared-config label). The stable takes a new one when Argo promotes the
canary, the control after it (its follower, sglab/serving/follow.py); where the two differ within the horizon the
watch says `unlike-configs` instead of a gain (exit 4 when they differ now and no rollout explains it: the
follower did not move the control; 0 otherwise).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sglab.analysis.sequential import bounds, sequential_test
from sglab.core.errors import NO, OK, UNLIKE
from sglab.serving.follow import FOLLOWER
from sglab.serving.judge import usable
from sglab.serving.prometheus import Prometheus, selector
from sglab.serving.spec import ARM, REVISION, SHARED_CONFIG, JudgeSpec
from sglab.serving.windows import REQUESTS, Window, fetch_windows

SERVING, CONTROL = "serving", "control"
Status = Literal["holding", "below-zero", "no-data", "unlike-configs"]
# No data (a quiet night) is no alarm: a gain shown below zero fails the CronJob's Job (which pages), and so do
# unlike configs that no rollout explains (the control's follower did not move it to the stable's config).
EXIT_CODES: dict[str, int] = {"holding": OK, "below-zero": NO, "no-data": OK, "unlike-configs": UNLIKE}  # core.errors
SHOWN_CONFIGS = 4  # hashes named per arm in the sentence (they come from Prometheus)


@dataclass(frozen=True)
class ArmConfigs:
    """The shared-config hashes each arm's pods reported within the horizon, whether a canary did, and the
    hashes they report now (None: the horizon's)."""

    serving: frozenset[str]
    control: frozenset[str]
    canary: bool
    serving_now: frozenset[str] | None = None
    control_now: frozenset[str] | None = None

    @property
    def unlike(self) -> bool:
        """Both arms seen, and not one and the same config on both sides over the whole horizon."""
        return bool(self.serving and self.control) and (len(self.serving) > 1 or self.serving != self.control)

    @property
    def apart_now(self) -> bool:
        """Both arms report now, on different configs: a control its follower did not move."""
        serving = self.serving if self.serving_now is None else self.serving_now
        control = self.control if self.control_now is None else self.control_now
        return bool(serving and control) and serving != control


def _shown(hashes: frozenset[str]) -> str:
    names = sorted(h[:16] or "(no label)" for h in hashes)
    more = f" and {len(names) - SHOWN_CONFIGS} more" if len(names) > SHOWN_CONFIGS else ""
    return ", ".join(names[:SHOWN_CONFIGS]) + more


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
    configs: ArmConfigs | None = None

    @property
    def exit_code(self) -> int:
        if self.status == "unlike-configs" and self.configs is not None and (
                self.configs.canary or not self.configs.apart_now):
            return 0
        return EXIT_CODES[self.status]

    def sentence(self) -> str:
        if self.status == "unlike-configs" and self.configs is not None:
            c = self.configs
            said = (f"unlike configs: the serving pods ran shared config {_shown(c.serving)} and the standing "
                    f"control {_shown(c.control)} within the horizon (image, server flags, env, NCCL: the pods' "
                    "sglab/shared-config label), so the control is not the same server without speculation and "
                    "no gain is computed")
            if c.canary:
                return (f"{said}; a rollout is under way or ended within the horizon (the stable takes a new "
                        "shared config when the canary is promoted, the control after it, when its follower has "
                        "moved it and it has loaded): the live judge compared then")
            if not c.apart_now:
                return (f"{said}; the arms run the same config now (or one reports none, loading), and the horizon "
                        "still holds windows of another: compared again once they leave it")
            return (f"{said}; no canary runs, and the control was not moved to the stable's config: the log of "
                    f"the last Job of CronJob {FOLLOWER} says why (kubectl logs -l "
                    f"app.kubernetes.io/component=control-follower)")
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


def watch_report(windows: list[Window], spec: JudgeSpec, configs: ArmConfigs | None = None) -> WatchReport:
    """The report over `windows` (oldest first): serving vs control, unless `configs` says they ran unlike
    shared configs (then no gain: it would measure the config change, not speculation)."""
    if configs is not None and configs.unlike:
        return WatchReport("unlike-configs", 0, len(windows), None, None, None, None,
                           rollback_command=spec.rollback_command, configs=configs)
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


def arm_configs(prom: Prometheus, spec: JudgeSpec, *, now: float, range_s: float) -> ArmConfigs:
    """The shared-config labels of the serving revisions' and the control's request series over `range_s`, and
    now (Prometheus's lookback)."""
    by = f"{SHARED_CONFIG}, {REVISION}"

    def seen(labels: dict[str, str], over: bool) -> list[dict[str, str]]:
        series = f"{REQUESTS}{selector(labels)}"
        promql = f"group by ({by}) ({f'last_over_time({series}[{math.ceil(range_s)}s])' if over else series})"
        return [s.labels for s in prom.query(promql, now)]

    def configs(seen_labels: list[dict[str, str]], revision: str | None = None) -> frozenset[str]:
        return frozenset(s.get(SHARED_CONFIG, "") for s in seen_labels if revision in (None, s.get(REVISION)))

    candidate = {**spec.base_labels(), ARM: "candidate"}
    serving, control = seen(candidate, True), seen(spec.control_labels(), True)
    return ArmConfigs(serving=configs(serving, "stable"), control=configs(control),
                      canary=bool(configs(serving, "canary")),
                      serving_now=configs(seen(candidate, False), "stable"),
                      control_now=configs(seen(spec.control_labels(), False)))


def watch_once(prom: Prometheus, spec: JudgeSpec, *, now: float | None = None,
               horizon_windows: int | None = None) -> tuple[WatchReport, list[Window]]:
    """One look over the last horizon windows ending now (the CronJob's run, `sglab watch`)."""
    now = time.time() if now is None else now
    horizon = horizon_windows or spec.horizon_windows
    arms = {SERVING: spec.revision("stable"), CONTROL: spec.control_labels()}
    start = now - spec.settle_s - horizon * spec.window_s
    configs = arm_configs(prom, spec, now=now, range_s=now - start)
    windows = fetch_windows(prom, arms, start=start, now=now, window_s=spec.window_s, settle_s=spec.settle_s,
                            category_label=spec.category_label, http=spec.http_responses)
    return watch_report(windows, spec, configs), windows
