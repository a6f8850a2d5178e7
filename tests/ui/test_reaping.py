"""`sglab ui` killed with SIGKILL takes its Locust web UI and its simulators with it: before,
the Locust process lived on with parent 1 (one was still running after a full `make test`)."""

from __future__ import annotations

import os
import signal

import pytest

from proctree import cmdline, describe, descendants, kill_all, wait_gone

from .harness import sglab_ui


@pytest.mark.slow
def test_sigkill_of_sglab_ui_leaves_no_process(tmp_path):
    tree: list[int] = []
    try:
        with sglab_ui(tmp_path, "--target", "sim", stop_signal=signal.SIGKILL) as ui:
            tree = descendants(ui.process.pid)
            locust = [p for p in tree if "locust" in cmdline(p)]
            sims = [p for p in tree if "sglab.sim" in cmdline(p)]
            assert len(locust) == 1 and len(sims) == 2, describe(tree)
            os.kill(sims[0], signal.SIGSTOP)  # a stopped child never handles SIGTERM
            os.kill(locust[0], signal.SIGSTOP)
        left = wait_gone(tree, 10)
        report = describe(left)
    finally:
        kill_all(tree)
    assert not left, f"left behind by a SIGKILLed sglab ui: {report}"
