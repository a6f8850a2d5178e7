"""The rate and trace profiles against real simulators: arrival times, the same requests for both arms, paired
rounds."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from sglab.config.loadplan import LoadPlan
from sglab.core.errors import ConfigError
from sglab.load.profiles import Arrivals, profile_for, read_trace

from .conftest import ROOT, bench, child_env, load, run_dirs

STACK = "eagle-nccl-ll"
TRACE = ROOT / "tests" / "data" / "trace_small.jsonl"
# 2 shared cores: a gevent wake-up can be late by tens of ms under load, so the bounds are loose;
# benchmarks/ (not tests) measure the accuracy.
MEDIAN_LATE_MS = 25.0
P90_LATE_MS = 150.0


def segments(level: dict) -> dict[tuple[str, int], tuple[dict, list[dict]]]:
    rounds = {(r["arm"], r["round_index"]): r for r in level["rounds"]}
    out = {}
    for key, rnd in rounds.items():
        samples = sorted((s for s in level["requests"] if (s["arm"], s["round_index"]) == key),
                         key=lambda s: s["start_s"])
        out[key] = (rnd, samples)
    return out


def lateness_ms(rnd: dict, samples: list[dict], offsets: list[float]) -> list[float]:
    return [1000 * ((s["start_s"] - rnd["started_at_s"]) - offsets[i]) for i, s in enumerate(samples)]


def assert_paired_same_requests(level: dict, rounds: int) -> None:
    segs = segments(level)
    for r in range(rounds):
        base, cand = segs[("baseline", r)][1], segs[("candidate", r)][1]
        assert base and cand, f"round {r}: both arms measured"
        n = min(len(base), len(cand))
        assert abs(len(base) - len(cand)) <= max(2, n // 10)  # only arrivals at the window's edge may differ
        assert [s["prompt_index"] for s in base[:n]] == [s["prompt_index"] for s in cand[:n]]
        assert [s["expected_output_tokens"] for s in base[:n]] == [s["expected_output_tokens"] for s in cand[:n]]
    assert {r["round_index"] for r in level["rounds"] if not r["warmup"]} == set(range(rounds))


@pytest.mark.slow
def test_rate_profile_sends_poisson_arrivals_on_schedule_to_both_arms(out):
    # level 1 req/s too: the stack's policy gates level 1, and bench refuses a run that cannot measure it
    bench(["--stack", STACK, "--prompts", "random", "--profile", "rate", "--rates", "1,20", "--rounds", "2",
           "--ungated-rounds", "2",
           "--round-s", "1.5", "--warmup-requests", "0", "--max-new-tokens", "8", "--time-scale", "5"], out)
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert result["complete"] is True
    assert result["load_plan"]["profile"] == "rate" and result["loadgen"]["profile"] == "rate"
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 20]  # the levels are the rates
    # at 1 req/s most of the 64 users hold an arrival far beyond the 1.5 s window: closing the gate wakes them
    assert all(r["duration_s"] < 4.0 for r in result["levels"][0]["rounds"])
    level = result["levels"][1]
    assert_paired_same_requests(level, 2)
    late = []
    seed = result["load_plan"]["seed"]  # drawn for the run and recorded
    for (_arm, r), (rnd, samples) in segments(level).items():
        arrivals = Arrivals(20.0, poisson=True, seed=f"arrivals:{seed}:20:{r}")
        offsets = [arrivals.start_offset_s(i) for i in range(len(samples))]
        assert offsets[-1] < 1.5 + 0.2  # nothing scheduled after the window was sent
        assert 15 <= len(samples) <= 60  # 1.5 s at 20/s: 30 expected
        late += lateness_ms(rnd, samples, offsets)
    assert min(late) > -5.0, "no request may start before its arrival time"
    assert statistics.median(late) < MEDIAN_LATE_MS
    assert sorted(late)[int(0.9 * len(late))] < P90_LATE_MS


@pytest.mark.slow
def test_trace_profile_replays_the_trace_at_its_times_with_its_lengths(out):
    rows = read_trace(TRACE)
    bench(["--stack", STACK, "--profile", "trace", "--trace", str(TRACE), "--rounds", "2", "--ungated-rounds", "2",
           "--round-s", "3", "--warmup-requests", "1", "--time-scale", "5"], out)
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert result["complete"] is True and result["load_plan"]["trace"]["file"] == str(TRACE)
    (level,) = result["levels"]
    assert_paired_same_requests(level, 2)
    offsets = [stamp - rows[0][0] for stamp, _ in rows]
    late = []
    for (_arm, r), (rnd, samples) in segments(level).items():
        if r < 0:
            assert len(samples) == 1
            continue
        assert [s["prompt_index"] for s in samples] == list(range(len(rows)))  # the whole trace, in order
        assert [s["expected_output_tokens"] for s in samples] == [p.output_tokens for _, p in rows]
        assert all(s["error"] is None and s["output_tokens"] == s["expected_output_tokens"] for s in samples)
        assert rnd["requests"] == len(rows)
        late += lateness_ms(rnd, samples, offsets)
    assert min(late) > -5.0
    assert statistics.median(late) < MEDIAN_LATE_MS


def test_arrival_processes():
    poisson = Arrivals(50.0, poisson=True, seed="x")
    offsets = [poisson.start_offset_s(i) for i in range(5001)]
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    assert offsets[0] == 0.0 and all(g >= 0 for g in gaps)
    assert statistics.mean(gaps) == pytest.approx(1 / 50, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(1 / 50, rel=0.08)  # exponential: sd = mean
    again = Arrivals(50.0, poisson=True, seed="x")
    assert [again.start_offset_s(i) for i in (3, 0, 4000)] == [offsets[3], offsets[0], offsets[4000]]
    constant = Arrivals(4.0, poisson=False, seed="x")
    assert [constant.start_offset_s(i) for i in range(4)] == [0.0, 0.25, 0.5, 0.75]
    plan = LoadPlan(profile="rate", seed=3)
    profile = profile_for(plan)
    assert profile.levels() == [1, 4, 16] and profile.users_for(4) == plan.rate.max_in_flight
    assert profile.pacing(4, 2).start_offset_s(7) == profile.pacing(4, 2).start_offset_s(7)
    assert profile.pacing(4, 2).start_offset_s(7) != profile.pacing(4, 3).start_offset_s(7)


@pytest.mark.parametrize("lines,problem", [
    (['{"timestamp_s": 1, "prompt": "a", "output_tokens": 4}',
      '{"timestamp_s": 0.5, "prompt": "b", "output_tokens": 4}'],
     "before the previous line"),
    (['{"timestamp_s": 0, "prompt": "a"}'], "output_tokens"),
    (['{"timestamp_s": 0, "output_tokens": 3}'], "exactly one of prompt or messages"),
    (['{"timestamp_s": -1, "prompt": "a", "output_tokens": 3}'], "timestamp_s must be a number >= 0"),
    (['not json'], "not JSON"),
])
def test_bad_traces_name_the_line_and_the_fix(tmp_path, lines, problem):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as caught:
        read_trace(path)
    assert problem in str(caught.value) and str(path) in str(caught.value)
    assert caught.value.line == len(lines)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sglab.cli", "bench", "--stack", STACK, *args], cwd=ROOT,
                          env=child_env(), capture_output=True, text=True, timeout=60)


def test_bad_profile_input_is_refused_before_anything_starts(tmp_path):
    proc = run_cli("--profile", "bursty", "--out", str(tmp_path))
    assert proc.returncode == 2 and "load.profile" in proc.stderr and "concurrency, rate, trace" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_cli("--profile", "trace", "--trace", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path))
    assert proc.returncode == 2 and "trace file not found" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("--profile", "rate", "--workers", "2", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--workers" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / STACK).exists()
    assert json.loads(TRACE.read_text().splitlines()[0])["timestamp_s"] == 0.0
