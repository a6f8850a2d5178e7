"""Plain `locust -f loadtests/locustfile.py`, as users run it, against two real simulators."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.config.arms import baseline_arm, candidate_arm
from sglab.config.loader import load_stack
from sglab.sim.testing import running_sim

from .conftest import FIXED_ITL_MS, FIXED_PROFILE, FIXED_TTFT_MS, ROOT, child_env, locust_stats


def _random_words_stack(tmp_path) -> Path:
    """eagle-nccl-ll sending random words on /generate: the short, even requests this test's timings assume."""
    stack = (ROOT / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text().split("  sglab:load:")[0]
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    section = "  sglab:load:\n    endpoint: generate\n    prompts:\n      source: random\n"
    (stacks / "Pulumi.plain.yaml").write_text(stack.replace("config:\n", "config:\n" + section, 1))
    return stacks


@pytest.mark.slow
def test_plain_locust_run_measures_full_streams_and_token_rows(tmp_path):
    stack = load_stack("eagle-nccl-ll").config
    base, cand = baseline_arm(stack), candidate_arm(stack)
    fixed = {"SGLAB_SIM_SET": FIXED_PROFILE}
    with running_sim(list(base.args), env={**base.env, **fixed}) as base_url, \
            running_sim(list(cand.args), env={**cand.env, **fixed}) as cand_url:
        prefix = tmp_path / "plain"
        proc = subprocess.run(
            [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "-u", "2", "-r", "10",
             "-t", "6s", "--only-summary",
             "--stop-timeout", "30", "--csv", str(prefix), "--max-new-tokens", "16", "--stack", "plain",
             "--baseline-url", base_url],
            cwd=ROOT, env=child_env({"SGLAB_CANDIDATE_URL": cand_url,
                                     "SGLAB_STACKS_DIR": str(_random_words_stack(tmp_path))}),
            capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(open(f"{prefix}_stats.csv"))}
    for arm in ("baseline", "candidate"):
        main = rows[("POST", f"{arm} /generate")]
        assert int(main["Request Count"]) >= 3 and int(main["Failure Count"]) == 0
        ttft = rows[("TOKENS", f"{arm} ttft_ms")]
        assert int(ttft["Request Count"]) == int(main["Request Count"]) or int(ttft["Request Count"]) >= 3
        # Locust's response time is the whole stream, not the time to headers (which comes with TTFT)
        assert float(main["Median Response Time"]) >= 2.5 * float(ttft["Median Response Time"])
        assert ("TOKENS", f"{arm} decode tok/s") in rows and ("TOKENS", f"{arm} itl_ms mean/request") in rows
    baseline_main = float(rows[("POST", "baseline /generate")]["Median Response Time"])
    assert baseline_main >= FIXED_TTFT_MS + 15 * FIXED_ITL_MS * 0.95  # TTFT + 15 gaps
    baseline_itl = float(rows[("TOKENS", "baseline itl_ms mean/request")]["Median Response Time"])
    assert FIXED_ITL_MS * 0.95 <= baseline_itl <= FIXED_ITL_MS * 1.2
    assert ("TOKENS", "candidate accept_length x1000") in rows
    assert ("TOKENS", "baseline accept_length x1000") not in rows


@pytest.mark.slow
def test_custom_arguments_are_registered():
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--list"],
                          cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "BaselineUser" in proc.stdout and "CandidateUser" in proc.stdout
    assert "ArmUser" not in proc.stdout  # the runner-only user stays out of plain runs


@pytest.mark.slow
def test_chat_endpoint_counts_tokens_exactly(tmp_path):
    stack = load_stack("eagle-nccl-ll").config
    cand = candidate_arm(stack)
    with running_sim(list(cand.args), env={**cand.env, "SGLAB_SIM_TIME_SCALE": "5"}) as url:
        proc = subprocess.run(
            [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "-u", "2", "-r", "10",
             "-t", "3s", "--stop-timeout", "30", "--only-summary", "--json-file", str(tmp_path / "chat"),
             "--endpoint", "chat", "--max-new-tokens", "12", "--candidate-url", url, "CandidateUser"],
            cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = locust_stats(tmp_path / "chat.json")
    main = stats[("POST", "candidate /v1/chat/completions")]
    # a wrong token count would be a failure: every chat stream carried exactly 12 tokens (how many streams a 3 s run
    # completes depends on how busy the machine is; one is enough to show it)
    assert main["num_requests"] >= 1 and main["num_failures"] == 0
    assert ("TOKENS", "candidate decode tok/s") in stats
