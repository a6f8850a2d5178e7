"""The Pulumi mocks harness refuses to run after Locust's gevent patching instead of deadlocking."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_a_process_that_imported_locust_gets_a_clear_refusal_not_a_hang():
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import locust\n"
            "from pulumi_harness import run_program\n"
            "run_program('eagle-nccl-ll')\n") % str(TESTS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "Pulumi mocks cannot run in a process that imported Locust" in done.stderr
    assert "PULUMI_TESTS" in done.stderr
