"""End to end on simulators, through the CLI: a bench records what served each arm and the answers; compare shows
the producer, the machines and the output parity (an A/A run its own); two simulators that answer differently
(another seed) have a parity below 100% and fail the default output-parity gate. Small runs: about 40 s in all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.analysis.verdict import judge
from sglab.config import baseline_arm, candidate_arm, load_stack
from sglab.core.paths import project_root
from sglab.config.policy import PromotionPolicy
from sglab.results.store import load_result
from sglab.sim.testing import running_sim

pytestmark = pytest.mark.slow
STACK = "eagle-nccl-ll"
SMALL = ["--quick", "--concurrency", "1", "--rounds", "3", "--round-requests", "4", "--warmup-requests", "0",
         "--prompts", "random", "--max-new-tokens", "16", "--no-progress"]


def sglab(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SGLAB_RESULTS_DIR": str(out)}
    return subprocess.run([sys.executable, "-m", "sglab.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=project_root())


def only_run(out: Path) -> Path:
    (run_dir,) = [p for p in (out / STACK).iterdir() if p.is_dir()]
    return run_dir


def test_a_sim_bench_records_the_machines_and_full_parity(tmp_path: Path) -> None:
    bench = sglab("bench", "--stack", STACK, *SMALL, out=tmp_path)
    assert bench.returncode == 0, bench.stderr[-2000:]
    run_dir = only_run(tmp_path)
    result = load_result(run_dir)
    for info in result.arms:
        assert info.machine.producer == "simulator" and info.machine.time_scale == 10.0
        assert info.machine.server_version and info.machine.image is None
    assert result.output_texts and all(s.temperature == 0 for lv in result.levels for s in lv.requests)
    assert "output parity (temperature 0, same request): candidate = baseline in 100.0% of" in bench.stdout
    compare = sglab("compare", str(run_dir), out=tmp_path)
    assert "produced by: sglab's simulator at time scale 10, started by sglab (target sim)" in compare.stdout
    assert "machine candidate: sglab simulator at time scale 10, version" in compare.stdout
    assert compare.stdout.strip().splitlines()[-1].startswith("verdict: ")
    report = (run_dir / "report.html").read_text()
    assert "Output parity" in report and "machine baseline" in report


def test_an_aa_run_shows_its_parity(tmp_path: Path) -> None:
    bench = sglab("bench", "--stack", STACK, "--aa", *SMALL, out=tmp_path)
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert "output parity (temperature 0, same request): candidate = baseline in 100.0% of" in bench.stdout


def test_a_candidate_that_answers_differently_has_lower_parity(tmp_path: Path) -> None:
    """The simulator is lossless (same seed, same text); another seed stands in for a lossy candidate."""
    config = load_stack(STACK).config
    base, cand = baseline_arm(config), candidate_arm(config)
    fast = {"SGLAB_SIM_TIME_SCALE": "10"}
    with running_sim(list(base.args), {**base.env, **fast}) as b, \
            running_sim(list(cand.args), {**cand.env, **fast, "SGLAB_SIM_SEED": "7"}) as c:
        bench = sglab("bench", "--stack", STACK, "--baseline-url", b, "--candidate-url", c,
                      *[a for a in SMALL if a != "--quick"], out=tmp_path)
    assert bench.returncode == 0, bench.stderr[-2000:]
    result = load_result(only_run(tmp_path))
    assert result.target.kind == "urls" and all(a.machine.producer == "simulator" for a in result.arms)
    verdict = judge(result, PromotionPolicy(levels=[1], min_rounds=2, min_requests=1))  # parity gates by default
    parity = verdict.output_parity
    assert parity.candidate.pairs > 0 and parity.candidate.share < 0.95
    assert parity.candidate.first_difference_chars_mean is not None
    guard = next(g for g in verdict.guards if g.name == "output-parity")
    assert not guard.ok and verdict.outcome == "reject"
