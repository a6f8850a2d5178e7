"""Locust master/worker plumbing for `sglab bench --workers N`, and the local worker processes it starts.

The master owns the schedule: it sends the run settings and each phase (level, round, arm, quota)
to every worker as Locust custom messages; a worker reports `idle` (with its samples of that phase)
once its gate is closed or its quota is used and no request is in flight.

Only expected workers count: a worker proves it is one of ours by sending the run's token
(WORKER_TOKEN_ENV, generated per bench run; in a cluster, shared by the master and worker pods) in a
HELLO_MESSAGE. The master ignores the stats reports, samples and idle reports of any other worker,
leaves it out of phases and quotas, and asks it to quit.

The workers on this machine (`LocalWorkers`) are plain `locust --worker` processes running the project's
locustfile, so the same code path scales to workers on other machines (or pods) pointed at the master. N is
capped (one per usable core, at most sglab.core.children.MAX_LOCUST_WORKERS); the workers are started through
sglab.core.children, so they end with the bench however it ends, and starting them gives way to a stop request
(SIGTERM) between any two steps.
"""

from __future__ import annotations

import hmac
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gevent

from sglab.core.children import spawn, stop_all, worker_count_problem
from sglab.core.paths import project_root
from sglab.load.collector import (IDLE_MESSAGE, PHASE_MESSAGE, SETTINGS_MESSAGE, Phase, get_collector,
                                  is_worker)
from sglab.load.settings import RUNNER_ENV
from sglab.load.settings import LoadSettings

WATCH_INTERVAL_S = 0.02
WORKER_TOKEN_ENV = "SGLAB_WORKER_TOKEN"
HELLO_MESSAGE = "sglab_hello"

log = logging.getLogger("sglab.load")


def on_init(environment) -> None:
    runner = environment.runner
    if runner is None:
        return
    if is_worker(environment):
        _install_worker(environment)
    elif type(runner).__name__ == "MasterRunner" and os.environ.get(WORKER_TOKEN_ENV):
        ExpectedWorkers.install(environment, os.environ[WORKER_TOKEN_ENV])


class _ReportsFromExpected:
    """Stands in for `events.worker_report` on the master: reports of unexpected workers reach no listener."""

    def __init__(self, hook, gate: "ExpectedWorkers") -> None:
        self.hook = hook
        self.gate = gate

    def add_listener(self, handler):
        return self.hook.add_listener(handler)

    def remove_listener(self, handler) -> None:
        self.hook.remove_listener(handler)

    def fire(self, *, client_id, **kwargs):
        if self.gate.accepts(client_id):
            return self.hook.fire(client_id=client_id, **kwargs)
        return None


class ExpectedWorkers:
    """The master's list of workers that said hello with the run's token."""

    def __init__(self, environment, token: str) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.token = token
        self.ids: set[str] = set()
        self.refused: set[str] = set()
        self.runner.register_message(HELLO_MESSAGE, self._on_hello)
        events = environment.events
        events.worker_report = _ReportsFromExpected(events.worker_report, self)

    @classmethod
    def install(cls, environment, token: str) -> "ExpectedWorkers":
        gate = getattr(environment, "sglab_expected_workers", None)
        if gate is None:
            gate = cls(environment, token)
            environment.sglab_expected_workers = gate
        return gate

    def _on_hello(self, environment, msg, **_kw) -> None:
        given = str((msg.data or {}).get("token", ""))
        if hmac.compare_digest(given.encode(), self.token.encode()):
            self.ids.add(msg.node_id)
        else:
            self._refuse(msg.node_id)

    def accepts(self, node_id: str) -> bool:
        if node_id in self.ids:
            return True
        self._refuse(node_id)
        return False

    def _refuse(self, node_id: str) -> None:
        if node_id in self.refused:
            return
        self.refused.add(node_id)
        log.warning("ignoring Locust worker %s: it did not present this run's worker token", node_id)
        try:
            from locust.rpc import Message

            self.runner.server.send_to_client(Message("quit", None, node_id))
        except Exception:  # already gone
            pass


def _install_worker(environment) -> None:
    runner = environment.runner
    collector = get_collector(environment)
    state = {"reported": -1}

    def on_settings(environment, msg, **_kw):
        from sglab.load.users import set_settings

        set_settings(environment, LoadSettings.from_message(msg.data))

    def on_phase(environment, msg, **_kw):
        data = dict(msg.data)
        collector.phase = Phase(**data)
        collector._issued = {}

    runner.register_message(SETTINGS_MESSAGE, on_settings)
    runner.register_message(PHASE_MESSAGE, on_phase)
    token = os.environ.get(WORKER_TOKEN_ENV)
    if token:
        runner.send_message(HELLO_MESSAGE, {"token": token})

    def watch():
        while True:
            phase = collector.phase
            if phase.serial != state["reported"] and phase.serial > 0 and collector.in_flight == 0:
                exhausted = phase.request_quota is not None and phase.arm is not None and \
                    collector.issued(phase.arm) >= phase.request_quota
                if not phase.open or exhausted:
                    state["reported"] = phase.serial
                    runner.send_message(IDLE_MESSAGE, {"serial": phase.serial, "samples": collector.take_outbox()})
            gevent.sleep(WATCH_INTERVAL_S)

    gevent.spawn(watch)


class MasterControl:
    """The master side: broadcast phases, collect idle reports and samples."""

    def __init__(self, environment, token: str) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.collector = get_collector(environment)
        self.expected = ExpectedWorkers.install(environment, token)
        self.idle: dict[int, set[str]] = {}
        self.runner.register_message(IDLE_MESSAGE, self._on_idle)

    def _on_idle(self, environment, msg, **_kw):
        if not self.expected.accepts(msg.node_id):
            return
        for raw in msg.data.get("samples", ()):
            self.collector.record_forwarded(raw)  # the sample and its answer's text (output parity)
        self.idle.setdefault(msg.data["serial"], set()).add(msg.node_id)

    def workers(self) -> list[str]:
        return [w for w in self.runner.clients.keys() if w in self.expected.ids]

    def send_settings(self, settings: LoadSettings) -> None:
        self.runner.send_message(SETTINGS_MESSAGE, settings.to_message())

    def send_phase(self, phase: Phase, quota_by_worker: dict[str, int | None] | None = None) -> None:
        from dataclasses import asdict, replace

        for worker in self.workers():
            quota = phase.request_quota if quota_by_worker is None else quota_by_worker.get(worker)
            self.runner.send_message(PHASE_MESSAGE, asdict(replace(phase, request_quota=quota)), client_id=worker)

    def split_quota(self, total: int) -> dict[str, int]:
        """Share a request quota in proportion to each worker's users (workers without users get 0)."""
        counts = {w: self.runner.clients[w].user_count for w in self.workers()}
        users = sum(counts.values()) or 1
        shares = {w: total * n // users for w, n in counts.items()}
        leftover = total - sum(shares.values())
        for w in sorted(counts, key=counts.get, reverse=True):
            if leftover <= 0:
                break
            if counts[w]:
                shares[w] += 1
                leftover -= 1
        return shares

    def all_idle(self, serial: int) -> bool:
        return set(self.workers()) <= self.idle.get(serial, set())


# ---- the worker processes on this machine ---------------------------------------------------------------------------
LOCUSTFILE = Path("loadtests") / "locustfile.py"
CONNECT_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


def locustfile_path() -> Path:
    return project_root() / LOCUSTFILE


def _never() -> bool:
    return False


class LocalWorkers:
    def __init__(self, count: int, environment, token: str) -> None:
        problem = worker_count_problem(count)
        if problem:
            raise ValueError(problem)
        self.count = count
        self.environment = environment
        self.token = token  # the workers present it to the master (ExpectedWorkers)
        self.processes: list[subprocess.Popen] = []

    def start(self, stop_requested: Callable[[], bool] = _never) -> bool:
        """Start the workers and wait until all said hello; False (nothing raised) when a stop was requested."""
        runner = self.environment.runner
        port = runner.master_bind_port
        env = {**os.environ, RUNNER_ENV: "1", WORKER_TOKEN_ENV: self.token}
        for _ in range(self.count):
            if stop_requested():
                return False
            self.processes.append(spawn(
                [sys.executable, "-m", "locust", "-f", str(locustfile_path()), "--worker",
                 "--master-host", "127.0.0.1", "--master-port", str(port), "--loglevel", "WARNING"],
                env=env, stdin=subprocess.DEVNULL,
            ))
            gevent.sleep(0)  # let a signal handler run
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        expected = self.environment.sglab_expected_workers.ids
        while len(runner.clients.ready) + len(runner.clients.running) < self.count or len(expected) < self.count:
            if stop_requested():
                return False
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(runner.clients)} of {self.count} Locust workers connected")
            for proc in self.processes:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Locust worker exited with code {proc.returncode}")
            gevent.sleep(0.1)
        return True

    def stop(self) -> None:
        stop_all(self.processes, timeout_s=STOP_TIMEOUT_S)
        self.processes = []
