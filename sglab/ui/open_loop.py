"""Open-loop profiles (rate, trace) in the web UI: the bench's interleaved schedule, started by Locust's START.

Locust's web UI drives a user count; an open-loop run needs arrivals on the profile's seeded schedule
instead. `sglab ui --profile rate|trace` therefore loads `open_loop_plugin.py`, which gives Locust
- `OpenLoopShape`, a LoadTestShape: the form hides users and spawn rate, and the shape keeps the
  profile's in-flight cap of users (`load.rate.max-in-flight` / `load.trace.max-in-flight`) running
  until the schedule is done, then stops the test (which saves it);
- `OpenLoopUser`, the bench's `ArmUser` (it follows the phase: which arm, level, round, prompt offset)
  that also reports how late each request started against its scheduled arrival.

`OpenLoopDriver` walks the plan as `sglab bench` does (sglab/load/runner.py): per level a warm-up
segment per arm, then rounds whose arm order comes from the seed; each segment opens the collector's
gate with the profile's `Pacing` for (level, round), so every arm of a round gets the same prompts at
the same arrival offsets, and closes it at the round's duration or quota. Between segments in-flight
requests finish, so arms never overlap. An arrival that finds every user busy starts late (the cap
holds): it is counted, and so is one the round ended before it could start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import gevent
from locust import LoadTestShape

from sglab.load.collector import get_collector
from sglab.load.schedule import prompt_offset, round_orders
from sglab.load.summary import round_sample
from sglab.load.users import ArmUser, SegmentPacing, get_pacing, get_settings, set_pacing
from sglab.schema.result import RoundSample

SETTLE_TIMEOUT_S = 30.0
POLL_S = 0.01


@dataclass
class Segment:
    """One arm's share of one round (round_index -1: the warm-up), and when its requests started."""

    level: int
    round_index: int
    position: int
    arm: str
    warmup: bool
    opened_epoch: float
    pacing: object
    serial: int
    scheduled: int = 0  # arrivals the schedule put inside the segment
    starts: list[tuple[int, float, float]] = field(default_factory=list)  # (index, scheduled, actual) offsets
    sample: RoundSample | None = None
    complete: bool = False

    @property
    def lags_s(self) -> list[float]:
        return [max(0.0, actual - scheduled) for _, scheduled, actual in self.starts]


class OpenLoopDriver:
    """The schedule of one open-loop test in the UI's Locust process (one greenlet)."""

    def __init__(self, environment, run, plan, profile, arm_names: list[str], gated_levels: list[int]) -> None:
        self.environment = environment
        self.run = run  # sglab.ui.live.OpenLoopRun: gets the samples and the segments
        self.plan = plan
        self.profile = profile
        self.arm_names = arm_names
        self.gated_levels = list(gated_levels)
        self.collector = get_collector(environment)
        self.stopped = False
        self.finished = False
        self.failed: str | None = None
        self.current: Segment | None = None
        self.level: int | None = None
        self.greenlet = None

    # ---- what the shape and the tab ask -----------------------------------------------------
    def users(self) -> int:
        """Users the shape keeps running: the profile's in-flight cap at the current (or first) level."""
        return self.profile.users_for(self.level if self.level is not None else self.profile.levels()[0])

    def rounds_at(self, level: int) -> int:
        """As sglab bench: load.rounds where the policy gates, load.ungated-rounds elsewhere."""
        plan = self.plan
        if plan.ungated_rounds is None or level in self.gated_levels:
            return plan.rounds
        return plan.ungated_rounds

    def position(self) -> str:
        if self.failed:
            return f"stopped: {self.failed}"
        if self.finished:
            return "schedule done"
        seg = self.current
        if seg is None:
            return "starting"
        step = "warm-up" if seg.warmup else f"round {seg.round_index + 1}/{self.rounds_at(seg.level)}"
        return f"now: {step}, {seg.arm}"

    # ---- control ----------------------------------------------------------------------------
    def start(self) -> None:
        self.environment.sglab_open_loop = self
        self.greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """The test stopped (STOP, reset, shutdown): no new request is sent; the round in progress is unpaired."""
        self.stopped = True
        self._close()
        if getattr(self.environment, "sglab_open_loop", None) is self:
            self.environment.sglab_open_loop = None

    def _close(self) -> None:
        """Close the gate, unless a newer schedule (RESET started one) owns it now."""
        if getattr(self.environment, "sglab_open_loop", None) not in (self, None):
            return
        self.collector.close()
        pacing = get_pacing(self.environment)
        if pacing is not None:
            pacing.closed.set()

    def _run(self) -> None:
        self.collector.set_phase(open=False, run_started_epoch=self.run.started_epoch)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S  # after RESET: the old schedule's requests end first
        while self.collector.in_flight and time.monotonic() < deadline and not self.stopped:
            gevent.sleep(POLL_S)
        try:
            for level in self.profile.levels():
                if self.stopped:
                    break
                self.level = level
                if not self._wait_for_users(self.profile.users_for(level)):
                    break
                if self.plan.warmup_requests:
                    for position, arm in enumerate(self.arm_names):
                        if self.stopped:
                            break
                        self._segment(level, -1, position, arm, warmup=True)
                orders = round_orders(self.arm_names, self.plan.seed, level, self.rounds_at(level))
                for round_index, order in enumerate(orders):
                    for position, arm in enumerate(order):
                        if self.stopped:
                            break
                        self._segment(level, round_index, position, arm, warmup=False)
        except Exception as exc:  # a broken schedule ends the test with the reason, never a silent hang
            self.failed = f"{type(exc).__name__}: {exc}"
            import logging

            logging.getLogger("sglab.ui").exception("sglab: the open-loop schedule failed")
        finally:
            self._close()
            self.current = None
            self.finished = True

    def _wait_for_users(self, count: int) -> bool:
        runner = self.environment.runner
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not self.stopped and time.monotonic() < deadline:
            if runner is not None and runner.user_count >= count:
                return True
            gevent.sleep(POLL_S)
        if not self.stopped:
            self.failed = f"Locust did not reach the {count} users of the in-flight cap"
        return False

    def _segment(self, level: int, round_index: int, position: int, arm: str, *, warmup: bool) -> None:
        plan = self.plan
        quota = plan.warmup_requests if warmup else plan.round_requests
        duration = None if warmup or plan.round_requests is not None else plan.round_duration_s
        pacing = self.profile.pacing(level, round_index)
        scheduled = pacing.requests()  # a trace: its length
        if scheduled is not None and not warmup:
            quota = scheduled if quota is None else min(quota, scheduled)
        count = len(get_settings(self.environment).prompts)
        offset = self.profile.prompt_offset(level, round_index, count)
        offset = prompt_offset(plan.seed, level, round_index, count) if offset is None else offset
        started = time.time()
        serial = self.collector.phase.serial + 1
        seg = Segment(level, round_index, position, arm, warmup, started, pacing, serial)
        self.current = seg
        self.run.add_segment(seg)
        set_pacing(self.environment, SegmentPacing(serial, started, pacing))
        self.collector.set_phase(level=level, round_index=round_index, warmup=warmup, arm=arm,
                                 prompt_offset=offset, request_quota=quota, open=True)
        closed_at = None
        while not self.stopped:
            if duration is not None and closed_at is None and time.time() - started >= duration:
                self._close()
                closed_at = time.time()
            exhausted = quota is not None and self.collector.issued(arm) >= quota
            if self.collector.in_flight == 0 and (not self.collector.phase.open or exhausted):
                break
            gevent.sleep(POLL_S)
        self._close()
        seg.scheduled = _scheduled(pacing, quota, None if closed_at is None else closed_at - started)
        samples = self.run.segment_samples(seg)
        finished = max([started] + [self.run.started_epoch + s.start_s + (s.e2e_ms or 0) / 1000 for s in samples])
        seg.sample = round_sample(samples, level=level, round_index=round_index, position=position, arm=arm,
                                  warmup=warmup, started_at_s=started - self.run.started_epoch,
                                  duration_s=finished - started, server_accept_length=None,
                                  window_s=(closed_at - started) if closed_at is not None else None)
        seg.complete = not self.stopped
        seg.sample.complete = seg.complete

    def record_start(self, serial: int, index: int, scheduled_offset_s: float, actual_epoch: float) -> None:
        seg = self.current
        if seg is not None and seg.serial == serial:
            seg.starts.append((index, scheduled_offset_s, actual_epoch - seg.opened_epoch))


def _scheduled(pacing, quota: int | None, window_s: float | None) -> int:
    """Arrivals the schedule placed in the segment: its quota, or those due before the gate closed."""
    if window_s is None:
        return quota or 0
    n = 0
    while (quota is None or n < quota) and pacing.start_offset_s(n) < window_s:
        n += 1
    return n


class OpenLoopUser(ArmUser):
    """The bench's ArmUser, reporting each request's start against its scheduled arrival to the driver."""

    def wait_for_start(self, ticket, index):
        pacing = get_pacing(self.environment)
        started = super().wait_for_start(ticket, index)
        driver = getattr(self.environment, "sglab_open_loop", None)
        if started is not None and driver is not None and pacing is not None and pacing.serial == ticket.serial:
            offset = pacing.pacing.start_offset_s(index)
            if offset is not None:
                driver.record_start(ticket.serial, index, offset, started.started_epoch)
        return started


class OpenLoopShape(LoadTestShape):
    """Users = the profile's in-flight cap while the schedule runs; None (stop, then save) once it is done.

    `use_common_options`: Locust's form keeps its users and spawn-rate fields, prefilled by `sglab ui` with the
    cap; the A/B tab refuses a /swarm whose values differ (sglab/ui/web_tab.py), so they cannot change the load.
    """

    use_common_options = True

    def tick(self):
        environment = self.runner.environment if self.runner is not None else None
        session = getattr(environment, "sglab_ui", None)
        if session is None:
            return None
        driver = session.open_loop_driver()
        if driver is not None and driver.finished:
            return None
        users = driver.users() if driver is not None else session.open_loop_users()
        return users, float(min(users, 100))  # Locust warns above 100 users/s
