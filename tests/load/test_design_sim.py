"""`sglab bench --target sim` carries out policy.design: real simulators moved between simulated nodes.

Short runs (1 s rounds at time scale 5, one period per round); they assert what the bench did (nodes,
periods, restarts), never a statistical outcome.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import ROOT, bench, child_env, load, run_dirs
from .test_arm_failure import EXIT_INVALID, sim_pids

STACK = "eagle-nccl-ll"
SHORT = ["--stack", STACK, "--prompts", "random", "--concurrency", "1", "--rounds", "4", "--round-s", "1",
         "--period-rounds", "1", "--warmup-requests", "1", "--max-new-tokens", "16", "--time-scale", "5",
         "--own-gate-only"]


def _measured(result: dict) -> list[dict]:
    (level,) = result["levels"]
    return sorted((r for r in level["rounds"] if not r["warmup"]), key=lambda r: (r["round_index"], r["arm"]))


@pytest.mark.slow
def test_a_crossover_swaps_the_arms_nodes_between_periods(out):
    bench([*SHORT, "--design", "crossover"], out)
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert result["complete"] is True and result["invalid_reason"] is None
    rounds = _measured(result)
    assert [(r["round_index"], r["arm"], r["period"], r["node"]) for r in rounds] == [
        (0, "baseline", 1, "sim-node-a"), (0, "candidate", 1, "sim-node-b"),
        (1, "baseline", 2, "sim-node-b"), (1, "candidate", 2, "sim-node-a"),
        (2, "baseline", 3, "sim-node-a"), (2, "candidate", 3, "sim-node-b"),
        (3, "baseline", 4, "sim-node-b"), (3, "candidate", 4, "sim-node-a")]
    design = result["design"]
    assert design["design"] == "crossover" and design["notes"] == []
    assert design["nodes"] == {"baseline": ["sim-node-a", "sim-node-b"] * 2,
                               "candidate": ["sim-node-b", "sim-node-a"] * 2}
    assert design["restarts"] == 6  # three swaps, both servers each time
    assert design["restart_s"] > 0 and design["measuring_s"] >= 8 * 0.9
    # every restart is followed by a burn-in of each moved arm (not counted): the one before round r is -(r+1)
    warm = [(r["round_index"], r["arm"], r["node"]) for r in result["levels"][0]["rounds"] if r["warmup"]]
    assert sorted(warm) == [(-4, "baseline", "sim-node-b"), (-4, "candidate", "sim-node-a"),
                            (-3, "baseline", "sim-node-a"), (-3, "candidate", "sim-node-b"),
                            (-2, "baseline", "sim-node-b"), (-2, "candidate", "sim-node-a"),
                            (-1, "baseline", "sim-node-a"), (-1, "candidate", "sim-node-b")]
    assert all(r["requests"] == 1 for r in result["levels"][0]["rounds"] if r["warmup"])
    assert (run_dir / "sim-candidate.log").read_text().count("listening on") == 4  # one log, every start


@pytest.mark.slow
def test_a_switchback_serves_one_arm_per_round_in_abba_order_on_one_node(out):
    bench([*SHORT, "--design", "switchback"], out)
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert result["complete"] is True
    rounds = _measured(result)
    assert [(r["round_index"], r["arm"], r["period"], r["node"]) for r in rounds] == [
        (0, "baseline", 1, "sim-node-a"), (1, "candidate", 2, "sim-node-a"),
        (2, "candidate", 3, "sim-node-a"), (3, "baseline", 4, "sim-node-a")]
    design = result["design"]
    assert design["design"] == "switchback"
    assert design["nodes"] == {"baseline": ["sim-node-a", None, None, "sim-node-a"],
                               "candidate": [None, "sim-node-a", "sim-node-a", None]}
    assert design["restarts"] == 2  # the candidate's turn, then the baseline's


@pytest.mark.slow
def test_parallel_keeps_each_arm_on_its_node_without_periods(out):
    bench([*SHORT, "--rounds", "3", "--design", "parallel"], out)
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert {(r["arm"], r["node"], r["period"]) for r in result["levels"][0]["rounds"]} == {
        ("baseline", "sim-node-a", None), ("candidate", "sim-node-b", None)}
    assert result["design"]["restarts"] == 0
    assert {a["name"]: a["machine"]["node_name"] for a in result["arms"]} == {"baseline": "sim-node-a",
                                                                            "candidate": "sim-node-b"}


@pytest.mark.slow
def test_a_server_that_does_not_come_back_ends_the_run_invalid_naming_the_arm_and_node(out):
    cmd = [sys.executable, "-m", "sglab.cli", "bench", "--out", str(out), "--no-progress", *SHORT,
           "--design", "crossover"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = None
    killed = False
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not killed:
            pid = sim_pids(proc.pid).get("candidate")
            if first is None:
                first = pid
            elif pid is not None and pid != first:
                os.kill(pid, signal.SIGKILL)  # the restarted candidate dies before it answers /health
                killed = True
            time.sleep(0.01)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed, "the candidate was never restarted"
    assert proc.returncode == EXIT_INVALID, stderr[-2000:]
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    reason = result["invalid_reason"]
    assert reason.startswith("candidate server did not come back on node sim-node-a after a restart"), reason
    assert result["design"]["restarts"] == 2
    assert {r["period"] for r in result["levels"][0]["rounds"] if not r["warmup"]} == {1}
