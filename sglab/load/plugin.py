"""Locust event listeners the locustfile installs: custom arguments, the collector, worker messages."""

from __future__ import annotations

from sglab.load.collector import get_collector
from sglab.load.options import add_arguments

RUNNER_ENV = "SGLAB_BENCH_WORKER"

_installed: set[int] = set()


def install(events) -> None:
    if id(events) in _installed:
        return
    _installed.add(id(events))
    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(_on_init)


def _on_init(environment, **_kw) -> None:
    get_collector(environment)
    from sglab.load import distributed

    distributed.on_init(environment)
