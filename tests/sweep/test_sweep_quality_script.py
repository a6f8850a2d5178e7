"""benchmarks/sweep_quality.py runs (a few sweeps per case): its numbers come from the race the sweep uses."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sweep_quality.py"


def test_the_sweep_quality_benchmark_runs(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("sweep_quality", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "sweep_quality", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    assert module.main(["--trials", "40", "--grid-trials", "400", "--horizon", "60"]) == 0
    out = capsys.readouterr().out
    assert "| eagle-sweep (32 arms, simulator model, c=1) | 32 |" in out and "fewer" in out  # the shipped grid
    assert out.count("x** (") >= 8  # every case compared with its full grid
