"""The master of `sglab bench --workers N` listens only to the workers it started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, child_env


@pytest.mark.slow
def test_reports_of_a_worker_the_master_did_not_start_are_ignored():
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("rogue_master.py"))], cwd=ROOT,
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(report["ours"]) == 1 and len(report["rogue"]) == 1, report  # the rogue did connect
    assert report["workers"] == report["ours"]
    assert report["idle"] == report["ours"] and report["all_idle"]
    assert "rogue" not in report["sample_arms"], report
    assert "did not present this run's worker token" in proc.stderr
