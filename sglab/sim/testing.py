"""Start `sglab sim` as a real subprocess on a free port, for tests and benchmarks.

    with running_sim(["--model-path", "m", "--enable-metrics"], env={"SGLAB_SIM_TIME_SCALE": "20"}) as url:
        httpx.post(url + "/generate", json={...})

The process is started with this interpreter (`python -m sglab.sim ...`, same as `sglab sim ...`), waits until /health
answers 200 (or, with `wait="port"`, until the port accepts connections), and is terminated on exit.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping

import httpx

from sglab.core.children import free_port, spawn, stop
from sglab.sglang.env import without_server_env
from sglab.sglang.sim_knobs import knob

ALLOW_FAST = knob("allow_unfaithful_time_scale").env

__all__ = ["free_port", "running_sim", "strip_host_port"]


def strip_host_port(args: list[str]) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--port", "--host"):
            skip = True
            continue
        if arg.startswith(("--port=", "--host=")):
            continue
        out.append(arg)
    return out


@contextlib.contextmanager
def running_sim(args: list[str], env: Mapping[str, str] | None = None, *, port: int | None = None,
                timeout_s: float = 30.0, wait: str = "health", log_path: str | None = None) -> Iterator[str]:
    """Yield the base URL (http://127.0.0.1:PORT) of a simulator started with `args` (+ env on top of ours).

    --host/--port in `args` are replaced (127.0.0.1, a free port). NCCL_* and SGLAB_SIM_* of the calling
    process are not inherited, so the server sees exactly `env`.
    """
    port = port or free_port()
    argv = [sys.executable, "-m", "sglab.sim", *strip_host_port(list(args)),
            "--host", "127.0.0.1", "--port", str(port)]
    child_env = without_server_env(os.environ)
    child_env[ALLOW_FAST] = "1"  # tests of behaviour run simulators faster than their timing stays faithful
    child_env.update(env or {})
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL
    proc = spawn(argv, env=child_env, stdout=log, stderr=subprocess.STDOUT if log_path else subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, base, port, timeout_s, wait)
        yield base
    finally:
        stop(proc, timeout_s=10)  # spawn: it also ends if this process is killed
        if log_path:
            log.close()


def _wait_ready(proc: subprocess.Popen, base: str, port: int, timeout_s: float, wait: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"sglab sim exited with code {proc.returncode}: {err.strip()}")
        try:
            if wait == "port":
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            elif httpx.get(base + "/health", timeout=1.0).status_code == 200:
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"sglab sim on {base} not ready within {timeout_s} s")
