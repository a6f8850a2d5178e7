"""Locust worker processes on this machine for `sglab bench --workers N` (Locust's distributed mode).

Each worker is a plain `locust --worker` process running the project's locustfile, so the same code
path scales to workers on other machines (or pods) pointed at the master.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import gevent

from sglab.config.loader import project_root
from sglab.load.distributed import WORKER_TOKEN_ENV
from sglab.load.plugin import RUNNER_ENV

LOCUSTFILE = Path("loadtests") / "locustfile.py"
CONNECT_TIMEOUT_S = 60.0


def locustfile_path() -> Path:
    return project_root() / LOCUSTFILE


class LocalWorkers:
    def __init__(self, count: int, environment, token: str) -> None:
        self.count = count
        self.environment = environment
        self.token = token  # the workers present it to the master (sglab/load/distributed.py)
        self.processes: list[subprocess.Popen] = []

    def start(self) -> None:
        runner = self.environment.runner
        port = runner.master_bind_port
        env = {**os.environ, RUNNER_ENV: "1", WORKER_TOKEN_ENV: self.token}
        for _ in range(self.count):
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "locust", "-f", str(locustfile_path()), "--worker",
                 "--master-host", "127.0.0.1", "--master-port", str(port), "--loglevel", "WARNING"],
                env=env, stdin=subprocess.DEVNULL, start_new_session=True,
            ))
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        expected = self.environment.sglab_expected_workers.ids
        while len(runner.clients.ready) + len(runner.clients.running) < self.count or len(expected) < self.count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(runner.clients)} of {self.count} Locust workers connected")
            for proc in self.processes:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Locust worker exited with code {proc.returncode}")
            gevent.sleep(0.1)

    def stop(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.processes = []
