"""Output parity: temperature-0 answers of the candidate against the baseline's (and the baseline's A/A), recomputed
from the request samples, shown in the verdict table, and a gate by default: no worse than the A/A parity (100% on
the simulator) minus policy.output-parity-margin."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sglab.analysis.provenance import first_difference, output_parity
from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.config.policy import PromotionPolicy
from sglab.promotion.promote import PromotionRefused, promote
from sglab.report.console import format_table
from sglab.results.store import load_result

from tests.promote.test_promote import bench, root  # noqa: F401  (fixture)

DATA = Path(__file__).parents[1] / "data" / "results"
QUIET = dict(round_cv=0.005, shared_cv=0.005, request_cv=0.01, rounds=12)  # past the sequence's 10-round floor


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def answered(result, answer):
    """Give every request of `result` a temperature-0 answer: answer(arm, round, prompt) -> text."""
    for level in result.levels:
        for sample in level.requests:
            text = answer(sample.arm, sample.round_index, sample.prompt_index)
            sample.temperature, sample.output_sha256 = 0.0, sha(text)
            result.output_texts[sha(text)] = text
    return result


def test_first_difference_counts_characters() -> None:
    assert first_difference("the model", "the modem") == 8
    assert first_difference("abc", "abcdef") == 3 and first_difference("", "x") == 0


def test_identical_answers_are_full_parity() -> None:
    result = answered(synthetic_result(levels=(1, 4), **QUIET), lambda arm, r, p: f" answer to {p}")
    parity = output_parity(result)
    assert parity.candidate.pairs > 0 and parity.candidate.share == 1.0
    assert parity.candidate.first_difference_chars_mean is None
    assert [lv.concurrency for lv in parity.levels] == [1, 4]


def test_different_answers_count_and_say_where_they_differ() -> None:
    """Every third prompt of the candidate changes at character 12."""
    def answer(arm, r, p):
        return f" answer to {p:04d} the end" if arm == "baseline" or p % 3 else f" answer to {p:04d} THE end"
    result = answered(synthetic_result(levels=(1,), **QUIET), answer)
    asked = {(s.round_index, s.prompt_index) for s in result.levels[0].requests if s.arm == "baseline"}
    paired = [s for s in result.levels[0].requests if s.arm == "candidate" and (s.round_index, s.prompt_index) in asked]
    expected = sum(1 for s in paired if s.prompt_index % 3) / len(paired)  # the faster arm's extra requests: unpaired
    parity = output_parity(result)
    assert parity.candidate.share == pytest.approx(expected)
    assert parity.candidate.first_difference_chars_mean == len(" answer to 0000 ")
    assert parity.aa.share == 1.0  # the baseline answers a prompt the same in every round


def test_requests_not_at_temperature_0_or_failed_are_not_paired() -> None:
    result = answered(synthetic_result(levels=(1,), **QUIET), lambda arm, r, p: f"{arm} {p}")
    for sample in result.levels[0].requests:
        sample.temperature = 0.7
    assert output_parity(result) is None


def test_an_old_result_has_no_parity_and_cannot_promote_on_it() -> None:
    """Written before answers were recorded: no parity line, and the gate is unmeasurable (a blocker)."""
    result = load_result(DATA / "v1-article-replay.json")
    assert output_parity(result) is None
    verdict = judge(result)
    assert verdict.output_parity is None and not any(line.startswith("output parity")
                                                     for line in format_table(verdict).splitlines())
    assert any(b.name == "output-parity" for b in verdict.blockers) and verdict.outcome != "promote"


def test_the_table_shows_parity_and_the_aa_next_to_it() -> None:
    result = answered(synthetic_result(levels=(1,), **QUIET), lambda arm, r, p: f" {p}")
    table = format_table(judge(result))
    line = next(line for line in table.splitlines() if line.startswith("output parity"))
    assert "candidate = baseline in 100.0% of" in line and "A/A, the baseline against itself" in line


def _policy(**kw) -> PromotionPolicy:
    return PromotionPolicy(levels=[1], **kw)


def _changed(arm, r, p, every=1):
    return f"{p}" if arm == "baseline" or p % every else f"{p} changed"


def test_a_candidate_that_changes_its_answers_is_rejected_by_default() -> None:
    """No parity key set: on the simulator (lossless) the floor is 100% minus the default margin."""
    result = answered(synthetic_result(levels=(1,), gain=0.08, **QUIET), _changed)
    verdict = judge(result, _policy())
    guard = next(g for g in verdict.guards if g.name == "output-parity")
    assert verdict.outcome == "reject" and not guard.ok
    assert "output parity 0.0%" in guard.detail and "< 95.0% = 100% (the simulator is lossless)" in guard.detail
    assert "parity" in guard.fix and "does not beat" not in guard.fix
    half = answered(synthetic_result(levels=(1,), gain=0.08, **QUIET), lambda a, r, p: _changed(a, r, p, every=2))
    assert judge(half, _policy()).outcome == "reject"
    assert judge(half, _policy(output_parity_margin=0.6)).outcome == "promote"


def test_on_real_servers_the_floor_is_the_baselines_own_aa_parity() -> None:
    """Servers whose baseline varies by itself (every 5th prompt differs by round): the candidate may vary as much."""
    def varies(arm, r, p, changed_every=0):
        text = f"{p} round {r}" if p % 5 == 0 else f"{p}"
        return text + " changed" if changed_every and arm == "candidate" and p % changed_every == 1 else text

    same = answered(synthetic_result(levels=(1,), gain=0.08, producer="sglang", **QUIET), varies)
    verdict = judge(same, _policy())
    guard = next(g for g in verdict.guards if g.name == "output-parity")
    assert guard.ok and "A/A" in guard.detail and verdict.outcome == "promote", guard.detail
    worse = answered(synthetic_result(levels=(1,), gain=0.08, producer="sglang", **QUIET),
                     lambda a, r, p: varies(a, r, p, changed_every=3))
    guard = next(g for g in judge(worse, _policy()).guards if g.name == "output-parity")
    assert not guard.ok and "policy.output-parity-margin 5.0%" in guard.detail


def test_output_parity_without_recorded_answers_blocks() -> None:
    result = synthetic_result(levels=(1,), gain=0.08, **QUIET)
    for sample in result.levels[0].requests:
        sample.temperature = 0.7
    verdict = judge(result, _policy())
    assert verdict.outcome == "inconclusive" and any(b.name == "output-parity" for b in verdict.blockers)


def test_the_synthetic_candidate_answers_as_the_baseline() -> None:
    parity = output_parity(synthetic_result(levels=(1,), **QUIET))
    assert parity.candidate.pairs > 0 and parity.candidate.share == 1.0


def test_a_wider_parity_margin_than_recorded_is_a_weakened_policy(root: Path) -> None:  # noqa: F811
    bench(root, "eagle-nccl-ll", policy={"levels": [1], "output_parity_margin": 0.01, "method": "paired-t"})
    with pytest.raises(PromotionRefused) as info:
        promote("eagle-nccl-ll", root=root, dry_run=True)
    assert "policy.output-parity-margin: 0.05 is wider than the recorded 0.01" in info.value.why
