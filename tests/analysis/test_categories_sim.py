"""Per-category results end to end on the simulator: two categories of known acceptance (code, chat)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.core.paths import project_root
from sglab.load.datasets import load_suite
from sglab.sim.acceptance import ContentAcceptance
from sglab.sim.profile import SimProfile
from sglab.sglang.env import without_server_env

pytestmark = pytest.mark.slow
PER_CATEGORY = 16


def _truth(category: str) -> float:
    """E[a] of the stack's candidate (EAGLE-3, 2 steps, topk 1, 3 draft tokens) for templated prompts."""
    profile = SimProfile()
    model = ContentAcceptance(profile.accept_prob_by_position, profile.accept_prob_tail, depth=2, topk=1)
    return model.model(category, templated=True).expected_accept_length()


def test_per_category_accept_lengths_match_the_simulators_truth(tmp_path: Path) -> None:
    rows, at = [], 0.0
    for category in ("code", "chat"):
        for item in load_suite(categories=(category,)).take(PER_CATEGORY):
            rows.append({"timestamp_s": round(at, 3), "messages": [dict(m) for m in item.messages],
                         "output_tokens": 64, "category": category})
            at += 0.05
    rows.sort(key=lambda r: r["timestamp_s"])
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stack = (project_root() / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text().split("  sglab:load:")[0]
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.cats.yaml").write_text(
        # 4 fixed rounds read once: the fixed-n paired-t (the default sequence is unbounded before round 5)
        stack.replace("config:\n",
                      "config:\n  sglab:load:\n    endpoint: chat\n  sglab:policy:\n    method: paired-t\n", 1))
    env = without_server_env(os.environ)
    env.update(SGLAB_STACKS_DIR=str(tmp_path / "stacks"), SGLAB_RESULTS_DIR=str(tmp_path / "results"))
    proc = subprocess.run([sys.executable, "-m", "sglab.cli", "bench", "--stack", "cats", "--target", "sim",
                           "--profile", "trace", "--trace", str(trace), "--rounds", "4", "--warmup-requests", "0",
                           "--time-scale", "5", "--no-progress"], capture_output=True, text=True, env=env,
                          timeout=600, cwd=project_root())
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result_file,) = (tmp_path / "results").glob("cats/*/result.json")
    result = json.loads(result_file.read_text())
    assert {r["category"] for lv in result["levels"] for r in lv["requests"]} == {"code", "chat"}
    from sglab.analysis.verdict import judge
    from sglab.results.store import load_result

    verdict = judge(load_result(result_file.parent))
    found = {c.category: c for c in verdict.categories}
    assert set(found) == {"code", "chat"}
    for category, c in found.items():
        truth = _truth(category)
        print(f"{category}: accept {c.accept_length:.3f} [{c.accept_low:.3f}, {c.accept_high:.3f}] truth {truth:.3f}; "
              f"gain {c.gain.estimate:+.1%} [{c.gain.low:+.1%}, {c.gain.high:+.1%}]")
        assert c.accept_length == pytest.approx(truth, rel=0.04), (category, c.accept_length, truth)
        assert c.accept_low is not None and c.accept_low < c.accept_length < c.accept_high
        assert c.gain.rounds == 4 and c.gain.low is not None  # a paired interval per category
    assert found["code"].accept_length > found["chat"].accept_length
    assert "categories @" in proc.stdout
