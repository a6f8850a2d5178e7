"""Locust worker processes on this machine for `sglab bench --workers N` (Locust's distributed mode).

Each worker is a plain `locust --worker` process running the project's locustfile, so the same code
path scales to workers on other machines (or pods) pointed at the master. N is capped (one per usable core,
at most sglab.core.children.MAX_LOCUST_WORKERS); the workers are started through sglab.core.children, so they end with
the bench however it ends, and starting them gives way to a stop request (SIGTERM) between any two steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gevent

from sglab.core.children import spawn, stop_all, worker_count_problem
from sglab.core.paths import project_root
from sglab.load.distributed import WORKER_TOKEN_ENV
from sglab.load.plugin import RUNNER_ENV

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
        self.token = token  # the workers present it to the master (sglab/load/distributed.py)
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
