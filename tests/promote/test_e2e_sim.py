"""End to end on the simulator: bench (quick) -> compare -> report -> promote --dry-run, through the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.core.paths import project_root

pytestmark = pytest.mark.slow

LABEL = " (simulator evidence: not promotable to GPU stacks)"  # what a simulator verdict line ends with


def sglab(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sglab.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=project_root())


def test_bench_compare_report_promote_dry_run(tmp_path: Path) -> None:
    env = {**os.environ, "SGLAB_RESULTS_DIR": str(tmp_path)}
    production = project_root() / "stacks" / "Pulumi.production.yaml"
    before = production.read_bytes()
    bench = sglab("bench", "--stack", "eagle-nccl-ll", "--target", "sim", "--quick", "--rounds", "4", "--no-progress",
                  env=env)
    assert bench.returncode == 0, bench.stderr[-2000:]
    run_dirs = list((tmp_path / "eagle-nccl-ll").iterdir())
    assert len(run_dirs) == 1
    run_dir = run_dirs[0]

    compare = sglab("compare", str(run_dir), env=env)
    assert compare.returncode == 0, compare.stderr
    outcome = compare.stdout.strip().splitlines()[-1]
    assert outcome in tuple(f"verdict: {o}{LABEL}" for o in ("promote", "reject", "inconclusive"))
    assert "break-even accept length" in compare.stdout

    report = sglab("report", str(run_dir), env=env)
    assert report.returncode == 0 and (run_dir / "report.html").exists()
    assert (run_dir / "decode_tok_per_s.png").exists() and (run_dir / "accept_length.png").exists()

    promote = sglab("promote", "--stack", "eagle-nccl-ll", "--dry-run", env=env)
    # whatever the verdict, simulator evidence never changes production (a GPU stack), and it says how to measure
    assert promote.returncode == 2 and promote.stderr.startswith("refused: "), promote.stderr
    assert "comes from simulators" in promote.stderr and "pulumi up --stack eagle-nccl-ll" in promote.stderr
    assert "--baseline-url" in promote.stderr
    assert production.read_bytes() == before
