"""Typed records in result files: today's files load, records mirror the config models field for field."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from sglab.analysis.sequential import sequential_test
from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge, policy_of
from sglab.core.errors import ConfigError
from sglab.results import integrity
from sglab.report.console import render_console
from sglab.config.loadplan import LoadPlan
from sglab.config.policy import PromotionPolicy
from sglab.schema.records import Confound, RecordedLoadPlan, RecordedPolicy
from sglab.schema.result import RunResult
from sglab.results.store import create_run_dir, load_result, write_result
from sglab.sweep.race import node_offsets, race_record

DATA = Path(__file__).parents[1] / "data" / "results"
V1 = DATA / "v1-article-replay.json"


def test_recorded_policy_has_exactly_the_policy_fields() -> None:
    assert list(RecordedPolicy.model_fields) == list(PromotionPolicy.model_fields)


def test_recorded_load_plan_has_exactly_the_load_plan_fields_plus_the_ui_ones() -> None:
    recorded = [f for f in RecordedLoadPlan.model_fields if f not in RecordedLoadPlan.INTERACTIVE_FIELDS]
    assert recorded == list(LoadPlan.model_fields)


def test_a_result_file_of_the_previous_format_loads_typed_and_judges_as_before() -> None:
    result = load_result(V1)
    assert isinstance(result.policy, RecordedPolicy) and result.policy.levels == [1]
    assert isinstance(result.load_plan, RecordedLoadPlan) and result.load_plan.max_new_tokens == 8
    assert result.load_plan["max_new_tokens"] == 8 and result.policy.get("metric") == "decode_tok_per_s"
    assert [c.key for c in result.confounds] == ["env NCCL_ALGO", "env NCCL_P2P_LEVEL", "env NCCL_PROTO"]
    assert all(isinstance(c, Confound) for c in result.confounds)
    expected = (DATA / "v1-article-replay.compare.txt").read_text(encoding="utf-8").rstrip("\n")
    assert render_console(result, judge(result)) == expected  # what `sglab compare` prints


def test_writing_back_keeps_the_recorded_keys() -> None:
    raw = json.loads(V1.read_text(encoding="utf-8"))
    dumped = load_result(V1).model_dump(mode="json")
    assert dumped["policy"] == raw["policy"] and dumped["load_plan"] == raw["load_plan"]
    assert dumped["confounds"] == raw["confounds"]


def test_empty_records_of_old_files_mean_not_recorded_and_explicit_nulls_are_kept() -> None:
    raw = json.loads(V1.read_text(encoding="utf-8"))
    raw["policy"], raw["load_plan"] = {}, {}
    result = RunResult.model_validate(raw)
    assert result.policy is None and result.load_plan is None
    # today's defaults, except the interval: a file that records no method predates the sequential
    # default and is judged with the fixed-n paired-t it was written under
    assert policy_of(result) == PromotionPolicy(method="paired-t")
    raw["policy"] = {"min_gain": 0.02, "ttft_p99_max_increase": None}
    policy = policy_of(RunResult.model_validate(raw))
    assert policy.min_gain == 0.02 and policy.ttft_p99_max_increase is None  # not the default 0.5


def test_an_interactive_plan_keeps_its_ui_fields_and_others_do_not_grow_them() -> None:
    plan = RecordedLoadPlan.model_validate({"rounds": 3, "interactive": True, "pseudo_round_window_s": 5.0})
    assert plan.model_dump()["interactive"] is True and plan.pseudo_round_window_s == 5.0
    assert "interactive" not in RecordedLoadPlan(rounds=3).model_dump()


def test_a_newer_writer_s_unknown_plan_key_is_kept() -> None:
    plan = RecordedLoadPlan.model_validate({"rounds": 3, "profile": "rate"})
    assert plan.model_dump()["profile"] == "rate"


ARM = {"name": "s3-k1-d4", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4, "adaptive": False,
       "variant": "default", "nccl": {}, "config_hash": "c" * 64}
SWEEP_VERDICT = {"kind": "sweep", "outcome": "swept", "sentence": "sweep of 2 arms: pick s3-k1-d4", "metric":
                 "decode_tok_per_s", "winner": "s3-k1-d4", "winner_config_hash": "c" * 64,
                 "winner_cleared_min": True, "p_correct": 0.97, "p_correct_guaranteed": False, "p_clears_min": 0.9,
                 "arms": ["s3-k1-d4", "s5-k1-d6"],
                 "ranking": [{"level": 1, "rank": 1, "arm": "s3-k1-d4", "status": "picked", "rounds": 8,
                              "baseline_rounds": 8, "gain": 0.05, "low": 0.01, "high": 0.09, "eliminated_at": None,
                              "reason": None, "node": None, "gap_to_pick": None, "p_beats_pick": None,
                              "p_correct": 0.97}]}


def _race() -> dict:
    """A gated level's race as a sweep records it (sweep.json's records, a confirmation's selected_by): two arms,
    one slot node calibrated, eight rounds."""
    rng = np.random.default_rng(3)
    values = np.log([100.0, 106.0, 101.0]) + rng.normal(0.0, 0.01, (8, 3))
    offsets = node_offsets(np.log([[100.0, 100.5]] * 4) + rng.normal(0.0, 0.01, (4, 2)), ["slot"], confidence=0.95)
    record = race_record(["s3-k1-d4", "s5-k1-d6"], values, min_gain=0.01, max_rounds=8, arm_nodes=["slot", "slot"],
                         baseline_node="base", calibration=offsets, calibration_rounds=4)
    return record.model_dump(mode="json")


def _recorded_run() -> dict:
    """A sequential A/B whose result records all three: the looks and the sequence, a sweep arm, the verdict."""
    result = synthetic_result(levels=(1,), rounds=8, gain=0.05, seed=4, policy={"method": "sequential"})
    own = sequential_test([math.log1p(0.05)] * 4 + [math.log1p(0.04)] * 4, min_gain=0.005, max_rounds=16)
    target = sequential_test([math.log1p(0.05)] * 8, min_gain=0.02, max_rounds=16, checks="strict")
    sequence = {"key": "k" * 32, "metric": "decode_tok_per_s", "fresh": False, "reason": None,
                "runs": [{"run_id": "20260101T000001Z-aaaaaa", "algorithm": "sha256", "digest": "d" * 64,
                          "levels": {"1": [0.01, 0.02]}}]}
    document = result.model_dump(mode="json")
    document["sequential"] = {"1": own.model_dump(mode="json"),
                              "stop_rule": {"1": [[0.005, "standard"], [0.02, "strict"]]},
                              "others": {"1": [target.model_dump(mode="json")]}, "sequence": sequence}
    document["sweep"] = {"sweep_run_id": "20260101T000000Z-sweep", "arm": copy.deepcopy(ARM),
                         "selected_by": {"1": _race()}, "note": "confirmation of the sweep's winner on fresh rounds"}
    document["verdict"] = judge(result).model_dump(mode="json")
    return document


def test_a_result_recording_looks_a_sweep_arm_and_a_verdict_round_trips_through_the_store(tmp_path: Path) -> None:
    document = _recorded_run()
    result = RunResult.model_validate(document)
    path = write_result(result, create_run_dir(result.stack, result.run_id, tmp_path))
    back = load_result(path)
    assert integrity.verify(back) is None
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert back.model_dump(mode="json") == stored  # a round trip adds no key and drops none
    for key in ("sequential", "sweep", "verdict"):
        assert stored[key] == document[key], key  # written exactly as the writers shape them
    assert back.sequential.levels[1].checks == "standard" and back.sequential.stop_rule["1"][1] == (0.02, "strict")
    assert back.sequential.others["1"][0].looks[-1].rounds == 8
    assert back.sequential.sequence.runs[0].levels == {"1": [0.01, 0.02]}
    assert back.sweep.arm.num_draft_tokens == 4 and "algorithm" not in stored["sweep"]["arm"]
    assert back.sweep.selected_by["1"].calibration[0].node == "slot" and back.sweep.selected_by["1"].looks
    assert back.verdict.outcome == judge(back).outcome


def test_a_sweep_verdict_and_a_run_that_continues_no_sequence_keep_their_shape(tmp_path: Path) -> None:
    document = _recorded_run()
    del document["sequential"]["sequence"]
    document["verdict"] = SWEEP_VERDICT
    path = write_result(RunResult.model_validate(document), create_run_dir("synthetic", "r1", tmp_path))
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert "sequence" not in stored["sequential"] and stored["verdict"] == SWEEP_VERDICT
    assert load_result(path).verdict.winner == "s3-k1-d4"


@pytest.mark.parametrize(("edit", "key", "problem"), [
    (lambda d: d["sequential"]["1"]["looks"][0].update(mean_log="high"), "sequential.1.looks.0.mean_log",
     "valid number"),
    (lambda d: d["sequential"]["1"].update(bogus=1), "sequential.1.bogus", "Extra inputs"),
    (lambda d: d["sequential"].update(bogus={}), "sequential", "unknown key 'bogus'"),
    (lambda d: d["sequential"]["stop_rule"]["1"].append([0.02, "lax"]), "sequential.stop_rule.1.2.1", "'strict'"),
    (lambda d: d["sequential"]["sequence"]["runs"][0]["levels"].update({"x": [0.1]}),
     "sequential.sequence.runs.0.levels.x.[key]", "pattern"),
    (lambda d: d["sweep"]["arm"].pop("num_steps"), "sweep.arm.num_steps", "Field required"),
    (lambda d: d["sweep"]["arm"].update(num_steps=-1), "sweep.arm.num_steps", "greater than or equal to 0"),
    (lambda d: d["sweep"]["arm"].update(name=""), "sweep.arm.name", "at least 1 character"),
    (lambda d: d["sweep"]["selected_by"]["1"].update(outcome="won"), "sweep.selected_by.1.outcome", "'selected'"),
    (lambda d: d["sweep"]["selected_by"]["1"].pop("arms"), "sweep.selected_by.1.arms", "Field required"),
    (lambda d: d["sweep"]["selected_by"]["1"]["arms"][0].update(forged=True), "sweep.selected_by.1.arms.0.forged",
     "Extra inputs"),
    (lambda d: d["sweep"]["selected_by"]["1"]["calibration"][0].update(rounds="many"),
     "sweep.selected_by.1.calibration.0.rounds", "valid integer"),
    (lambda d: d["sweep"]["selected_by"].update(x=d["sweep"]["selected_by"]["1"]), "sweep.selected_by.x.[key]",
     "pattern"),
    (lambda d: d["verdict"]["levels"][0]["decode"].update(estimate="big"), "verdict.Verdict.levels.0.decode.estimate",
     "valid number"),
    (lambda d: d["verdict"].update(forged=True), "verdict.Verdict.forged", "Extra inputs"),
])
def test_a_malformed_record_is_refused_when_read_naming_its_key(tmp_path: Path, edit, key: str, problem: str) -> None:
    document = _recorded_run()
    edit(document)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_result(path)
    assert caught.value.key == key and problem in caught.value.problem, (caught.value.key, caught.value.problem)


def test_a_sweep_verdict_records_every_status_a_sweep_state_has() -> None:
    """One declaration of a sweep's statuses (sglab.schema.verdict.SweepStatus), read by the state and the verdict."""
    from sglab.core.paths import project_root
    from sglab.schema.verdict import SweepStatus, SweepVerdict
    from sglab.sweep.run import SweepState

    assert SweepState.model_fields["status"].annotation == SweepStatus
    assert SweepVerdict.model_fields["outcome"].annotation == SweepStatus
    sglab = project_root() / "sglab"
    declared = [str(p.relative_to(sglab)) for p in sorted(sglab.rglob("*.py"))
                if '"confirming", "confirmed", "not-confirmed"' in p.read_text(encoding="utf-8")]
    assert declared == ["schema/verdict.py"]
