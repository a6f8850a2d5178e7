"""`sglab bench` end to end against real `sglab sim` processes, with real Locust."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest

from sglab.results.store import load_result

from .conftest import FIXED_ITL_MS, FIXED_PROFILE, FIXED_TTFT_MS, ROOT, bench, child_env, load, run_dirs

STACK = "eagle-nccl-ll"
# the stack ships the suite (chat); this file pins random prompts on /generate with exact token counts
SMALL = ["--prompts", "random", "--concurrency", "1,2", "--rounds", "3", "--ungated-rounds", "3", "--round-requests",
         "3", "--warmup-requests", "1", "--max-new-tokens", "16", "--time-scale", "5"]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    proc = bench(["--stack", STACK, *SMALL], out)
    (run_dir,) = run_dirs(out, STACK)
    return out, run_dir, load(run_dir), proc


def test_token_counts_are_exact_and_every_request_is_kept(small_run):
    _, _, result, _ = small_run
    assert result["complete"] is True and result["incomplete_reason"] is None
    for level in result["levels"]:
        requests = level["requests"]
        assert requests, "per-request samples are kept"
        for sample in requests:
            assert sample["error"] is None
            assert sample["output_tokens"] == 16 == sample["expected_output_tokens"]
            assert len(sample["itl_ms"]) == 15
            assert sample["ttft_ms"] > 0 and sample["e2e_ms"] > sample["ttft_ms"]
        for arm in ("baseline", "candidate"):
            summary = level["arms"][arm]
            assert summary["requests"] == 3 * 3 and summary["errors"] == 0
            assert summary["output_tokens"] == 9 * 16
            assert summary["decode_tok_per_s"]["p50"] > 0 and summary["output_tok_per_s"] > 0
        # accept length: the candidate only, client (from the final chunk) and server (counter)
        accept = level["arms"]["candidate"]["accept_length"]
        assert 1.0 <= accept["client_mean"] <= 3.0 and 1.0 <= accept["server_mean"] <= 3.0
        assert level["arms"]["baseline"]["accept_length"] is None


def test_warmup_and_interleaving_are_visible_in_the_samples(small_run):
    _, _, result, _ = small_run
    orders = []
    for level in result["levels"]:
        rounds = level["rounds"]
        warmups = [r for r in rounds if r["warmup"]]
        # the level's warm-up is round -1; a crossover (the default design) warms each arm up again after it
        # moves to the other node, before round r as round -(r+1)
        assert sorted(r["arm"] for r in warmups if r["round_index"] == -1) == ["baseline", "candidate"]
        assert all(r["round_index"] < 0 and r["requests"] == 1 for r in warmups)
        assert sum(1 for s in level["requests"] if s["warmup"]) == len(warmups)
        measured = [r for r in rounds if not r["warmup"]]
        assert [r["round_index"] for r in measured] == [0, 0, 1, 1, 2, 2]
        for i in range(3):
            pair = [r for r in measured if r["round_index"] == i]
            assert sorted(r["arm"] for r in pair) == ["baseline", "candidate"]
            assert sorted(r["position"] for r in pair) == [0, 1]
            orders.append(tuple(r["arm"] for r in sorted(pair, key=lambda r: r["position"])))
        # segments never overlap: each starts after the previous one ended
        ordered = sorted(rounds, key=lambda r: r["started_at_s"])
        for before, after in zip(ordered, ordered[1:]):
            assert after["started_at_s"] >= before["started_at_s"] + before["duration_s"] - 0.05
        # each request lies inside its own arm's segment
        for sample in level["requests"]:
            seg = next(r for r in rounds if (r["arm"], r["round_index"], r["warmup"]) ==
                       (sample["arm"], sample["round_index"], sample["warmup"]))
            assert seg["started_at_s"] - 0.01 <= sample["start_s"] <= seg["started_at_s"] + seg["duration_s"]
    assert len(set(orders)) == 2, f"round order should vary with the seed, got {orders}"
    # both arms get the same prompts in a round
    level = result["levels"][0]
    for i in range(3):
        prompts = {arm: sorted(s["prompt_index"] for s in level["requests"] if s["arm"] == arm
                               and s["round_index"] == i)
                   for arm in ("baseline", "candidate")}
        assert prompts["baseline"] == prompts["candidate"]


def test_result_document_and_locust_reports(small_run):
    out, run_dir, result, proc = small_run
    parsed = load_result(run_dir)  # validates against the schema
    assert parsed.kind == "ab" and parsed.target.kind == "sim" and parsed.target.time_scale == 5.0
    assert set(parsed.config_hash) == {"baseline", "candidate"}
    assert parsed.config_hash["baseline"] != parsed.config_hash["candidate"]
    assert all(a.live_flags_checked and not a.live_mismatches for a in parsed.arms)
    assert parsed.git_commit and parsed.load_plan["max_new_tokens"] == 16
    assert parsed.verdict is not None and parsed.verdict.outcome in ("promote", "reject", "inconclusive")
    stats = (run_dir / "locust_stats.csv").read_text()
    for row in ("baseline /generate", "candidate /generate", "TOKENS,baseline ttft_ms", "candidate decode tok/s",
                "candidate accept_length"):
        assert row in stats
    assert "baseline accept_length" not in stats
    assert (run_dir / "locust_report.html").stat().st_size > 1000
    assert "verdict" in proc.stdout.lower()


@pytest.mark.slow
def test_results_lists_runs_and_a_second_run_never_touches_the_first(small_run, tmp_path):
    out, first_dir, _, _ = small_run
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in first_dir.iterdir()}
    bench(["--stack", STACK, "--prompts", "random", "--concurrency", "1", "--rounds", "1", "--round-requests", "1",
           "--warmup-requests", "0", "--max-new-tokens", "4", "--time-scale", "5"], out)
    dirs = run_dirs(out, STACK)
    assert len(dirs) == 2 and first_dir in dirs
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in first_dir.iterdir()}
    assert before == after
    listing = subprocess.run([sys.executable, "-m", "sglab.cli", "results", "--stack", STACK, "--out", str(out)],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0
    for run_dir in dirs:
        assert run_dir.name in listing.stdout
    assert "ab" in listing.stdout and "yes" in listing.stdout


@pytest.mark.slow
def test_ttft_and_itl_match_a_fixed_sim_profile(out):
    bench(["--stack", STACK, "--prompts", "random", "--concurrency", "1", "--rounds", "2", "--round-requests", "3",
           "--warmup-requests", "1", "--max-new-tokens", "24", "--sim-env", f"SGLAB_SIM_SET={FIXED_PROFILE}"], out)
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert result["target"]["sim_env"]["SGLAB_SIM_SET"] == FIXED_PROFILE
    baseline = result["levels"][0]["arms"]["baseline"]
    # generous tolerances: 2 shared cores; the sim's own scheduling adds a little to every step
    assert FIXED_ITL_MS * 0.95 <= baseline["itl_ms"]["p50"] <= FIXED_ITL_MS * 1.15
    assert FIXED_ITL_MS * 0.95 <= baseline["itl_ms"]["mean"] <= FIXED_ITL_MS * 1.2
    assert FIXED_TTFT_MS * 0.95 <= baseline["ttft_ms"]["p50"] <= FIXED_TTFT_MS + 40
    assert 1000 / FIXED_ITL_MS * 0.85 <= baseline["decode_tok_per_s"]["p50"] <= 1000 / FIXED_ITL_MS * 1.05


@pytest.mark.slow
def test_broken_streams_and_errors_become_failures_with_reasons(out):
    # level 1: the stack's policy gates it, and bench refuses a run that leaves a gated level out
    proc = bench(["--stack", STACK, "--prompts", "random", "--concurrency", "1", "--rounds", "2", "--round-requests",
                  "8", "--warmup-requests", "0", "--max-new-tokens", "16", "--time-scale", "5",
                  "--sim-env", "SGLAB_SIM_DISCONNECT_RATE=0.3", "--sim-env", "SGLAB_SIM_ERROR_RATE=0.2",
                  "--sim-env", "SGLAB_SIM_STALL_RATE=0.2", "--sim-env", "SGLAB_SIM_STALL_S=3",
                  "--request-timeout-s", "1", "--own-gate-only"], out)  # only concurrency 1, not production's 4
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert [lv["concurrency"] for lv in result["levels"]] == [1]
    samples = [s for lv in result["levels"] for s in lv["requests"]]
    errors = [s["error"] for s in samples if s["error"]]
    assert errors, "fault injection should have produced failures"
    assert any(e.startswith("HTTP 5") for e in errors), errors
    assert any(e.startswith("timeout:") for e in errors), errors  # stalled streams hit the 1 s timeout
    broken = [e for e in errors if not e.startswith(("HTTP", "timeout:"))]
    assert broken and all(("broken stream" in e) or ("before [DONE]" in e) or ("wrong token count" in e)
                          for e in broken), broken
    ok = [s for s in samples if not s["error"]]
    assert ok and all(s["output_tokens"] == 16 for s in ok)
    summary = result["levels"][0]["arms"]
    assert sum(a["errors"] for a in summary.values()) == len(errors)
    failures = (run_dir / "locust_failures.csv").read_text()
    assert "HTTP 5" in failures and ("broken stream" in failures or "before [DONE]" in failures)
    assert proc.returncode == 0


@pytest.mark.slow
def test_sigint_keeps_a_valid_incomplete_result(out):
    cmd = [sys.executable, "-m", "sglab.cli", "bench", "--stack", STACK, "--prompts", "random", "--out", str(out),
           "--no-progress", "--concurrency", "1,2", "--rounds", "50", "--round-s", "0.5", "--warmup-requests", "1",
           "--max-new-tokens", "16", "--time-scale", "5"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            dirs = run_dirs(out, STACK)
            if dirs and (dirs[0] / "result.json").exists():
                break
            time.sleep(0.2)
        time.sleep(4.0)  # well into the rounds of level 1
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    (run_dir,) = run_dirs(out, STACK)
    result = load_result(run_dir)
    assert result.complete is False
    assert "SIGINT" in (result.incomplete_reason or "")
    assert result.finished_at is not None
    level = result.levels[0]
    assert level.concurrency == 1 and any(not s.warmup for s in level.requests)
    assert "incomplete" in stderr
    # the simulators were stopped with the run
    assert "sim-baseline.log" in os.listdir(run_dir)


@pytest.mark.slow
def test_live_flag_mismatch_refuses_to_run(out):
    from sglab.config.arms import baseline_arm, candidate_arm
    from sglab.config.loader import load_stack
    from sglab.sim.testing import running_sim

    stack = load_stack(STACK).config
    base, cand = baseline_arm(stack), candidate_arm(stack)
    wrong = [a if a != "0.88" else "0.5" for a in base.args]  # --mem-fraction-static 0.5 instead of 0.88
    with running_sim(wrong, env=base.env) as base_url, running_sim(list(cand.args), env=cand.env) as cand_url:
        proc = bench(["--stack", STACK, "--baseline-url", base_url, "--candidate-url", cand_url,
                      "--concurrency", "1", "--rounds", "1", "--round-requests", "1"], out, check=False)
        assert proc.returncode == 2
        assert "refusing to benchmark" in proc.stderr
        assert "--mem-fraction-static" in proc.stderr and "0.88" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert run_dirs(out, STACK) == []  # nothing measured, nothing written

        # a baseline server that speculates is caught too
        proc = bench(["--stack", STACK, "--baseline-url", cand_url, "--candidate-url", cand_url,
                      "--concurrency", "1", "--rounds", "1", "--round-requests", "1"], out, check=False)
        assert proc.returncode == 2 and "speculative" in proc.stderr

        # the right flags but not the declared NCCL env (the simulator reports the env it runs with)
        no_nccl = {k: v for k, v in cand.env.items() if not k.startswith("NCCL_")}
        with running_sim(list(cand.args), env=no_nccl) as bare_url:
            proc = bench(["--stack", STACK, "--baseline-url", base_url,
                          "--candidate-url", bare_url, "--concurrency", "1", "--rounds", "1",
                          "--round-requests", "1"], out, check=False)
        assert proc.returncode == 2 and "NCCL_PROTO" in proc.stderr and "'LL'" in proc.stderr


@pytest.mark.slow
def test_distributed_workers_run_the_same_schedule(out):
    bench(["--stack", STACK, "--prompts", "random", "--workers", "2", "--concurrency", "1,3", "--rounds", "2",
           "--ungated-rounds", "2", "--round-requests", "5", "--warmup-requests", "1", "--max-new-tokens", "12",
           "--time-scale", "5"], out)
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert result["complete"] and result["loadgen"]["workers"] == 2
    for level in result["levels"]:
        measured = [r for r in level["rounds"] if not r["warmup"]]
        assert [r["requests"] for r in measured] == [5, 5, 5, 5]
        assert all(s["output_tokens"] == 12 and s["error"] is None for s in level["requests"])
        assert len(level["requests"]) == 2 * 5 * 2 + 2 * 2  # warm-ups: at the start, after the crossover swap
    assert "baseline /generate" in (run_dir / "locust_stats.csv").read_text()


@pytest.mark.slow
def test_aa_runs_two_identical_baseline_servers(out):
    bench(["--stack", STACK, "--prompts", "random", "--aa", "--concurrency", "1", "--rounds", "2", "--round-requests",
           "2", "--warmup-requests", "0", "--max-new-tokens", "8", "--time-scale", "5"], out)
    (run_dir,) = run_dirs(out, STACK)
    result = load_result(run_dir)
    assert result.kind == "aa" and [a.name for a in result.arms] == ["baseline", "candidate"]
    assert result.config_hash["baseline"] == result.config_hash["candidate"]
    assert result.target.urls["baseline"] != result.target.urls["candidate"]  # two servers, not one
    candidate = result.arm("candidate")
    assert candidate.role == "candidate" and candidate.speculative is False and not result.confounds
    assert result.levels[0].arms["candidate"].accept_length is None
    assert result.verdict.outcome != "promote"


@pytest.mark.slow
def test_attribute_interleaves_four_arms_in_the_same_rounds(out):
    bench(["--stack", "article-replay", "--prompts", "random", "--attribute", "--concurrency", "1", "--rounds", "2",
           "--round-requests", "2", "--warmup-requests", "0", "--max-new-tokens", "8", "--time-scale", "5"], out)
    (run_dir,) = run_dirs(out, "article-replay")
    result = load_result(run_dir)
    names = ["baseline", "baseline+confounds", "candidate-confounds", "candidate"]
    assert result.kind == "attribute" and [a.name for a in result.arms] == names
    assert len(set(result.config_hash.values())) == 4
    level = result.levels[0]
    for round_index in (0, 1):
        segments = [r for r in level.rounds if r.round_index == round_index]
        assert sorted(r.arm for r in segments) == sorted(names) and sorted(r.position for r in segments) == [0, 1, 2, 3]
    assert level.arms["candidate"].accept_length is not None
    assert level.arms["baseline+confounds"].accept_length is None
