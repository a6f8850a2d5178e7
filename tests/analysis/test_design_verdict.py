"""The verdict judges a design's estimates: the node offset leaves the gain and is reported on its own; period
1 of a crossover alone never promotes; parallel evidence says what its gain includes."""

from __future__ import annotations

from sglab.analysis.stops import decided_rounds, level_log_ratios
from sglab.analysis.verdict import judge
from sglab.analysis.synthetic import synthetic_result
from sglab.report.console import format_table
from sglab.schema.result import SequentialRun

QUIET = dict(round_cv=0.004, shared_cv=0.004, request_cv=0.002)
SEQUENTIAL = {"method": "sequential", "levels": [4], "min-gain": 0.01}


def _run(design: str, node_effect: float, gain: float, rounds: int = 32, seed: int = 5):
    return synthetic_result(levels=(4,), rounds=rounds, gain=gain, design=design, node_effect=node_effect,
                            policy=SEQUENTIAL, seed=seed, **QUIET)


def test_a_slower_node_does_not_hide_a_crossover_win_and_is_reported_apart():
    v = judge(_run("crossover", -0.06, 0.04))
    lv = v.level(4)
    assert v.outcome == "promote" and v.design == "crossover" and v.design_note is None
    assert 0.03 < lv.decode.estimate < 0.05 and lv.decode.rounds == 16
    assert lv.node_effect is not None and -0.07 < lv.node_effect.estimate < -0.05
    table = format_table(v)
    assert f"nodes @4: {lv.node_effect.sentence()}" in table
    assert "node sim-node-b is -" in table and "slower than node sim-node-a" in table
    assert "design: parallel" not in table


def test_the_same_slower_node_hides_the_win_in_parallel_and_the_output_says_so():
    v = judge(_run("parallel", -0.06, 0.04))
    assert v.outcome == "reject" and v.design == "parallel"
    assert v.design_note == "includes any difference between the two nodes"
    assert "design: parallel (the gain includes any difference between the two nodes)" in format_table(v)


def test_identical_configs_on_nodes_8pct_apart_do_not_promote_under_crossover_or_switchback():
    for design in ("crossover", "switchback"):
        v = judge(_run(design, 0.08, 0.0, rounds=64))
        assert v.outcome != "promote", design
        assert abs(v.level(4).decode.estimate) < 0.01, design
    assert judge(_run("parallel", 0.08, 0.0)).outcome == "promote"  # what the node offset does to parallel


def test_crossover_period_one_alone_is_never_promotable_and_says_why():
    result = _run("crossover", 0.0, 0.10, rounds=16)
    for r in result.levels[0].rounds:  # a run of period 1 only: the arms never swapped nodes
        r.period, r.node = 1, "sim-node-a" if r.arm == "baseline" else "sim-node-b"
    v = judge(result)
    assert v.outcome == "inconclusive"
    blocker = next(b for b in v.blockers if b.name == "data@4")
    assert "period 1 alone (baseline on node sim-node-a, candidate on node sim-node-b)" in blocker.detail
    assert "period 1 alone" in v.sentence


def test_the_sequence_looks_once_per_estimate_and_a_stop_maps_back_to_rounds():
    result = _run("crossover", 0.03, 0.04, rounds=20)
    assert len(level_log_ratios(result.levels[0], "decode_tok_per_s")) == 10
    result.sequential = SequentialRun()  # it stopped on its sequence (what decides is recomputed, never read)
    policy = judge(result).policy
    from sglab.config.policy import PromotionPolicy
    stop = decided_rounds(result, PromotionPolicy.model_validate(policy))[4]
    assert stop == 20  # a crossover estimate completes with period 2's rounds: the 10th at round 20


def test_a_run_whose_rounds_contradict_its_recorded_design_is_blocked():
    from sglab.schema.result import DesignRecord
    result = _run("parallel", 0.0, 0.04)
    result.design = DesignRecord(design="crossover")
    v = judge(result)
    assert v.outcome != "promote"
    assert any(b.name == "design@4" and "records a crossover design" in b.detail for b in v.blockers)


def test_more_rounds_of_an_undecided_crossover_are_rounds_not_pairs():
    crossover = judge(_run("crossover", 0.03, 0.015, rounds=16, seed=8)).level(4)
    assert crossover.outcome == "undecided" and crossover.more_rounds is not None
    from sglab.analysis.sequential import rounds_to_decide
    g = crossover.decode
    pairs = rounds_to_decide(mean_log=g.mean_log, sd_log=g.sd_log, threshold_log=0.00995033, rounds_now=g.rounds,
                             confidence=0.95, method="sequential", checks="standard")
    assert crossover.more_rounds == 2 * pairs
