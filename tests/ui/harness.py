"""Helpers for the UI tests: run `sglab ui` (and plain `locust -f loadtests/locustfile.py`) as real subprocesses on free ports."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "loadtests" / "locustfile.py"
OUTPUT_DIR = ROOT / "test-output" / "ui"
STACK = "eagle-nccl-ll"
WINDOW_S = "2"  # short pseudo-rounds so a test sees several within seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # the condition is polled; remember why it was not met yet
            last_error = exc
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what} (last error: {last_error!r})")


@dataclass
class UiProcess:
    url: str
    process: subprocess.Popen
    log_path: Path
    results_dir: Path
    arm_urls: dict[str, str] = field(default_factory=dict)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _child_env(tmp_path: Path, extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLAB_UI_", "NCCL_", "SGLAB_SIM_"))}
    env.update({"SGLAB_RESULTS_DIR": str(tmp_path / "results"), "SGLAB_UI_WINDOW_S": WINDOW_S,
                "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def _stop(proc: subprocess.Popen, timeout_s: float = 30.0, stop_signal: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(stop_signal)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def sglab_ui(tmp_path: Path, *args: str, env: dict[str, str] | None = None, startup_timeout_s: float = 120.0,
             stop_signal: int = signal.SIGTERM) -> Iterator[UiProcess]:
    """`sglab ui --stack eagle-nccl-ll --web-port P ...` until the UI answers; `stop_signal` on exit."""
    port = free_port()
    log_path = tmp_path / "sglab-ui.log"
    cmd = [sys.executable, "-m", "sglab.cli", "ui", "--stack", STACK, "--web-port", str(port), *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=_child_env(tmp_path, env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT)
    ui = UiProcess(f"http://127.0.0.1:{port}", proc, log_path, tmp_path / "results")
    try:
        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"sglab ui exited with {proc.returncode}:\n{ui.log()}")
            return "Locust web UI:" in ui.log()
        wait_until(ready, startup_timeout_s, "sglab ui to serve its web UI")
        ui.arm_urls = dict(re.findall(r"^\s+(baseline|candidate): (http://\S+)$", ui.log(), re.M))
        yield ui
    finally:
        _stop(proc, stop_signal=stop_signal)


@contextlib.contextmanager
def plain_locust(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[UiProcess]:
    """`locust -f loadtests/locustfile.py --web-port P ...` as a user would run it."""
    port = free_port()
    log_path = tmp_path / "locust.log"
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--web-host", "127.0.0.1",
           "--web-port", str(port), *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=_child_env(tmp_path, env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT)
    ui = UiProcess(f"http://127.0.0.1:{port}", proc, log_path, tmp_path / "results")
    try:
        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"locust exited with {proc.returncode}:\n{ui.log()}")
            httpx.get(ui.url + "/", timeout=1.0)
            return True
        wait_until(ready, 60.0, "locust's web UI")
        yield ui
    finally:
        _stop(proc)


def ab_rows(stats: dict) -> dict[str, dict]:
    """The A/B tab's rows from a /stats/requests payload, by arm label."""
    tables = [e for e in stats.get("extended_stats", []) if e.get("key") == "sglab-ab"]
    assert tables, f"no sglab-ab extended_stats in /stats/requests: keys {sorted(stats)}"
    return {row["arm"]: row for row in tables[0]["data"]}
