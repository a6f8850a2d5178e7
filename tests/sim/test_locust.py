"""Locust (in its own process, gevent and all) drives the simulator without a failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.sim.testing import running_sim

from .helpers import CHART_COMMON, EAGLE_2STEP, FAST

LOCUSTFILE = Path(__file__).with_name("locustfile_sim.py")


@pytest.mark.slow
def test_locust_streams_generate(tmp_path):
    with running_sim(CHART_COMMON + EAGLE_2STEP, FAST) as url:
        result = subprocess.run(
            [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", "4", "-r", "4",
             "-t", "3s", "--host", url, "--only-summary", "--json-file", str(tmp_path / "stats")],
            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    generate = [s for s in stats if s["name"] == "/generate"][0]
    assert generate["num_requests"] > 10 and generate["num_failures"] == 0
