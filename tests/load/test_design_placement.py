"""Where each arm runs in each round (sglab/load/design.py): the round layout the analysis reads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sglab.config.loadplan import LoadPlan
from sglab.config.policy import PromotionPolicy
from sglab.config.server import SimSpec
from sglab.load.design import Placement, placement_for

A, B = ("sim-node-a", 1.0), ("sim-node-b", 0.96)


def _request(design: str, *, target_kind: str = "sim", arms=("baseline", "candidate"), nodes=None,
             period_rounds: int = 4, kind: str = "ab"):
    sim = SimSpec() if nodes is None else SimSpec.model_validate({"nodes": nodes})
    config = SimpleNamespace(policy=PromotionPolicy(design=design), sim=sim)
    return SimpleNamespace(loaded=SimpleNamespace(config=config), target_kind=target_kind, kind=kind,
                           arms=[SimpleNamespace(name=a) for a in arms],
                           plan=LoadPlan(period_rounds=period_rounds), joined=None, arm_nodes={})


def test_crossover_swaps_the_nodes_every_period_and_keeps_both_arms_in_every_round():
    p = Placement("crossover", ["baseline", "candidate"], [A, B], period_rounds=2)
    periods = [p.period(r, 8) for r in range(8)]
    assert periods == [1, 1, 2, 2, 3, 3, 4, 4]
    assert p.nodes_for(1) == p.nodes_for(3) == {"baseline": A, "candidate": B}
    assert p.nodes_for(2) == p.nodes_for(4) == {"baseline": B, "candidate": A}
    assert all(p.arms_of(period, ["candidate", "baseline"]) == ["candidate", "baseline"] for period in periods)


def test_switchback_serves_one_arm_per_round_in_abba_periods_on_one_node():
    p = Placement("switchback", ["baseline", "candidate"], [A, B], period_rounds=1)
    served = [p.arms_of(p.period(r, 8), ["candidate", "baseline"]) for r in range(8)]
    assert served == [["baseline"], ["candidate"], ["candidate"], ["baseline"]] * 2
    assert p.nodes_for(2) == {"baseline": None, "candidate": A}
    assert p.nodes_for(4) == {"baseline": A, "candidate": None}


def test_parallel_places_the_baseline_on_the_first_node_and_has_no_periods():
    p = Placement("parallel", ["baseline", "candidate"], [A, B])
    assert p.period(3, 16) is None and p.nodes_for(None) == {"baseline": A, "candidate": B}


@pytest.mark.parametrize("design, rounds, length", [("crossover", 16, 4), ("crossover", 4, 2), ("crossover", 1, 1),
                                                     ("switchback", 16, 4), ("switchback", 4, 1)])
def test_a_level_too_short_for_a_cycle_gets_shorter_periods(design, rounds, length):
    assert Placement(design, ["baseline", "candidate"], [A, B], period_rounds=4).period_length(rounds) == length


def test_every_arm_starts_on_a_node_so_its_live_flags_can_be_checked():
    p = Placement("switchback", ["baseline", "candidate"], [A, B])
    assert p.start_nodes() == {"baseline": A, "candidate": A}
    assert p.start_env()["candidate"] == {"SGLAB_SIM_NODE": "sim-node-a", "SGLAB_SIM_NODE_SPEED": "1"}


def test_the_stack_nodes_and_period_come_from_the_request():
    p = placement_for(_request("crossover", nodes={"n1": 1.0, "n2": 0.9}, period_rounds=3))
    assert (p.design, p.nodes, p.period_rounds, p.notes) == ("crossover", [("n1", 1.0), ("n2", 0.9)], 3, [])


def test_servers_given_by_url_cannot_move_and_run_parallel_with_a_note():
    p = placement_for(_request("crossover", target_kind="urls"))
    assert p.design == "parallel" and "cannot move" in p.notes[0] and "crossover" in p.notes[0]


def test_more_than_two_arms_run_parallel_with_a_note():
    p = placement_for(_request("switchback", arms=("baseline", "a", "b", "candidate"), kind="attribute"))
    assert p.design == "parallel" and "attribute run has 4" in p.notes[0]


def test_a_sweeps_race_runs_parallel_even_with_two_arms():
    p = placement_for(_request("crossover", kind="sweep"))
    assert p.design == "parallel" and "sweep run" in p.notes[0]


def test_a_crossover_on_one_node_runs_switchback_with_a_note():
    p = placement_for(_request("crossover", nodes={"only": 1.0}))
    assert p.design == "switchback" and "one node" in p.notes[0]


@pytest.mark.parametrize("design", ["crossover", "switchback"])
@pytest.mark.parametrize("period_rounds", [1, 2, 4, 8])
def test_the_rounds_a_design_needs_for_its_looks_give_at_least_that_many(design: str, period_rounds: int) -> None:
    """A sweep's confirmation asks for looks at its sequence; the rounds it runs must hold that many pairs (whole
    cycles of two periods) or ABBA blocks, as the bench lays the periods out."""
    from sglab.analysis.nodes import rounds_for_looks

    placement = Placement(design=design, arms=["baseline", "candidate"], nodes=[("a", 1.0), ("b", 1.0)],
                          period_rounds=period_rounds)
    for looks in range(1, 17):
        rounds = rounds_for_looks(design, looks, period_rounds)
        periods = [placement.period(i, rounds) for i in range(rounds)]
        per_period = {p: periods.count(p) for p in set(periods)}
        if design == "crossover":
            got = sum(min(per_period.get(p, 0), per_period.get(p + 1, 0)) for p in per_period if p % 2 == 1)
        else:
            got = sum(1 for p in per_period if p % 4 == 1 and p + 3 in per_period)
        assert got >= looks, (looks, rounds, per_period)
    assert rounds_for_looks("parallel", 10, period_rounds) == 10
