"""A pytest plugin: a test that starts a simulator or Locust is an end-to-end test and must be marked `slow`.

So `pytest -m "not slow"` (`make test-unit`) is the unit suite alone, and the marker cannot drift from what the
tests do. While a test not marked `slow` runs, a thread reads this process's descendants from /proc (Linux) every
SAMPLE_S; one whose command line runs a simulator or Locust fails the test, naming it and the marker to add.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

SAMPLE_S = 0.2  # a simulator takes longer than this to start, a Locust run lasts seconds
END_TO_END = ("-m sglab.sim", "-m locust")  # what a test's descendants run when it is end to end


def _descendants(root: int) -> dict[int, str]:
    """pid -> command line of every live descendant of `root`, from one pass over /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                try:
                    found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                        errors="replace")
                except OSError:
                    found[pid] = ""
                todo.append(pid)
    return found


class _Watch(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True, name="slow-guard")
        self.stopped = threading.Event()
        self.seen: list[str] = []

    def run(self) -> None:
        me = os.getpid()
        while not self.seen:
            self.seen = [line[:160] for line in _descendants(me).values() if any(m in line for m in END_TO_END)]
            if self.stopped.wait(SAMPLE_S):
                return


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not sys.platform.startswith("linux") or item.get_closest_marker("slow") is not None:
        yield
        return
    watch = _Watch()
    watch.start()
    outcome = yield
    watch.stopped.set()
    watch.join()
    if watch.seen and outcome.excinfo is None:
        outcome.force_exception(pytest.fail.Exception(
            f"{item.nodeid} started {watch.seen[0]!r}: a test that runs a simulator or Locust is end to end; mark "
            "it @pytest.mark.slow (or the module: pytestmark = pytest.mark.slow) so `pytest -m 'not slow'` stays "
            "the unit suite", pytrace=False))
