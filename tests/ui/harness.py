"""One way for the UI tests to run real processes: spawn, wait until ready, stop (SIGTERM, then kill).

`sglab ui`, plain `locust -f loadtests/locustfile.py,sglab/ui/locust_plugin.py` (master or worker) and
one-shot commands all go through `spawned`/`run_to_exit`, on free loopback ports.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sglab.core.children import free_port, spawn
from sglab.sglang.env import without_server_env

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "loadtests" / "locustfile.py"
UI_PLUGIN = ROOT / "sglab" / "ui" / "locust_plugin.py"  # the A/B tab, loaded beside the locustfile
REST_HEADERS = {"X-Sglab-Client": "sglab-tests"}  # how a non-browser client says so (docs/web-ui.md)
OUTPUT_DIR = ROOT / "test-output" / "ui"
STACK = "eagle-nccl-ll"
WINDOW_S = "2"  # short pseudo-rounds so a test sees several within seconds
STOP_TIMEOUT_S = 30.0


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


def child_env(tmp_path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment minus anything that would steer the child (UI, NCCL, simulator knobs); its
    temporary files (a UI session's logs) in the test's own directory."""
    env = without_server_env(os.environ, "SGLAB_UI_")
    env.update({"SGLAB_RESULTS_DIR": str(tmp_path / "results"), "SGLAB_UI_WINDOW_S": WINDOW_S,
                "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp_path)})
    env.update(extra or {})
    return env


@dataclass
class Spawned:
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self, what: str) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"{what} exited with {self.process.returncode}:\n{self.log()[-4000:]}")
        return True


def stop(proc: subprocess.Popen, timeout_s: float = STOP_TIMEOUT_S, stop_signal: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(stop_signal)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


_stop = stop  # older name


@contextlib.contextmanager
def spawned(cmd: Sequence[str], log_path: Path, env: dict[str, str], *, what: str,
            ready: Callable[[Spawned], object] | None = None, timeout_s: float = 60.0,
            stop_signal: int = signal.SIGTERM) -> Iterator[Spawned]:
    """Run `cmd` (output to `log_path`) until `ready(child)` is true; stop it with `stop_signal` on exit."""
    with open(log_path, "wb") as log:  # spawn: it ends with the test process, however that ends
        proc = spawn(list(cmd), env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
    child = Spawned(proc, log_path)
    try:
        if ready is not None:
            wait_until(lambda: child.alive(what) and ready(child), timeout_s, what)
        yield child
    finally:
        stop(proc, stop_signal=stop_signal)


def run_to_exit(cmd: Sequence[str], env: dict[str, str], timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    """A command expected to exit by itself (e.g. refusing to start)."""
    return subprocess.run(list(cmd), env=env, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)


@dataclass
class UiProcess:
    url: str
    process: subprocess.Popen
    log_path: Path
    results_dir: Path
    arm_urls: dict[str, str] = field(default_factory=dict)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def sglab_ui_command(port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "sglab.cli", "ui", "--stack", STACK, "--web-port", str(port), *args]


def locust_command(*args: str, ui: bool = True) -> list[str]:
    """Plain Locust on our locustfile; `ui` adds the A/B tab plugin (`-f locustfile.py,locust_plugin.py`)."""
    files = f"{LOCUSTFILE},{UI_PLUGIN}" if ui else str(LOCUSTFILE)
    return [sys.executable, "-m", "locust", "-f", files, *args]


@contextlib.contextmanager
def sglab_ui(tmp_path: Path, *args: str, env: dict[str, str] | None = None, startup_timeout_s: float = 120.0,
             stop_signal: int = signal.SIGTERM) -> Iterator[UiProcess]:
    """`sglab ui --stack eagle-nccl-ll --web-port P ...` until the UI answers; `stop_signal` on exit."""
    port = free_port()
    with spawned(sglab_ui_command(port, *args), tmp_path / "sglab-ui.log", child_env(tmp_path, env),
                 what="sglab ui to serve its web UI", ready=lambda c: "Locust web UI:" in c.log(),
                 timeout_s=startup_timeout_s, stop_signal=stop_signal) as child:
        arm_urls = dict(re.findall(r"^\s+(baseline|candidate): (http://\S+)$", child.log(), re.M))
        yield UiProcess(f"http://127.0.0.1:{port}", child.process, child.log_path, tmp_path / "results", arm_urls)


def _answers(url: str) -> bool:
    httpx.get(url + "/", timeout=1.0)
    return True


@contextlib.contextmanager
def plain_locust(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[UiProcess]:
    """`locust -f loadtests/locustfile.py,sglab/ui/locust_plugin.py --web-port P ...` as a user would run it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = locust_command("--web-host", "127.0.0.1", "--web-port", str(port), *args)
    with spawned(cmd, tmp_path / "locust.log", child_env(tmp_path, env), what="locust's web UI",
                 ready=lambda _c: _answers(url)) as child:
        yield UiProcess(url, child.process, child.log_path, tmp_path / "results")


@contextlib.contextmanager
def locust_worker(tmp_path: Path, master_port: int) -> Iterator[Spawned]:
    """A plain `locust --worker` connected to a master on this machine."""
    cmd = locust_command("--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port), ui=False)
    with spawned(cmd, tmp_path / "worker.log", child_env(tmp_path), what="locust worker") as child:
        yield child


def ab_rows(stats: dict) -> dict[str, dict]:
    """The A/B tab's rows from a /stats/requests payload, by arm label."""
    tables = [e for e in stats.get("extended_stats", []) if e.get("key") == "sglab-ab"]
    assert tables, f"no sglab-ab extended_stats in /stats/requests: keys {sorted(stats)}"
    return {row["arm"]: row for row in tables[0]["data"]}
