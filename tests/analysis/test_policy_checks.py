"""policy.checks: the sequence's floor and holds are a recorded policy key, and a promotion target's checks are
the ones its gate is judged with (production: strict)."""

from __future__ import annotations

import math
import typing

import numpy as np
import pytest
from pydantic import ValidationError

from sglab.analysis import accumulate
from sglab.analysis.sequential import CHECKS, STANDARD, STRICT, checks_named, sequential_test
from sglab.analysis.stops import StopLine, stop_thresholds
from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.config.policy import PromotionPolicy
from sglab.config.serving import CanaryJudge
from sglab.bench.sequential import plan_sentence, stop_rule
from sglab.schema.result import ChecksName, RunResult, SequentialRun


def test_the_policy_names_exactly_the_checks_the_analysis_defines():
    for model in (PromotionPolicy, CanaryJudge):
        field = model.model_fields["checks"]
        assert set(typing.get_args(field.annotation)) == set(CHECKS)
        assert field.default == STANDARD.name
    assert set(typing.get_args(ChecksName)) == set(CHECKS)  # what a result records a line's checks as
    assert checks_named("strict") is STRICT and checks_named(STANDARD) is STANDARD
    with pytest.raises(ValueError, match="'standard' or 'strict'"):
        checks_named("lax")


def clear_gain(rounds: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(math.log1p(0.06), 0.01, rounds)


def test_a_clear_gain_waits_for_the_strict_floor_and_the_record_says_which_checks():
    x = clear_gain(30)
    standard = sequential_test(x, min_gain=0.005, max_rounds=32)
    strict = sequential_test(x, min_gain=0.005, max_rounds=32, checks="strict")
    assert (standard.decision, standard.rounds, standard.checks) == ("promote", 10, "standard")
    assert (strict.decision, strict.rounds, strict.checks) == ("promote", 20, "strict")
    held = sequential_test(x[:15], min_gain=0.005, checks="strict")
    assert held.decision == "continue" and held.last.held == "rounds"
    assert any("no promotion before 20 rounds (15 so far; strict checks)" in n for n in held.notes), held.notes


def policy(**kw) -> dict:
    return PromotionPolicy(**kw).model_dump(mode="json")


def test_the_checks_are_part_of_the_sequence_key_and_an_older_record_continues_the_standard_one():
    common = dict(stack="s", urls={}, kind="ab", config_hash={"baseline": "b", "candidate": "c"}, plan={},
                  target_kind="sim", time_scale=1.0, sim_env={})
    standard = accumulate.key_of(policy=policy(), **common)
    older = {k: v for k, v in policy().items() if k != "checks"}
    assert accumulate.key_of(policy=older, **common) == standard
    assert accumulate.key_of(policy=policy(checks="strict"), **common) != standard


def test_a_verdict_under_strict_checks_holds_what_the_standard_ones_promote():
    result = synthetic_result(levels=(1,), rounds=12, gain=0.06, round_cv=0.005, shared_cv=0.0, seed=3,
                              policy={"method": "sequential", "min_gain": 0.005})
    standard = judge(result, PromotionPolicy(min_gain=0.005))
    strict = judge(result, PromotionPolicy(min_gain=0.005, checks="strict"))
    assert standard.outcome == "promote", standard.sentence
    assert strict.outcome != "promote"
    gain = strict.level(1).decode
    assert gain.held == "rounds" and any("20 rounds" in n for n in gain.notes), gain.notes


def test_the_target_line_carries_the_targets_checks_through_the_stop_rule_and_its_record():
    own, target = PromotionPolicy(min_gain=0.005, levels=[1]), PromotionPolicy(min_gain=0.02, levels=[1, 4],
                                                                               checks="strict")
    lines = stop_rule(own, target)
    assert lines == {1: [StopLine(0.005, "standard"), StopLine(0.02, "strict")], 4: [StopLine(0.02, "strict")]}
    assert "+2.0% production, strict checks" in plan_sentence(lines, own, "production", target)
    result = synthetic_result(levels=(1, 4), rounds=4, policy={"method": "sequential", "min_gain": 0.005})
    result.sequential = SequentialRun.model_validate(
        {"stop_rule": {"1": [[0.005, "standard"], [0.02, "strict"]], "4": [[0.02, "strict"]]}})
    assert stop_thresholds(result, own) == lines


@pytest.mark.parametrize("tampered", [["x"], [0.02, "lax"], True, float("nan"), {"gain": 0.02}, [0.02, "strict", 1],
                                      [0.02, ["strict"]], 0.02])
def test_a_tampered_stop_line_is_refused_when_the_result_is_read(tampered):
    result = synthetic_result(levels=(1,), rounds=4, policy={"method": "sequential", "min_gain": 0.005})
    document = {**result.model_dump(mode="json"), "sequential": {"stop_rule": {"1": [tampered]}}}
    with pytest.raises(ValidationError) as caught:
        RunResult.model_validate(document)
    assert all(e["loc"][:4] == ("sequential", "stop_rule", "1", 0) for e in caught.value.errors())
    for key, lines in (("x", [[0.1, "standard"]]), ("4", "not a list")):
        with pytest.raises(ValidationError, match="sequential.stop_rule"):
            RunResult.model_validate({**document, "sequential": {"stop_rule": {key: lines}}})
