"""One interactive A/B test as it runs: the per-request samples, the live table and the result document;
a closed-loop test (`LiveRun`) or an open-loop one (`OpenLoopRun`, its subclass: the same document from real
rounds instead of pseudo-rounds).

An interactive run has no rounds: both arms run side by side for as long as the user lets them.
For the verdict's confidence interval we cut the run into fixed time windows ("pseudo-rounds",
`window_s` long, counted from the test start) and treat each window as one round in which both arms
ran; the window still in progress is left out while the test runs. A window's output tok/s counts the
tokens that arrived inside it (from each request's TTFT and inter-token gaps). The first `warmup_requests`
requests of each arm are kept but marked warm-up, as in `sglab bench`, and windows that overlap the
warm-up are no round (their requests keep round_index -1). A sample's concurrency level
is the number of users of its arm when it arrived, so changing the user count mid-test starts a new
level instead of mixing two loads.

An open-loop test (`OpenLoopRun`) runs the bench's interleaved schedule instead (sglab/ui/open_loop.py), so
its samples keep the level, round and warm-up the schedule gave them. A round counts once every arm finished its
segment of it; a round cut short by STOP is left out with its requests (nothing to pair it with).

How faithful the load was goes in the result's `loadgen.arrivals` per level (measured rounds):
arrivals the schedule placed, sent, `late` (started more than LATE_MS after their scheduled time: the
in-flight cap was full, or the load generator fell behind), `unsent` (the round ended before they could
start), the start lag's percentiles, and the realised arrival rate beside the schedule's own.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sglab.load.summary import arm_level_summary, round_sample
from sglab.schema.result import (
    AcceptLength,
    ArmInfo,
    ArmLevelSummary,
    LevelResult,
    LoadGen,
    RequestSample,
    RoundSample,
    RunResult,
    Target,
)

if TYPE_CHECKING:  # open_loop imports gevent and Locust; this module must not
    from sglab.ui.open_loop import OpenLoopDriver

BASELINE = "baseline"
CANDIDATE = "candidate"
DEFAULT_WINDOW_S = 10.0


@dataclass
class ArmServerCounter:
    """Server-side accept length: the cumulative counter at the test start and its latest reading."""

    start: float | None = None
    latest: float | None = None
    mean: float | None = None


@dataclass
class LiveRun:
    """Samples of one test (from Locust's test_start to the next one), thread- and greenlet-safe."""

    run_id: str
    stack: str
    arms: list[ArmInfo]
    started_at: str
    started_monotonic_s: float
    window_s: float = DEFAULT_WINDOW_S
    warmup_requests: int = 0
    policy: dict = field(default_factory=dict)
    load_plan: dict = field(default_factory=dict)
    confounds: list[dict] = field(default_factory=list)
    git_commit: str | None = None
    target_kind: str = "urls"
    urls_source: str | None = None
    stopped_monotonic_s: float | None = None
    finished_at: str | None = None
    server_accept_length: dict[str, float | None] = field(default_factory=dict)
    samples: list[RequestSample] = field(default_factory=list)
    _seen_per_arm: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def running(self) -> bool:
        return self.stopped_monotonic_s is None

    def elapsed_s(self, now_s: float | None = None) -> float:
        if self.stopped_monotonic_s is not None:
            end = self.stopped_monotonic_s
        else:
            end = now_s if now_s is not None else time.monotonic()
        return max(0.0, end - self.started_monotonic_s)

    def add(self, sample: RequestSample, *, level: int, received_monotonic_s: float | None = None) -> RequestSample:
        """Record one request; re-times it against this run's start and assigns level, window, warm-up."""
        received = received_monotonic_s if received_monotonic_s is not None else time.monotonic()
        e2e_s = (sample.e2e_ms or 0.0) / 1000.0
        start_s = max(0.0, received - self.started_monotonic_s - e2e_s)
        with self._lock:
            seen = self._seen_per_arm.get(sample.arm, 0)
            self._seen_per_arm[sample.arm] = seen + 1
            warmup = seen < self.warmup_requests
            recorded = sample.model_copy(update={
                "level": max(1, level),
                "start_s": round(start_s, 6),
                "round_index": -1 if warmup else self.window_of(start_s + e2e_s),
                "warmup": warmup,
            })
            self.samples.append(recorded)
        return recorded

    def window_of(self, end_s: float) -> int:
        return int(end_s // self.window_s)

    def first_measured_window(self, samples: list[RequestSample]) -> int:
        """The first window that starts after every warm-up request ended (earlier ones are no round)."""
        ends = [s.start_s + (s.e2e_ms or 0.0) / 1000.0 for s in samples if s.warmup]
        return math.ceil(max(ends) / self.window_s) if ends else 0

    def stop(self, finished_at: str, at_monotonic_s: float | None = None) -> None:
        if self.stopped_monotonic_s is None:
            self.stopped_monotonic_s = at_monotonic_s if at_monotonic_s is not None else time.monotonic()
            self.finished_at = finished_at

    def snapshot(self) -> list[RequestSample]:
        with self._lock:
            return list(self.samples)

    # ---- the result document -------------------------------------------------------------

    def closed_windows(self, now_s: float | None = None) -> int:
        """Windows that count as rounds: all finished ones, plus a last partial one of at least half a window
        once the test stopped."""
        elapsed = self.elapsed_s(now_s)
        full = int(elapsed // self.window_s)
        partial_counts = not self.running and elapsed - full * self.window_s >= self.window_s / 2
        return full + 1 if partial_counts else full

    def to_result(self, now_s: float | None = None, *, as_if_stopped: bool = False) -> RunResult:
        """The run as a sglab result document (kind "interactive"); complete once the test stopped.

        `as_if_stopped` judges a running test as if it ended now (the tab's live verdict); documents
        exported while the test runs are marked incomplete.
        """
        samples = self.snapshot()
        complete = (not self.running or as_if_stopped) and bool(samples)
        reason = self.incomplete_reason(samples)
        if reason is not None:
            complete = False
        return RunResult(
            run_id=self.run_id,
            stack=self.stack,
            kind="interactive",
            started_at=self.started_at,
            finished_at=self.finished_at,
            complete=complete,
            incomplete_reason=None if complete else reason or (
                "interactive test still running when exported" if self.running else "no requests recorded"),
            git_commit=self.git_commit,
            target=Target(kind=self.target_kind, urls={a.name: a.url for a in self.arms if a.url},
                          urls_source=self.urls_source),
            arms=self.arms,
            config_hash={a.name: a.config_hash for a in self.arms},
            confounds=self.confounds,
            live_mismatches=[m for a in self.arms for m in a.live_mismatches],
            load_plan=self.recorded_plan(),
            policy=self.policy,
            levels=self.levels(samples, now_s),
            loadgen=self.loadgen(),
        )

    def incomplete_reason(self, samples: list[RequestSample]) -> str | None:
        """Why the run cannot be complete even once stopped (None: stopping completes it)."""
        return None

    def recorded_plan(self) -> dict:
        return {**self.load_plan, "interactive": True, "pseudo_round_window_s": self.window_s,
                "warmup_requests": self.warmup_requests}

    def loadgen(self) -> LoadGen:
        return LoadGen()

    def levels(self, samples: list[RequestSample], now_s: float | None = None) -> list[LevelResult]:
        """One level per user count, its requests cut into the closed pseudo-round windows."""
        closed = self.closed_windows(now_s)
        levels: list[LevelResult] = []
        for level in sorted({s.level for s in samples}):
            in_level = [s for s in samples if s.level == level]
            first = self.first_measured_window(in_level)
            counted = [s if s.warmup or s.round_index >= first else s.model_copy(update={"round_index": -1})
                       for s in in_level if s.warmup or s.round_index < closed]
            streamed = [s for s in in_level if not s.warmup]
            levels.append(self._level_result(level, counted, streamed, self.elapsed_s(now_s)))
        return levels

    def _level_result(self, level: int, samples: list[RequestSample], streamed: list[RequestSample],
                      elapsed_s: float) -> LevelResult:
        """`samples` are the requests that count; `streamed` also has those ending in the open window,
        whose tokens still arrived inside the counted windows."""
        measured = [s for s in samples if not s.warmup and s.round_index >= 0]
        windows = sorted({s.round_index for s in measured})
        arms: dict[str, ArmLevelSummary] = {}
        rounds: list[RoundSample] = []
        for position, arm in enumerate(a.name for a in self.arms):
            arm_samples = [s for s in measured if s.arm == arm]
            if not arm_samples:
                continue
            arm_rounds = []
            for w in windows:
                start_s, duration_s = w * self.window_s, min(self.window_s, elapsed_s - w * self.window_s)
                sample = round_sample([s for s in arm_samples if s.round_index == w], level=level, round_index=w,
                                      position=position, arm=arm, warmup=False, started_at_s=start_s,
                                      duration_s=duration_s, server_accept_length=None)
                tokens = tokens_between([s for s in streamed if s.arm == arm], start_s, start_s + duration_s)
                arm_rounds.append(sample.model_copy(update={
                    "output_tokens": tokens, "output_tok_per_s": tokens / duration_s if duration_s > 0 else None}))
            rounds += [r for r in arm_rounds if r.requests]
            arms[arm] = with_server_accept(arm_level_summary(arm_samples, arm_rounds),
                                           self.server_accept_length.get(arm))
        return LevelResult(concurrency=level, arms=arms, rounds=rounds, requests=samples)


def token_times_s(sample: RequestSample) -> list[float]:
    """When each output token arrived, in seconds since the run started (from TTFT and the gaps)."""
    if sample.error is not None or sample.ttft_ms is None or sample.output_tokens < 1:
        return []
    t = sample.start_s + sample.ttft_ms / 1000.0
    times = [t]
    for gap_ms in sample.itl_ms:
        t += gap_ms / 1000.0
        times.append(t)
    return times


def tokens_between(samples: list[RequestSample], start_s: float, end_s: float) -> int:
    """Output tokens that arrived in [start_s, end_s): a window's aggregate throughput, not quantised by
    whole requests (at concurrency 1 a 10 s window holds only a handful of requests)."""
    return sum(1 for s in samples for t in token_times_s(s) if start_s <= t < end_s)


def with_server_accept(summary: ArmLevelSummary, server_accept_length: float | None) -> ArmLevelSummary:
    """The server's live counter goes beside the client-side mean (interactive runs have no per-round reads)."""
    if server_accept_length is None:
        return summary
    client = summary.accept_length.client_mean if summary.accept_length else None
    return summary.model_copy(update={"accept_length": AcceptLength(client_mean=client,
                                                                     server_mean=server_accept_length)})


# ---- an open-loop test: the schedule's real rounds, paired -------------------------------------------------

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

    def loadgen(self) -> LoadGen:
        return LoadGen(tool="locust", locust_version=self.locust_version, user_class="OpenLoopUser",
                       profile=self.profile, level_label=self.level_label, users=self.users,
                       users_from=self.users_from, late_threshold_ms=LATE_MS,
                       arrivals={str(level): self.arrivals(level) for level in self.level_order()})

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
