"""A pytest plugin: the session fails when the suite leaves behind a process it started.

At the session's start pytest becomes a child subreaper (Linux, PR_SET_CHILD_SUBREAPER): a process orphaned
by a test's child (a Locust web UI whose `sglab ui` died, a worker whose bench was killed) is re-parented to
pytest instead of init, so at the end every process a test left is one of pytest's children. Those still
alive after a grace period are listed, killed, and the session's exit status is set to failed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

import pytest

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
# Children dying of their parent's death signal, servers finishing a shutdown (tests of the guard shorten it).
GRACE_S = float(os.environ.get("SGLAB_PROCESS_GUARD_GRACE_S", "10"))
_state: dict[str, object] = {}


def _children() -> set[int]:
    me = os.getpid()
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(entry))
    return out


def _reap_zombies() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def pytest_sessionstart(session) -> None:
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    _state["subreaper"] = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    _state["before"] = _children()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    if "before" not in _state:
        return
    deadline = time.monotonic() + GRACE_S
    left = _children() - _state["before"]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        _reap_zombies()
        left = _children() - _state["before"]
    _reap_zombies()
    if not left:
        return
    lines = [f"  {pid}: {_cmdline(pid)}" for pid in sorted(left)]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"the test session left {len(left)} process(es) running (killed now):\n" + "\n".join(lines)
    if reporter is not None:
        reporter.write_line("")
        reporter.write_line("ERROR: " + message, red=True)
    else:
        print(message, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
