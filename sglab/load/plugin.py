"""Locust event listeners the locustfile installs: custom arguments, the collector, worker messages."""

from __future__ import annotations

import os

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
    _quit_with_parent(environment)


PARENT_CHECK_S = 1.0


def _quit_with_parent(environment) -> None:
    """A Locust process sglab started (a bench's worker, `sglab ui`'s web UI) quits when its starter is gone.
    On Linux the kernel's death signal does it first (sglab.core.children); this covers the other systems."""
    from sglab.core.children import PARENT_PID_ENV, parent_gone

    if not os.environ.get(PARENT_PID_ENV):
        return
    import gevent

    def watch() -> None:
        while not parent_gone():
            gevent.sleep(PARENT_CHECK_S)
        os._exit(1)

    gevent.spawn(watch)
