"""A server that dies or hangs mid-run, and a bench process that dies: what is left behind.

Real `sglab bench` subprocesses against real simulators; the simulators are found as the bench's
children by the log file their stdout goes to (results/<stack>/<run>/sim-<arm>.log).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proctree import alive, children
from proctree import kill_all as cleanup
from sglab.results.store import load_result

from .conftest import ROOT, child_env, run_dirs

STACK = "eagle-nccl-ll"
LONG_RUN = ["--prompts", "random", "--concurrency", "1,2", "--rounds", "40", "--ungated-rounds", "40", "--round-s",
            "0.5", "--warmup-requests", "1", "--max-new-tokens", "16", "--time-scale", "5"]
EXIT_INVALID = 3


def start_bench(out: Path, extra: list[str] = ()) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sglab.cli", "bench", "--stack", STACK, "--out", str(out), "--no-progress",
           *LONG_RUN, *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def sim_pids(bench_pid: int) -> dict[str, int]:
    """arm -> pid of the simulators the bench started (their stdout is sim-<arm>.log)."""
    found = {}
    for pid in children(bench_pid):
        try:
            target = os.readlink(f"/proc/{pid}/fd/1")
        except OSError:
            continue
        name = Path(target).name
        if name.startswith("sim-") and name.endswith(".log"):
            found[name[4:-4]] = pid
    return found


def wait_running(proc: subprocess.Popen, out: Path, *, into_rounds_s: float = 3.0) -> tuple[Path, dict[str, int]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        dirs = run_dirs(out, STACK)
        sims = sim_pids(proc.pid)
        if dirs and (dirs[0] / "result.json").exists() and len(sims) == 2:
            time.sleep(into_rounds_s)
            return dirs[0], sims
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("the bench did not start measuring within 60 s")


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        raise AssertionError(f"the bench did not end within {timeout:g} s\n{stderr[-3000:]}") from None


@pytest.mark.slow
def test_a_killed_candidate_ends_the_run_invalid_and_keeps_what_was_measured(out):
    proc = start_bench(out)
    sims = {}
    try:
        run_dir, sims = wait_running(proc, out)
        os.kill(sims["candidate"], signal.SIGKILL)
        killed = time.monotonic()
        stdout, stderr = finish(proc, timeout=60)
        ended_after_s = time.monotonic() - killed
    finally:
        cleanup([proc.pid, *sims.values()])
    assert proc.returncode == EXIT_INVALID, stderr[-3000:]
    assert ended_after_s < 20
    result = load_result(run_dir)
    assert result.complete is False
    assert result.invalid_reason and "candidate server exited" in result.invalid_reason
    assert "concurrency 1" in result.invalid_reason and "round" in result.invalid_reason
    assert "invalid" in stderr
    level = result.levels[0]
    assert level.concurrency == 1
    assert any(not s.warmup and not s.error for s in level.requests if s.arm == "candidate")  # kept
    refused = [s for lv in result.levels for s in lv.requests if s.arm == "candidate" and s.error]
    assert len(refused) < 50, f"{len(refused)} failed requests sent to a dead server"
    assert not alive(sims["baseline"])
    assert (run_dir / "result.json").stat().st_size < 2_000_000


@pytest.mark.slow
def test_a_stopped_candidate_is_caught_without_waiting_for_the_request_timeout(out):
    proc = start_bench(out)  # request timeout: the stack's 300 s
    sims = {}
    try:
        run_dir, sims = wait_running(proc, out)
        os.kill(sims["candidate"], signal.SIGSTOP)
        stopped = time.monotonic()
        stdout, stderr = finish(proc, timeout=90)
        ended_after_s = time.monotonic() - stopped
    finally:
        for pid in sims.values():
            if alive(pid):
                os.kill(pid, signal.SIGCONT)
        cleanup([proc.pid, *sims.values()])
    assert proc.returncode == EXIT_INVALID, stderr[-3000:]
    assert ended_after_s < 40
    result = load_result(run_dir)
    assert result.complete is False
    assert result.invalid_reason and "candidate server" in result.invalid_reason
    assert "concurrency 1" in result.invalid_reason
    assert any(not s.warmup and not s.error for s in result.levels[0].requests)


@pytest.mark.slow
def test_a_server_that_answers_health_but_sends_nothing_is_caught_by_the_stall_timeout(out):
    # every stream stalls for 600 s after a few chunks while /health stays 200;
    # request timeout 200 s (stall timeout 20 s)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sglab.cli", "bench", "--stack", STACK, "--prompts", "random", "--out", str(out),
         "--no-progress", "--concurrency", "1", "--rounds", "3", "--round-requests", "2", "--warmup-requests", "0",
         "--max-new-tokens", "16", "--time-scale", "5", "--request-timeout-s", "200",
         "--sim-env", "SGLAB_SIM_STALL_RATE=1", "--sim-env", "SGLAB_SIM_STALL_S=600"],
        cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    try:
        stdout, stderr = finish(proc, timeout=120)
    finally:
        cleanup([proc.pid])
    assert proc.returncode == EXIT_INVALID, stderr[-3000:]
    assert time.monotonic() - started < 60
    (run_dir,) = run_dirs(out, STACK)
    result = load_result(run_dir)
    assert "no progress" in (result.invalid_reason or "")


@pytest.mark.slow
def test_sighup_stops_the_run_like_sigterm_and_the_simulators_with_it(out):
    proc = start_bench(out)
    sims = {}
    try:
        run_dir, sims = wait_running(proc, out)
        proc.send_signal(signal.SIGHUP)
        stdout, stderr = finish(proc, timeout=60)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in sims.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in sims.values() if alive(p)]
    finally:
        cleanup([proc.pid, *sims.values()])
    assert proc.returncode == 130, stderr[-3000:]
    assert not left, "simulators outlived the bench"
    result = load_result(run_dir)
    assert result.complete is False and "SIGHUP" in (result.incomplete_reason or "")
    assert result.finished_at is not None


@pytest.mark.slow
def test_sigkill_of_the_bench_takes_the_simulators_down_and_the_run_shows_abandoned(out):
    proc = start_bench(out)
    sims = {}
    try:
        run_dir, sims = wait_running(proc, out, into_rounds_s=1.0)
        proc.kill()
        proc.communicate(timeout=10)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in sims.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in sims.values() if alive(p)]
    finally:
        cleanup([proc.pid, *sims.values()])
    assert not left, "simulators outlived a SIGKILLed bench"
    result = load_result(run_dir)
    assert result.complete is False and result.incomplete_reason == "running"
    listing = subprocess.run([sys.executable, "-m", "sglab.cli", "results", "--stack", STACK, "--out", str(out)],
                             cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    row = next(line for line in listing.stdout.splitlines() if result.run_id in line)
    assert "abandoned" in row and "running" not in row
