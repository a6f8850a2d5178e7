"""Where the arms run: `sglab sim` processes started here, or URLs of an existing deployment.

A simulator arm gets exactly the launch arguments and env the stack renders for it
(`sglab.config.arms`), with only --host/--port replaced by 127.0.0.1 and a free port.
Simulators die with the process that started them, however it ends (SIGKILL included, and stopped
ones too): they are started through sglab.core.children (on Linux the kernel sends them SIGKILL when their
parent dies; elsewhere the simulator watches PARENT_PID_ENV).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sglab.core.children import PARENT_PID_ENV, spawn, stop_all
from sglab.config.arms import ArmSpec
from sglab.core.children import free_port
from sglab.sglang.secret_names import credential_kind, has_url_credentials, redact_url_credentials
from sglab.core.untrusted import printable
from sglab.sglang.env import without_server_env

HEALTH_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0


class TargetError(Exception):
    pass


def local_args(args: tuple[str, ...] | list[str], port: int) -> list[str]:
    """The arm's args with --host/--port pointed at 127.0.0.1:<port> (added if absent)."""
    out: list[str] = []
    i = 0
    seen = set()
    while i < len(args):
        arg = args[i]
        if arg in ("--host", "--port") and i + 1 < len(args):
            out += [arg, "127.0.0.1" if arg == "--host" else str(port)]
            seen.add(arg)
            i += 2
            continue
        out.append(arg)
        i += 1
    if "--host" not in seen:
        out += ["--host", "127.0.0.1"]
    if "--port" not in seen:
        out += ["--port", str(port)]
    return out


@dataclass
class SimProcess:
    arm: ArmSpec
    port: int
    process: subprocess.Popen
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def sim_command(arm: ArmSpec, port: int) -> list[str]:
    return [sys.executable, "-m", "sglab.sim", *local_args(arm.args, port)]  # `sglab sim` without the rest of the CLI


def start_sim(arm: ArmSpec, *, extra_env: dict[str, str] | None = None, log_dir: Path | None = None,
              port: int | None = None) -> SimProcess:
    """One simulator for an arm; `port`: the port it had before a restart (its URL stays the arm's)."""
    restart = port is not None
    port = port or free_port()
    inherited = {k: v for k, v in without_server_env(os.environ).items() if k != PARENT_PID_ENV}
    env = {**inherited, **arm.env, **(extra_env or {})}  # the server sees exactly the arm's env
    log_path = log_dir / f"sim-{arm.name}.log" if log_dir else None
    out = open(log_path, "ab" if restart else "wb") if log_path else subprocess.DEVNULL  # a restart appends
    try:
        proc = spawn(sim_command(arm, port), env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    finally:
        if log_path:
            out.close()
    return SimProcess(arm, port, proc, log_path)


def wait_healthy(url: str, *, timeout_s: float = HEALTH_TIMEOUT_S, process: subprocess.Popen | None = None,
                 log_path: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:] if log_path and log_path.exists() else ""
            raise TargetError(f"the simulator for {url} exited with code {process.returncode}\n{tail}")
        try:
            resp = httpx.get(url.rstrip("/") + "/health", timeout=2.0)
            if resp.status_code == 200:
                return
            last = f"HTTP {resp.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.1)
    raise TargetError(f"{url} did not become healthy within {timeout_s:g} s (last: {last})")


@dataclass
class Targets:
    """Arm name -> URL, plus the simulator processes to stop afterwards (if we started them)."""

    urls: dict[str, str]
    processes: list[SimProcess] = field(default_factory=list)

    def stop(self) -> None:
        stop_all([sim.process for sim in self.processes], timeout_s=STOP_TIMEOUT_S)
        self.processes = []

    def __enter__(self) -> "Targets":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """In a gevent process (the bench) while servers start: SIGTERM and SIGHUP end it as Ctrl-C does
    (KeyboardInterrupt in the main greenlet), so what was started is stopped and nothing is left half-made."""
    import gevent

    main = gevent.getcurrent()
    handlers = [gevent.signal_handler(sig, gevent.kill, main, KeyboardInterrupt)  # asynchronous: never blocks
                for sig in (signal.SIGTERM, signal.SIGHUP)]
    try:
        yield
    finally:
        for handler in handlers:
            handler.cancel()


def start_sims(arms: list[ArmSpec], *, extra_env: dict[str, str] | None = None, log_dir: Path | None = None,
               timeout_s: float = HEALTH_TIMEOUT_S, arm_env: dict[str, dict[str, str]] | None = None) -> Targets:
    """One simulator per arm, all started before waiting so they boot in parallel; `arm_env`: arm -> env of
    that arm alone (its simulated node)."""
    targets = Targets({})
    try:
        for arm in arms:
            sim = start_sim(arm, extra_env={**(extra_env or {}), **(arm_env or {}).get(arm.name, {})},
                            log_dir=log_dir)
            targets.processes.append(sim)
            targets.urls[arm.name] = sim.url
        for sim in targets.processes:
            wait_healthy(sim.url, timeout_s=timeout_s, process=sim.process, log_path=sim.log_path)
    except BaseException:
        targets.stop()
        raise
    return targets


def given_urls(urls: dict[str, str], *, timeout_s: float = 10.0) -> Targets:
    """The arms at these URLs once each answers /health; a URL with credentials is refused before it is used,
    recorded (result.target.urls) or printed."""
    for arm, url in urls.items():
        if has_url_credentials(url) or credential_kind(url):
            raise TargetError(f"the {printable(arm, limit=40)} URL holds credentials "
                              f"({printable(redact_url_credentials(url), limit=120)}), which the result would record "
                              "and the console show; give the server's URL without user:password@ (reach a "
                              "protected server through kubectl port-forward or a proxy on this machine)")
    for url in urls.values():
        wait_healthy(url, timeout_s=timeout_s)
    return Targets({name: url.rstrip("/") for name, url in urls.items()})
