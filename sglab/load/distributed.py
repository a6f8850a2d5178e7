"""Locust master/worker plumbing for `sglab bench --workers N`.

The master owns the schedule: it sends the run settings and each phase (level, round, arm, quota)
to every worker as Locust custom messages; a worker reports `idle` (with its samples of that phase)
once its gate is closed or its quota is used and no request is in flight.
"""

from __future__ import annotations

import gevent

from sglab.load.collector import (IDLE_MESSAGE, PHASE_MESSAGE, SETTINGS_MESSAGE, Phase, get_collector,
                                  is_worker)
from sglab.load.settings import LoadSettings
from sglab.results.schema import RequestSample

WATCH_INTERVAL_S = 0.02


def on_init(environment) -> None:
    runner = environment.runner
    if runner is None:
        return
    if is_worker(environment):
        _install_worker(environment)


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

    def __init__(self, environment) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.collector = get_collector(environment)
        self.idle: dict[int, set[str]] = {}
        self.runner.register_message(IDLE_MESSAGE, self._on_idle)

    def _on_idle(self, environment, msg, **_kw):
        for raw in msg.data.get("samples", ()):
            self.collector.record(RequestSample.model_validate(raw))
        self.idle.setdefault(msg.data["serial"], set()).add(msg.node_id)

    def workers(self) -> list[str]:
        return list(self.runner.clients.keys())

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
