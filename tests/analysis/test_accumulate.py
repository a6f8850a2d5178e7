"""Runs of one pair under one policy extend one sequence; earlier runs are re-verified, never trusted."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from sglab.analysis.accumulate import SequenceError, continue_sequence, recheck, sequence_key
from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge, policy_of
from sglab.results.store import create_run_dir, write_result
from sglab.schema.result import SequenceRecord, SequentialRun

POLICY = {"method": "sequential", "levels": [1], "min_gain": 0.005, "confidence": 0.95, "min_rounds": 3,
          "ttft_p99_max_increase": None}


def _run(base: Path, run_id: str, *, gain: float, seed: int, rounds: int = 12,
         sequence: SequenceRecord | None = None):
    result = synthetic_result(gain=gain, levels=(1,), rounds=rounds, run_id=run_id, seed=seed, policy=POLICY,
                              round_cv=0.02, shared_cv=0.0)
    result.sequential = SequentialRun(sequence=sequence)
    write_result(result, create_run_dir("synthetic", run_id, base))
    return result


def test_a_new_run_continues_the_pair_and_the_verdict_judges_the_union(tmp_path: Path) -> None:
    first = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.006, seed=1)
    key = sequence_key(first)
    policy = policy_of(first)
    record = continue_sequence("synthetic", key, policy, base=tmp_path)
    assert [r.run_id for r in record.runs] == [first.run_id] and not record.fresh
    assert len(record.runs[0].levels["1"]) == 12
    second = _run(tmp_path, "20260101T000002Z-bbbbbb", gain=0.006, seed=2, sequence=record)
    record = continue_sequence("synthetic", key, policy, base=tmp_path)
    assert [r.run_id for r in record.runs] == [first.run_id, second.run_id]
    third = synthetic_result(gain=0.006, levels=(1,), rounds=12, run_id="20260101T000003Z-cccccc", seed=3,
                             policy=POLICY, round_cv=0.02, shared_cv=0.0)
    third.sequential = SequentialRun(sequence=record)
    gain = judge(third).level(1).decode
    assert gain.rounds == 36 and gain.earlier_rounds == 24
    alone = synthetic_result(gain=0.006, levels=(1,), rounds=12, run_id="x", seed=3, policy=POLICY, round_cv=0.02,
                             shared_cv=0.0)
    assert judge(alone).level(1).decode.rounds == 12
    assert recheck(third, tmp_path, policy_of(third)) is None


def test_a_changed_earlier_run_or_a_missing_one_is_refused(tmp_path: Path) -> None:
    first = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.006, seed=1)
    key, policy = sequence_key(first), policy_of(first)
    record = continue_sequence("synthetic", key, policy, base=tmp_path)
    second = _run(tmp_path, "20260101T000002Z-bbbbbb", gain=0.006, seed=2, sequence=record)
    later = synthetic_result(gain=0.006, levels=(1,), rounds=12, run_id="20260101T000003Z-cccccc", seed=3,
                             policy=POLICY, round_cv=0.02, shared_cv=0.0)
    later.sequential = SequentialRun(sequence=continue_sequence("synthetic", key, policy, base=tmp_path))
    path = tmp_path / "synthetic" / first.run_id / "result.json"
    doc = json.loads(path.read_text())
    doc["levels"][0]["rounds"][1]["decode_tok_per_s_mean"] *= 1.2  # a better earlier round, without a new seal
    path.write_text(json.dumps(doc))
    with pytest.raises(SequenceError, match="cannot be trusted"):
        continue_sequence("synthetic", key, policy, base=tmp_path)
    assert "cannot be trusted" in recheck(later, tmp_path, policy_of(later))
    path.unlink()
    with pytest.raises(SequenceError, match="missing"):
        continue_sequence("synthetic", key, policy, base=tmp_path)
    assert "missing" in recheck(later, tmp_path, policy_of(later))
    assert second.run_id  # the newest run of the pair named the missing one


def test_a_promoted_sequence_goes_on_and_a_fresh_start_is_recorded(tmp_path: Path) -> None:
    """A promotion answers this stack's gate; a re-run re-judges the union (and decides a promotion target's
    higher min-gain on it). Starting afresh is explicit."""
    won = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.08, seed=1)
    key, policy = sequence_key(won), policy_of(won)
    record = continue_sequence("synthetic", key, policy, base=tmp_path)
    assert [r.run_id for r in record.runs] == [won.run_id] and not record.fresh
    fresh = continue_sequence("synthetic", key, policy, base=tmp_path, fresh_reason="--fresh-sequence")
    assert fresh.fresh and fresh.reason == "--fresh-sequence" and fresh.runs == []


def test_another_config_or_policy_is_another_sequence(tmp_path: Path) -> None:
    first = synthetic_result(gain=0.006, levels=(1,), rounds=12, policy=POLICY)
    other_policy = synthetic_result(gain=0.006, levels=(1,), rounds=12, policy={**POLICY, "min_gain": 0.01})
    other_arm = synthetic_result(gain=0.006, levels=(1,), rounds=12, policy=POLICY,
                                 config_hash={"baseline": "1" * 64, "candidate": "f" * 64})
    keys = {sequence_key(r) for r in (first, other_policy, other_arm)}
    assert len(keys) == 3 and None not in keys
    assert sequence_key(synthetic_result(kind="aa", levels=(1,), policy=POLICY)) is None
    assert sequence_key(synthetic_result(levels=(1,), policy={**POLICY, "method": "paired-t"})) is None


def test_the_bench_controller_starts_from_the_earlier_rounds() -> None:
    """A re-run whose earlier runs already hold 30 rounds at the minimum: the new rounds extend that sequence."""
    from sglab.analysis.sequential import sequential_test

    rng = np.random.default_rng(7)
    earlier = list(math.log1p(0.03) + rng.normal(0, 0.029, 30))
    fresh = list(math.log1p(0.03) + rng.normal(0, 0.029, 3))
    record = sequential_test(earlier + fresh, min_gain=0.005, max_rounds=32, futility=True, earlier_rounds=30)
    alone = sequential_test(fresh, min_gain=0.005, max_rounds=32, futility=True)
    assert alone.decision == "continue" and record.decision in ("promote", "continue")
    assert record.earlier_rounds == 30 and all(lk.decision == "continue" for lk in record.looks[:30])
    assert record.looks[-1].rounds == 30 + len(fresh) or record.decision == "promote"


def test_a_run_whose_seed_the_sequence_already_counted_is_refused(tmp_path: Path) -> None:
    """The same load seed replays the same prompts, arm order and acceptance draws: no new rounds."""
    first = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.006, seed=1)
    key, policy = sequence_key(first), policy_of(first)
    with pytest.raises(SequenceError, match="seed 1 was already counted by run 20260101T000001Z-aaaaaa"):
        continue_sequence("synthetic", key, policy, base=tmp_path, seed=1)
    record = continue_sequence("synthetic", key, policy, base=tmp_path, seed=2)
    assert [r.run_id for r in record.runs] == [first.run_id]


def test_a_sequence_whose_runs_share_a_seed_is_refused_at_the_bench_and_at_promotion(tmp_path: Path) -> None:
    first = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.006, seed=1)
    key, policy = sequence_key(first), policy_of(first)
    record = continue_sequence("synthetic", key, policy, base=tmp_path)
    replay = _run(tmp_path, "20260101T000002Z-bbbbbb", gain=0.006, seed=1, sequence=record)
    with pytest.raises(SequenceError, match="share load seed 1"):
        continue_sequence("synthetic", key, policy, base=tmp_path, seed=3)
    assert "seed 1 was already counted" in recheck(replay, tmp_path, policy_of(replay))


def _doc(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_changed_or_unreadable_newest_run_refuses_the_sequence(tmp_path: Path) -> None:
    """Editing the newest run's policy would move it out of the pair's key and silently rewind the sequence."""
    first = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.006, seed=1)
    key, policy = sequence_key(first), policy_of(first)
    second = _run(tmp_path, "20260101T000002Z-bbbbbb", gain=0.006, seed=2,
                  sequence=continue_sequence("synthetic", key, policy, base=tmp_path))
    path = tmp_path / "synthetic" / second.run_id / "result.json"
    good = path.read_text()
    doc = _doc(path)
    doc["policy"]["min_gain"] = 0.02
    path.write_text(json.dumps(doc))
    with pytest.raises(SequenceError, match=f"run {second.run_id} .* cannot be trusted") as refused:
        continue_sequence("synthetic", key, policy, base=tmp_path, seed=3)
    assert "--fresh-sequence" in refused.value.fix
    path.write_text("{not json")
    with pytest.raises(SequenceError, match="cannot be read"):
        continue_sequence("synthetic", key, policy, base=tmp_path, seed=3)
    path.write_text(good)
    assert len(continue_sequence("synthetic", key, policy, base=tmp_path, seed=3).runs) == 2


def test_an_old_run_copied_under_a_newer_name_is_refused(tmp_path: Path) -> None:
    first = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.006, seed=1)
    key, policy = sequence_key(first), policy_of(first)
    _run(tmp_path, "20260101T000002Z-bbbbbb", gain=0.006, seed=2,
         sequence=continue_sequence("synthetic", key, policy, base=tmp_path))
    copy = tmp_path / "synthetic" / "20260101T000009Z-zzzzzz"
    copy.mkdir()
    (copy / "result.json").write_text((tmp_path / "synthetic" / first.run_id / "result.json").read_text())
    with pytest.raises(SequenceError, match="holds run 20260101T000001Z-aaaaaa"):
        continue_sequence("synthetic", key, policy, base=tmp_path, seed=3)


def test_another_stacks_run_in_the_stacks_results_is_refused(tmp_path: Path) -> None:
    first = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.006, seed=1)
    key, policy = sequence_key(first), policy_of(first)
    other = synthetic_result(stack="elsewhere", gain=0.006, levels=(1,), rounds=12, run_id="20260101T000002Z-oooooo",
                             seed=2, policy=POLICY, round_cv=0.02, shared_cv=0.0)
    write_result(other, create_run_dir("synthetic", other.run_id, tmp_path))
    with pytest.raises(SequenceError, match="run of stack elsewhere, not synthetic"):
        continue_sequence("synthetic", key, policy, base=tmp_path, seed=3)


def test_the_sequence_key_covers_the_stack_the_design_and_the_servers() -> None:
    first = synthetic_result(gain=0.006, levels=(1,), rounds=12, policy=POLICY)
    other_stack = synthetic_result(stack="elsewhere", gain=0.006, levels=(1,), rounds=12, policy=POLICY)
    parallel = synthetic_result(gain=0.006, levels=(1,), rounds=12, policy={**POLICY, "design": "parallel"})
    servers = synthetic_result(gain=0.006, levels=(1,), rounds=12, policy=POLICY)
    servers.target.kind, servers.target.urls = "urls", {"baseline": "http://a:30000", "candidate": "http://b:30000"}
    other_servers = synthetic_result(gain=0.006, levels=(1,), rounds=12, policy=POLICY)
    other_servers.target.kind = "urls"
    other_servers.target.urls = {"baseline": "http://10.0.0.9:30000", "candidate": "http://10.0.0.8:30000"}
    reseeded = synthetic_result(gain=0.006, levels=(1,), rounds=12, policy=POLICY, seed=77)
    keys = [sequence_key(r) for r in (first, other_stack, parallel, servers, other_servers)]
    assert len(set(keys)) == 5
    assert sequence_key(reseeded) == sequence_key(first)  # the seed is the run's, not the pair's


def test_promotion_refuses_a_sequence_measured_on_other_machines(tmp_path: Path) -> None:
    from sglab.schema.result import ArmMachine

    first = _run(tmp_path, "20260101T000001Z-aaaaaa", gain=0.006, seed=1)
    key, policy = sequence_key(first), policy_of(first)
    later = synthetic_result(gain=0.006, levels=(1,), rounds=12, run_id="20260101T000002Z-bbbbbb", seed=2,
                             policy=POLICY, round_cv=0.02, shared_cv=0.0)
    later.sequential = SequentialRun(sequence=continue_sequence("synthetic", key, policy, base=tmp_path, seed=2))
    assert recheck(later, tmp_path, policy_of(later)) is None
    for arm in later.arms:
        arm.machine = ArmMachine(producer="sglang", server_version="0.5.4", image_digest="sha256:" + "b" * 64,
                                 node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    assert "ran on other machines" in recheck(later, tmp_path, policy_of(later))
