"""One open-loop test of the web UI as a result: real rounds (the driver's segments), paired, and its arrivals.

Unlike a closed-loop UI test (both arms side by side, cut into pseudo-round windows: sglab/ui/live.py),
an open-loop test runs the bench's interleaved schedule (sglab/ui/open_loop.py), so its samples keep
the level, round and warm-up the schedule gave them. A round counts once every arm finished its
segment of it; a round cut short by STOP is left out with its requests (nothing to pair it with).

How faithful the load was goes in the result's `loadgen.arrivals` per level (measured rounds):
arrivals the schedule placed, sent, `late` (started more than LATE_MS after their scheduled time: the
in-flight cap was full, or the load generator fell behind), `unsent` (the round ended before they could
start), the start lag's percentiles, and the realised arrival rate beside the schedule's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sglab.load.summary import arm_level_summary
from sglab.schema.result import LevelResult, RequestSample
from sglab.ui.live import LiveRun, with_server_accept

if TYPE_CHECKING:  # open_loop imports gevent and Locust; this module must not
    from sglab.ui.open_loop import OpenLoopDriver

LATE_MS = 20.0  # later than this after its scheduled arrival, a request did not arrive on schedule


def level_text(profile: str, level: int) -> str:
    """How the tab names a level of an open-loop profile: '4 req/s', 'trace'."""
    return "trace" if profile == "trace" else f"{level} req/s"


@dataclass
class OpenLoopRun(LiveRun):
    started_epoch: float = 0.0
    profile: str = "rate"
    level_label: str = "rate (req/s)"
    users: int = 0
    users_from: str = ""
    locust_version: str = ""
    segments: list = field(default_factory=list)  # sglab.ui.open_loop.Segment, in schedule order
    driver: OpenLoopDriver | None = None

    def add(self, sample: RequestSample, *, level: int = 0, received_monotonic_s: float | None = None) -> RequestSample:
        """The schedule already gave the sample its level, round and warm-up; kept as it is. A request that started
        before this run (one of a schedule RESET replaced) is not this run's."""
        if sample.start_s < 0:
            return sample
        with self._lock:
            self.samples.append(sample)
        return sample

    def add_segment(self, segment) -> None:
        with self._lock:
            self.segments.append(segment)

    def segment_samples(self, segment) -> list[RequestSample]:
        return [s for s in self.snapshot() if s.arm == segment.arm and s.level == segment.level
                and s.round_index == segment.round_index and s.warmup == segment.warmup]

    def stop(self, finished_at: str, at_monotonic_s: float | None = None) -> None:
        if self.driver is not None:
            self.driver.stop()
        super().stop(finished_at, at_monotonic_s)

    # ---- pairing -------------------------------------------------------------------------------
    def kept_segments(self, level: int) -> list:
        """The level's complete warm-ups and the rounds every arm completed."""
        with self._lock:
            done = [s for s in self.segments if s.level == level and s.complete and s.sample is not None]
        arms = {a.name for a in self.arms}
        have: dict[int, set[str]] = {}
        for seg in done:
            if not seg.warmup:
                have.setdefault(seg.round_index, set()).add(seg.arm)
        paired = {i for i, got in have.items() if got >= arms}
        return [seg for seg in done if seg.warmup or seg.round_index in paired]

    def level_order(self) -> list[int]:
        with self._lock:
            return list(dict.fromkeys(s.level for s in self.segments))

    def paired_rounds(self, level: int) -> int:
        return len({seg.round_index for seg in self.kept_segments(level) if not seg.warmup})

    # ---- the result document (LiveRun's hooks) ------------------------------------------------
    def levels(self, samples: list[RequestSample], now_s: float | None = None) -> list[LevelResult]:
        out = []
        for level in self.level_order():
            kept = self.kept_segments(level)
            if not kept:
                continue
            keys = {(seg.arm, seg.round_index, seg.warmup) for seg in kept}
            requests = sorted((s for s in samples if s.level == level and (s.arm, s.round_index, s.warmup) in keys),
                              key=lambda s: s.start_s)
            rounds = [seg.sample for seg in kept]
            arms = {}
            for info in self.arms:
                arm_rounds = [r for r in rounds if r.arm == info.name]
                if arm_rounds:
                    summary = arm_level_summary([s for s in requests if s.arm == info.name], arm_rounds)
                    arms[info.name] = with_server_accept(summary, self.server_accept_length.get(info.name))
            out.append(LevelResult(concurrency=level, arms=arms, rounds=rounds, requests=requests))
        return out

    def incomplete_reason(self, samples: list[RequestSample]) -> str | None:
        failed = getattr(self.driver, "failed", None)
        return f"the open-loop schedule stopped: {failed}" if failed else None

    def recorded_plan(self) -> dict:
        return {**self.load_plan, "interactive": True, "warmup_requests": self.warmup_requests}

    def loadgen(self) -> dict:
        return {"tool": "locust", "locust_version": self.locust_version, "user_class": "OpenLoopUser",
                "profile": self.profile, "level_label": self.level_label, "users": self.users,
                "users_from": self.users_from, "late_threshold_ms": LATE_MS,
                "arrivals": {str(level): self.arrivals(level) for level in self.level_order()}}

    # ---- how faithful the arrivals were --------------------------------------------------------
    def arrivals(self, level: int, arm: str | None = None, *, include_running: bool = False) -> dict:
        """Arrival accuracy over the level's measured rounds (one arm's, or all; `include_running`: every
        measured segment so far, for the live tab)."""
        if include_running:
            with self._lock:
                segs = [s for s in self.segments if s.level == level and not s.warmup]
        else:
            segs = [s for s in self.kept_segments(level) if not s.warmup]
        segs = [s for s in segs if arm is None or s.arm == arm]
        lags_ms = np.asarray([lag * 1000 for s in segs for lag in s.lags_s], dtype=float)
        sent = int(lags_ms.size)
        scheduled = sum(s.scheduled for s in segs if s.sample is not None) + \
            sum(len(s.starts) for s in segs if s.sample is None)  # a running segment: what it sent so far
        p50, p99 = (np.percentile(lags_ms, [50, 99]) if sent else (0.0, 0.0))
        return {
            "scheduled": scheduled, "sent": sent, "late": int((lags_ms > LATE_MS).sum()),
            "unsent": max(0, scheduled - sent),
            "lag_ms_p50": round(float(p50), 3), "lag_ms_p99": round(float(p99), 3),
            "lag_ms_max": round(float(lags_ms.max()), 3) if sent else 0.0,
            "schedule_rate_per_s": _rate(segs, planned=True), "realised_rate_per_s": _rate(segs, planned=False),
        }


def _rate(segments, *, planned: bool) -> float | None:
    """Arrivals per second over the segments: (n - 1) gaps over their span, pooled (the schedule's offsets of
    the requests sent, or their real starts)."""
    gaps, span = 0, 0.0
    for seg in segments:
        times = sorted(s[1] if planned else s[2] for s in seg.starts)
        if len(times) >= 2:
            gaps += len(times) - 1
            span += times[-1] - times[0]
    return round(gaps / span, 4) if span > 0 else None


def arrivals_text(stats: dict) -> str:
    """'late 0/60, unsent 0, lag p99 3 ms' for the tab."""
    text = f"late {stats['late']}/{stats['sent']}"
    if stats["unsent"]:
        text += f", unsent {stats['unsent']}"
    return text + f", lag p99 {stats['lag_ms_p99']:.0f} ms"
