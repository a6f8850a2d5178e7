"""Typed records in result files: today's files load, records mirror the config models field for field."""

from __future__ import annotations

import json
from pathlib import Path

from sglab.analysis.verdict import judge, policy_of
from sglab.report.console import render_console
from sglab.config.loadplan import LoadPlan
from sglab.config.policy import PromotionPolicy
from sglab.schema.records import Confound, RecordedLoadPlan, RecordedPolicy
from sglab.schema.result import RunResult
from sglab.results.store import load_result

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
