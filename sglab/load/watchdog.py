"""Is every arm still a server? A greenlet that watches them while a bench runs.

A paired A/B run cannot go on without one of its arms, and a dead or frozen arm must not be
mistaken for a slow one (a SIGKILLed candidate used to be judged `reject` on connection-refused
"requests"; a SIGSTOPped one held the bench for its whole request timeout). Three signs, checked
every POLL_S:

- a simulator we started has exited (its process, no guessing);
- `/health` has not answered 200 for HEALTH_GRACE_S in a row (refused, 5xx or no answer in
  HEALTH_REQUEST_TIMEOUT_S: a stopped process still accepts connections but never replies);
- the active arm has requests on the wire but nothing arrived (no chunk, no request ended) for the
  plan's stall timeout (`stall_timeout_s`), counted from the latest request start: a server whose
  /health lies.

The first sign found is reported once through `on_failure(arm, what)`; the runner ends the run as
invalid. The progress board is per process: in distributed mode only the first two signs apply.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable

import gevent
import httpx

POLL_S = 0.25
HEALTH_EVERY_S = 1.0
HEALTH_REQUEST_TIMEOUT_S = 2.0
HEALTH_GRACE_S = 10.0
# A tenth of the request timeout, at least STALL_FLOOR_S: 20 s with not a single chunk from any of an
# arm's in-flight requests is no working server (the first token of 64 long prompts arrives well before).
STALL_FLOOR_S = 20.0
STALL_FRACTION_OF_REQUEST_TIMEOUT = 0.1


def stall_timeout_s(request_timeout_s: float) -> float | None:
    """The plan's stall timeout; None when the request timeout is shorter and catches a stall first."""
    stall = max(STALL_FLOOR_S, STALL_FRACTION_OF_REQUEST_TIMEOUT * request_timeout_s)
    return stall if stall < request_timeout_s else None


def touch(environment, arm: str) -> None:
    """A chunk arrived or a request of `arm` ended: the arm is making progress."""
    board = environment.__dict__.setdefault("sglab_arm_progress", {})
    board[arm] = time.monotonic()


def last_progress(environment, arm: str) -> float | None:
    return environment.__dict__.get("sglab_arm_progress", {}).get(arm)


def on_wire(environment, arm: str, delta: int) -> None:
    """Requests of `arm` actually sent and not ended (an open-loop request waiting for its time is not)."""
    board = environment.__dict__.setdefault("sglab_arm_on_wire", {})
    board[arm] = max(0, board.get(arm, 0) + delta)
    if delta > 0:
        touch(environment, arm)  # the stall clock runs from the request's start, not the arm's idle time


def wire_count(environment, arm: str) -> int:
    return environment.__dict__.get("sglab_arm_on_wire", {}).get(arm, 0)


def exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"exited ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"exited (signal {-returncode})"
    return f"exited with code {returncode}"


class ArmWatch:
    def __init__(self, environment, urls: dict[str, str], processes: dict[str, subprocess.Popen], *,
                 stall_s: float | None, on_failure: Callable[[str, str], None],
                 active: Callable[[], tuple[str | None, int]]) -> None:
        self.environment = environment
        self.urls = urls
        self.processes = processes
        self.stall_s = stall_s
        self.on_failure = on_failure
        self.active = active  # -> (active arm, requests in flight)
        self.unhealthy_since: dict[str, float] = {}
        self.last_health: dict[str, str] = {}
        self._next_health = 0.0
        self._greenlet: gevent.Greenlet | None = None
        # one client for the whole run: a new httpx client per poll builds an SSL context (tens of ms of
        # CPU in the load generator's only thread), which showed up as jitter in the measured streams
        self._client: httpx.Client | None = None

    def start(self) -> "ArmWatch":
        self._client = httpx.Client(timeout=HEALTH_REQUEST_TIMEOUT_S)
        self._greenlet = gevent.spawn(self._loop)
        return self

    def stop(self) -> None:
        poll, self._greenlet = self._greenlet, None
        if poll is not None and poll is not gevent.getcurrent():
            # dead before its client closes: a poll already due to resume would otherwise use a closed client
            poll.kill(block=True, timeout=HEALTH_REQUEST_TIMEOUT_S + 1)
        if self._client is not None:
            self._client.close()
            self._client = None

    def _loop(self) -> None:
        while True:
            found = self.check()
            if found is not None:
                self.on_failure(*found)
                return
            gevent.sleep(POLL_S)

    def check(self) -> tuple[str, str] | None:
        for arm, proc in self.processes.items():
            if proc.poll() is not None:
                return arm, exit_description(proc.returncode)
        now = time.monotonic()
        if now >= self._next_health:
            self._next_health = now + HEALTH_EVERY_S
            for arm, url in self.urls.items():
                found = self._health(arm, url)
                if found is not None:
                    return found
        return self._stalled(time.monotonic())

    def _health(self, arm: str, url: str) -> tuple[str, str] | None:
        try:
            client = self._client or httpx.Client(timeout=HEALTH_REQUEST_TIMEOUT_S)
            self._client = client
            status = client.get(url.rstrip("/") + "/health").status_code
            problem = None if status == 200 else f"HTTP {status}"
        except httpx.HTTPError as exc:
            problem = type(exc).__name__
        now = time.monotonic()
        if problem is None:
            self.unhealthy_since.pop(arm, None)
            return None
        since = self.unhealthy_since.setdefault(arm, now)
        if now - since >= HEALTH_GRACE_S:
            return arm, f"stopped answering /health for {now - since:.0f} s (last: {problem})"
        return None

    def _stalled(self, now: float) -> tuple[str, str] | None:
        if self.stall_s is None:
            return None
        arm, in_flight = self.active()
        if arm is None or in_flight == 0:
            return None
        last = last_progress(self.environment, arm)
        if last is not None and now - last >= self.stall_s:
            return arm, f"made no progress for {now - last:.0f} s with {in_flight} request(s) in flight"
        return None
