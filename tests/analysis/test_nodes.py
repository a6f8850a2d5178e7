"""A node's offset cancels from a node-balanced design's estimate and is reported on its own."""

from __future__ import annotations

import math

import pytest

from sglab.analysis.nodes import PARALLEL_NOTE, design_estimates, design_of
from sglab.analysis.synthetic import synthetic_result

METRIC = "decode_tok_per_s"


def _level(design: str, node_effect: float, gain: float = 0.0, rounds: int = 16, seed: int = 3):
    result = synthetic_result(levels=(4,), rounds=rounds, gain=gain, design=design, node_effect=node_effect,
                              round_cv=0.004, shared_cv=0.004, request_cv=0.002, seed=seed)
    return result.levels[0]


@pytest.mark.parametrize("node_effect", [0.03, -0.03, 0.08, -0.08])
@pytest.mark.parametrize("design", ["crossover", "switchback"])
def test_identical_configs_estimate_no_config_effect_whatever_the_node_offset(design, node_effect):
    found = design_estimates(_level(design, node_effect), METRIC)
    assert found.design == design
    assert found.problems == ()
    mean = sum(found.values) / len(found.values)
    assert abs(math.expm1(mean)) < 0.006


@pytest.mark.parametrize("node_effect", [0.03, -0.03, 0.08, -0.08])
def test_parallel_estimates_the_node_offset_as_if_it_were_the_config(node_effect):
    found = design_estimates(_level("parallel", node_effect), METRIC)
    mean = sum(found.values) / len(found.values)
    assert abs(math.expm1(mean) - node_effect) < 0.006
    assert found.note == PARALLEL_NOTE


@pytest.mark.parametrize("node_effect", [0.03, -0.08])
def test_crossover_reports_the_node_effect_with_an_interval(node_effect):
    gap = design_estimates(_level("crossover", node_effect, gain=0.04), METRIC).node_effect()
    assert gap is not None and gap.node == "sim-node-b" and gap.other == "sim-node-a"
    assert abs(gap.estimate - node_effect) < 0.006
    assert gap.low < node_effect < gap.high
    assert gap.sentence().startswith(f"node sim-node-b is {gap.estimate:+.1%} [")
    assert gap.sentence().endswith(("faster" if node_effect > 0 else "slower") + " than node sim-node-a")


def test_crossover_gain_is_the_config_effect_not_the_node():
    found = design_estimates(_level("crossover", -0.08, gain=0.04), METRIC)
    assert abs(math.expm1(sum(found.values) / len(found.values)) - 0.04) < 0.006


def test_crossover_pairs_the_jth_rounds_of_the_two_periods_and_completes_in_period_two():
    found = design_estimates(_level("crossover", 0.03, rounds=10), METRIC)
    assert len(found.estimates) == 5
    assert [e.rounds for e in found.estimates] == [6, 7, 8, 9, 10]
    assert found.rounds_at(2) == 7 and found.rounds_at(0) == 0


def test_crossover_period_one_alone_gives_no_estimate_and_says_why():
    level = _level("crossover", 0.03, rounds=10)
    level.rounds = [r for r in level.rounds if r.period == 1]
    found = design_estimates(level, METRIC)
    assert found.estimates == ()
    assert found.pending.startswith("period 1 alone (baseline on node sim-node-a, candidate on node sim-node-b)")
    assert found.node_effect() is None


def test_a_crossover_whose_arms_did_not_swap_nodes_is_a_problem():
    level = _level("crossover", 0.03, rounds=8)
    for r in level.rounds:
        if r.period == 2:
            r.node = "sim-node-a" if r.arm == "baseline" else "sim-node-b"
    problems = design_estimates(level, METRIC).problems
    assert problems and "the arms swap nodes between periods" in problems[0]


def test_switchback_estimates_once_per_complete_abba_block():
    level = _level("switchback", 0.0, rounds=14)
    assert design_of(level) == "switchback"
    found = design_estimates(level, METRIC)
    assert [e.rounds for e in found.estimates] == [4, 8, 12]
    level.rounds = [r for r in level.rounds if r.period <= 3]
    assert design_estimates(level, METRIC).pending.startswith("a switchback estimates once an ABBA block")


def test_switchback_cancels_a_linear_drift():
    level = _level("switchback", 0.0, rounds=16)
    level.requests = []
    steady = design_estimates(level, METRIC).values
    for r in level.rounds:  # every round 3% slower than the one before, whoever serves it
        r.decode_tok_per_s_mean *= math.exp(-0.03 * r.round_index)
    assert design_estimates(level, METRIC).values == pytest.approx(steady, abs=1e-12)


def test_switchback_with_an_arm_out_of_its_abba_turn_is_a_problem():
    level = _level("switchback", 0.0, rounds=8)
    level.rounds[1].arm = "baseline"
    assert any("not the candidate an ABBA block serves" in p for p in design_estimates(level, METRIC).problems)
