"""Each verdict branch and each guard, on synthetic results with known truth."""

from __future__ import annotations

import pytest

from sglab.analysis import Verdict, judge
from sglab.report.console import format_table
from sglab.analysis.synthetic import synthetic_result
from sglab.config.policy import PromotionPolicy
from sglab.schema.result import RunResult

QUIET = dict(round_cv=0.005, shared_cv=0.005, request_cv=0.01)
NCCL_CONFOUND = [{"key": "env NCCL_PROTO", "baseline": None, "candidate": "LL"}]


def test_clear_gain_promotes() -> None:
    v = judge(synthetic_result(gain=0.059, **QUIET))
    assert v.outcome == "promote"
    lv = v.level(1)
    assert lv is not None and lv.gating and lv.outcome == "win"
    assert lv.decode.low is not None and lv.decode.low >= 0.01
    assert 0.04 < lv.decode.estimate < 0.08
    assert not v.blockers and all(g.ok for g in v.guards)
    assert v.sentence.startswith("promote:")
    assert "next: sglab promote --stack synthetic --dry-run" in format_table(v)


def test_loss_rejects() -> None:
    v = judge(synthetic_result(gain=-0.05, **QUIET))
    assert v.outcome == "reject"
    assert v.level(1).outcome == "lose"
    assert v.level(1).decode.high < 0.01


def test_no_gain_rejects_when_precise() -> None:
    v = judge(synthetic_result(gain=0.0, round_cv=0.0005, shared_cv=0.0, request_cv=0.001))
    assert v.outcome == "reject"


def test_noisy_small_gain_is_inconclusive_and_says_how_many_rounds() -> None:
    v = judge(synthetic_result(gain=0.03, round_cv=0.03, shared_cv=0.0, rounds=4, seed=3))
    assert v.level(1).outcome == "undecided"
    assert v.outcome == "inconclusive"
    assert v.more_rounds is not None and v.more_rounds >= 1
    assert "more rounds" in v.sentence
    assert f"next: sglab bench --stack synthetic --rounds {4 + v.more_rounds}" in format_table(v)


def test_non_gating_levels_do_not_decide() -> None:
    v = judge(synthetic_result(gain={1: 0.059, 4: 0.01, 16: -0.08}, **QUIET))
    assert v.outcome == "promote"
    assert v.level(16).outcome == "lose" and not v.level(16).gating
    assert v.crossover.status == "between" and 4 < v.crossover.concurrency < 16


def test_policy_naming_more_levels_makes_them_gate() -> None:
    policy = PromotionPolicy(levels=[1, 16])
    v = judge(synthetic_result(gain={1: 0.059, 4: 0.01, 16: -0.08}, **QUIET), policy)
    assert v.outcome == "reject"


def test_policy_recorded_with_the_run_is_used() -> None:
    v = judge(synthetic_result(gain=0.059, policy={"min-gain": 0.2}, **QUIET))
    assert v.min_gain == 0.2 and v.outcome == "reject"


@pytest.mark.parametrize("case, kwargs, blocker", [
    ("confound", dict(confounds=NCCL_CONFOUND), "confounds"),
    ("live mismatch", dict(live_mismatches=["candidate: --speculative-num-steps live=5 declared=2"]), "live-flags"),
    ("incomplete", dict(complete=False), "incomplete"),
    ("too few rounds", dict(rounds=3, policy={"min-rounds": 4}), "rounds@1"),
    ("baseline errors", dict(error_rate={"baseline": 0.2}), "baseline-errors@1"),
])
def test_blockers_never_promote(case: str, kwargs: dict, blocker: str) -> None:
    result = synthetic_result(gain=0.08, **QUIET, **kwargs)
    v = judge(result)
    assert v.statistical_outcome == "promote", case
    assert v.outcome == "inconclusive", case
    assert blocker in [b.name for b in v.blockers], case
    assert all(b.fix for b in v.blockers)


def test_too_few_requests_never_promotes() -> None:
    v = judge(synthetic_result(gain=0.08, policy={"min-requests": 10_000}, **QUIET))
    assert v.outcome == "inconclusive"
    assert "requests@1" in [b.name for b in v.blockers]


def test_candidate_errors_reject() -> None:
    v = judge(synthetic_result(gain=0.08, error_rate={"candidate": 0.15}, **QUIET))
    assert v.outcome == "reject"
    failed = [g for g in v.guards if not g.ok]
    assert failed and failed[0].name.startswith("errors@")


def test_ttft_guard_rejects() -> None:
    v = judge(synthetic_result(gain=0.08, candidate_ttft_factor=2.5, **QUIET))
    assert v.outcome == "reject"
    assert any(g.name == "ttft-p99@1" and not g.ok for g in v.guards)


def test_itl_guard_when_named() -> None:
    result = synthetic_result(gain=0.08, rounds=12, **QUIET)  # the sequence promotes from 10 rounds on
    assert judge(result, PromotionPolicy(itl_p99_max_increase=-0.5)).outcome == "reject"
    assert judge(result, PromotionPolicy(itl_p99_max_increase=0.2)).outcome == "promote"


def test_aa_never_promotes_even_when_numbers_would() -> None:
    faked = synthetic_result(gain=0.08, **QUIET).model_copy(update={"kind": "aa"})
    v = judge(faked)
    assert v.statistical_outcome == "promote" and v.outcome == "inconclusive"
    assert any("A/A check FAILED" in r for r in v.reasons)


def test_real_aa_passes_the_check() -> None:
    v = judge(synthetic_result(kind="aa", **QUIET))
    assert v.outcome != "promote" and v.statistical_outcome != "promote"
    assert v.baseline_arm == "baseline" and v.candidate_arm == "baseline-b"
    assert any("A/A check passed" in r for r in v.reasons)


def test_missing_gating_level_is_inconclusive() -> None:
    v = judge(synthetic_result(gain=0.08, levels=(4, 16), **QUIET))
    assert v.outcome == "inconclusive"
    assert "data@1" in [b.name for b in v.blockers]


def test_round_samples_alone_give_the_same_decision() -> None:
    with_req = judge(synthetic_result(gain=0.059, seed=5, **QUIET))
    rounds_only = judge(synthetic_result(gain=0.059, seed=5, with_requests=False, **QUIET))
    assert with_req.outcome == rounds_only.statistical_outcome == "promote"
    # without request samples there are no answers to compare: output parity is unmeasurable, a blocker
    assert [b.name for b in rounds_only.blockers] == ["output-parity"]
    assert with_req.level(1).decode.estimate == pytest.approx(rounds_only.level(1).decode.estimate, abs=1e-9)


def test_verdict_serialises_into_the_result() -> None:
    result = synthetic_result(gain=0.059, **QUIET)
    v = judge(result)
    stored = result.model_copy(update={"verdict": v})
    again = RunResult.model_validate_json(stored.model_dump_json())
    assert isinstance(again.verdict, Verdict) and again.verdict == v


def test_stored_verdict_is_never_trusted() -> None:
    result = synthetic_result(gain=-0.05, **QUIET)
    forged = judge(synthetic_result(gain=0.08, **QUIET))
    assert judge(result.model_copy(update={"verdict": forged})).outcome == "reject"


def test_table_ends_with_a_grepable_outcome() -> None:
    for gain, outcome in ((0.059, "promote"), (-0.05, "reject")):
        text = format_table(judge(synthetic_result(gain=gain, **QUIET)))
        assert text.splitlines()[-1] == f"verdict: {outcome}"
        assert "break-even accept length" in text and "crossover" in text


def test_bootstrap_method_runs() -> None:
    v = judge(synthetic_result(gain=0.059, **QUIET), PromotionPolicy(method="bootstrap"))
    assert v.method == "bootstrap" and v.level(1).decode.low is not None


def test_a_result_with_one_arm_is_a_clear_error() -> None:
    from sglab.core.errors import ConfigError

    result = synthetic_result(**QUIET)
    one = result.model_copy(update={"arms": result.arms[:1]})
    with pytest.raises(ConfigError, match="fewer than two arms"):
        judge(one)


def test_a_candidate_that_always_fails_is_rejected() -> None:
    v = judge(synthetic_result(error_rate={"candidate": 1.0}, levels=(1,), **QUIET))
    assert v.outcome == "reject"
    assert v.level(1).outcome == "no-data" and v.level(1).output.estimate is None
    assert [g.name for g in v.guards if not g.ok] == ["errors@1"]
    assert "data@1" in [b.name for b in v.blockers]
    assert "n/a" not in v.sentence
