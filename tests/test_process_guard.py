"""The session guard (tests/process_guard.py) fails a pytest run that leaves a process behind, and only then."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

LEAVES_AN_ORPHAN = """
    import subprocess, sys
    def test_starts_a_server_and_loses_it():
        # the child forks a long sleeper and exits at once: the sleeper is orphaned, as a Locust UI is
        # when its `sglab ui` dies without taking it along
        code = "import os, time\\nif os.fork() == 0:\\n    time.sleep(120)\\n"
        subprocess.run([sys.executable, "-c", code], check=True)
"""
CLEAN = """
    import subprocess, sys
    def test_starts_and_stops():
        subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


def run_pytest(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "SGLAB_PROCESS_GUARD_GRACE_S": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "process_guard", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_inner.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard reads /proc")
def test_a_session_that_leaves_a_process_fails_and_the_process_is_killed(tmp_path):
    proc = run_pytest(tmp_path, LEAVES_AN_ORPHAN)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout and "left 1 process(es) running" in proc.stdout, proc.stdout
    assert "time.sleep(120)" in proc.stdout  # the command line, so the culprit can be found
    leftover = subprocess.run(["pgrep", "-f", "time.sleep\\(120\\)"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard reads /proc")
def test_a_clean_session_passes(tmp_path):
    proc = run_pytest(tmp_path, CLEAN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
