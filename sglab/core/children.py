"""Child processes that end with the process that started them, however it ends (ground floor).

Every process sglab starts (simulators, Locust workers, Locust's web UI, probe ranks) goes through `spawn`:

- it runs in a session of its own, so a terminal's Ctrl-C reaches sglab only, which stops its children in order;
- on Linux the kernel kills it when its parent dies (PR_SET_PDEATHSIG), SIGKILL included: the death signal
  is SIGKILL, not SIGTERM, because a stopped process (SIGSTOP, ^Z, a debugger) never handles SIGTERM;
- elsewhere it is told its parent's pid (PARENT_PID_ENV) and watches it (`parent_gone`).

`stop` ends one: SIGKILL at once when it is stopped, else SIGTERM, then SIGKILL of its process group after a
grace period. `MAX_LOCUST_WORKERS` is the one cap on Locust worker processes (`sglab bench --workers`, the
stack's `locust.workers`), `local_worker_limit` the cap on this machine (its usable cores); `free_port` a loopback
port for a child server to listen on.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

PARENT_PID_ENV = "SGLAB_PARENT_PID"
DEATH_SIGNAL = signal.SIGKILL
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# A Locust worker drives a core; past a few dozen, one master's event loop is the bottleneck (docs/load.md).
MAX_LOCUST_WORKERS = 32


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_worker_limit() -> int:
    """The most Locust worker processes one machine runs: one per usable core, at most MAX_LOCUST_WORKERS."""
    return max(1, min(MAX_LOCUST_WORKERS, usable_cores()))


def worker_count_problem(count: int, option: str = "--workers") -> str | None:
    """Why `count` local workers cannot run here ('problem; fix'), or None."""
    limit = local_worker_limit()
    if count < 0:
        return f"{option} {count} is negative; give 0 (no workers) to {limit}"
    if count > limit:
        reason = (f"the documented maximum is {MAX_LOCUST_WORKERS}" if limit == MAX_LOCUST_WORKERS else
                  f"this machine has {usable_cores()} usable cores, and a worker beyond one per core adds no load")
        return f"{option} {count}: at most {limit} Locust workers run here ({reason}); give {option} {limit} or fewer"
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it; bind soon after, someone else may take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with(parent_pid: int):
    """preexec_fn: the death signal (Linux), and exit at once if the parent died before it was set."""

    def preexec() -> None:
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, DEATH_SIGNAL, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def spawn(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, **popen) -> subprocess.Popen:
    """Popen `cmd` as a child that dies with this process (its own session, the death signal, PARENT_PID_ENV).

    The death signal comes from the thread that calls this: call it from the main thread (greenlets are fine)."""
    child_env = dict(os.environ if env is None else env)
    child_env[PARENT_PID_ENV] = str(os.getpid())
    return subprocess.Popen(list(cmd), env=child_env, start_new_session=True, preexec_fn=_die_with(os.getpid()),
                            **popen)


_START_PPID = os.getppid()


def parent_gone() -> bool:
    """In a child started by `spawn`: True once the process that started it is gone (for platforms without a
    death signal). A PARENT_PID_ENV inherited from further up (not our parent's) is ignored."""
    expected = os.environ.get(PARENT_PID_ENV, "")
    return expected.isdigit() and int(expected) == _START_PPID and os.getppid() != _START_PPID


def is_stopped(pid: int) -> bool:
    """True when the process is stopped (SIGSTOP, ^Z, traced): it would not handle SIGTERM (Linux; else False)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"T", b"t")


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # spawn made it a session (and group) leader
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def stop(proc: subprocess.Popen, *, timeout_s: float = 10.0, term_signal: int = signal.SIGTERM) -> int | None:
    """End a child and its group: `term_signal` (SIGKILL at once when it is stopped), SIGKILL after `timeout_s`.
    The group is signalled only while its leader is not yet reaped, so a reused pid is never hit."""
    if proc.poll() is None:
        _signal_group(proc, signal.SIGKILL if is_stopped(proc.pid) else term_signal)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        _signal_group(proc, signal.SIGKILL)
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return None


def stop_all(procs: Sequence[subprocess.Popen], *, timeout_s: float = 10.0) -> None:
    """`stop` for many at once: one grace period for all of them, then SIGKILL for those still running."""
    for proc in procs:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGKILL if is_stopped(proc.pid) else signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
    for proc in procs:
        stop(proc, timeout_s=0.0, term_signal=signal.SIGKILL)
