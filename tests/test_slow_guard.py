"""The end-to-end guard (tests/slow_guard.py): a test that starts a simulator or Locust must be marked `slow`, so
`pytest -m "not slow"` (make test-unit) is the unit suite alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# each runs a pytest whose test starts a stand-in with a simulator's command line: end to end to this very guard
pytestmark = pytest.mark.slow

# a stand-in whose command line is a simulator's (`python -m sglab.sim ...`), without starting one
STARTS_A_SIMULATOR = """
    import subprocess, sys
    import pytest
    {mark}
    def test_measures_something():
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)", "-m", "sglab.sim"], check=True)
"""


def run_pytest(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(body))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: end to end\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "slow_guard", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard reads /proc")
def test_an_unmarked_test_that_starts_a_simulator_fails_naming_the_marker(tmp_path):
    proc = run_pytest(tmp_path, STARTS_A_SIMULATOR.format(mark=""))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in proc.stdout and "pytest.mark.slow" in proc.stdout and "-m sglab.sim" in proc.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard reads /proc")
def test_a_marked_test_that_starts_a_simulator_passes(tmp_path):
    proc = run_pytest(tmp_path, STARTS_A_SIMULATOR.format(mark="@pytest.mark.slow"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
