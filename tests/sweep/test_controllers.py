"""The per-round control of a sweep (its best-arm race) and of a sequential bench, on synthetic rounds (no servers,
no Locust)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sglab.config import load_stack
from sglab.load.request import BenchRequest
from sglab.load.schedule import plan_for
from sglab.schema.result import LevelResult, RoundSample, SequentialRun
from sglab.sweep.grid import expand
from sglab.sweep.run import SweepController, load_state, new_state
from sglab.bench.sequential import SequentialBench

BASE = 1000.0


def rounds_of(gains: dict[str, float], n: int, *, sd: float = 0.01, seed: int = 0,
              only: dict[str, int] | None = None, asked: list[list[str]] | None = None,
              nodes: dict[str, tuple[str, float]] | None = None) -> LevelResult:
    """n paired rounds at concurrency 1: baseline at 1000 tok/s and each arm at 1000 * (1 + gain), with noise.
    `only`: arm -> rounds it gets (an eliminated arm stops); `asked`: the arms of each round (the race's plan);
    `nodes`: arm -> (its node, the node's speed)."""
    rng = np.random.default_rng(seed)
    rows = []
    nodes = nodes or {}
    for i in range(n):
        for position, arm in enumerate(["baseline", *gains]):
            noise = rng.normal(0, sd)  # drawn for every arm, so a round's values do not depend on who ran
            if (only and arm in only and i >= only[arm]) or (asked is not None and arm not in asked[i]):
                continue
            node, speed = nodes.get(arm, (None, 1.0))
            rate = BASE * (1 + gains.get(arm, 0.0)) * speed * math.exp(noise)
            rows.append(RoundSample(level=1, round_index=i, position=position, arm=arm, started_at_s=float(i),
                                    duration_s=1.0, requests=5, errors=0, output_tokens=500, node=node,
                                    output_tok_per_s=rate, decode_tok_per_s_mean=rate))
    return LevelResult(concurrency=1, rounds=rows)


def controller(tmp_path: Path, arms=("s1-k1-d2", "s3-k1-d4-LL", "s5-k1-d6-LL"), target: str = "urls"
               ) -> SweepController:
    """The race's control for servers given by URL (no slot layout); target "sim" adds the calibration block of
    the simulated slot nodes."""
    loaded = load_stack("eagle-sweep")
    grid = expand(loaded)
    grid.arms = [a for a in grid.arms if a.name in arms]
    plan = plan_for(loaded, quick=True)
    state = new_state(loaded, grid, plan, run_id="r1", quick=True, sim_env={}, target=target)
    state.save(tmp_path)
    return SweepController(state, plan, loaded.config.policy, tmp_path, echo=lambda _: None)


def measured(ctl: SweepController, gains: dict[str, float], asked: list[list[str]], *, sd: float = 0.01,
             seed: int = 0) -> LevelResult:
    """The rounds of `asked` as the runner records them: the calibration arms (the baseline's config) gain
    nothing, every arm on its node of the controller's layout (equal speeds)."""
    gains = {**{arm: 0.0 for arm in ctl.calibration_arms}, **gains}
    nodes = {arm: (node, 1.0) for arm, node in ctl.state.arm_nodes.items()}
    return rounds_of(gains, len(asked), sd=sd, seed=seed, asked=asked, nodes=nodes)


def race(ctl: SweepController, gains: dict[str, float], *, sd: float = 0.01, seed: int = 0,
         stop_after: int | None = None) -> list[list[str]]:
    """Run the gated level as the runner would: each round measures what the controller asks for (a calibration
    block first where the controller has one)."""
    asked: list[list[str]] = []
    block = ctl.calibration_rounds
    for n in range(ctl.rounds_at(1)):
        arms = ctl.arms_for_round(1, n)
        if not arms or (stop_after is not None and n >= block + stop_after):
            break
        asked.append(arms)
        ctl.round_done(1, n, measured(ctl, gains, asked, sd=sd, seed=seed))
        if n >= block:
            assert load_state(ctl.run_dir).records["1"]["rounds"] == n + 1 - block  # saved after this round
    return asked


def test_the_contenders_not_every_survivor_get_the_rounds(tmp_path: Path) -> None:
    names = [a.name for a in expand(load_stack("eagle-sweep")).arms][:8]
    ctl = controller(tmp_path, names)
    gains = {name: -0.005 + 0.015 * i for i, name in enumerate(names)}  # the last is best (+10%), 1.5% ahead
    asked = race(ctl, gains, sd=0.02)
    state = load_state(tmp_path)
    record = state.records["1"]
    assert state.winner == names[-1] and record["outcome"] in ("picked", "selected")
    assert record["p_correct"] >= 0.95 and record["off_plan"] == []
    screening = ctl.policy.min_rounds
    assert all(sorted(a) == sorted(["baseline", *names]) for a in asked[:screening])  # everyone, at first
    later = asked[screening:]
    assert later and all(len([a for a in arms if a != "baseline"]) <= 3 for arms in later)  # pick + 2 challengers
    assert all(names[-1] in arms for arms in later)  # the pick is in every one of them
    assert sum(len(a) for a in asked) == record["arm_rounds"] < (len(names) + 1) * len(asked)
    for a in record["arms"]:  # an eliminated arm gets no further rounds
        if a["eliminated_at"]:
            assert not any(a["arm"] in arms for arms in asked[a["eliminated_at"]:])
    # the ungated levels run the pick and its challengers only
    assert ctl.arms_for_round(4, 0) == ["baseline", *state.finalists] and state.finalists[0] == names[-1]
    assert 1 < len(state.finalists) <= 3
    assert ctl.arms_for_round(4, ctl.ungated_rounds) == []


def test_resume_recomputes_the_same_decisions_from_the_saved_rounds(tmp_path: Path) -> None:
    ctl = controller(tmp_path)
    gains = {"s1-k1-d2": -0.2, "s3-k1-d4-LL": 0.02, "s5-k1-d6-LL": 0.03}
    asked = race(ctl, gains, sd=0.02, stop_after=7)
    saved = load_state(tmp_path)
    again = controller(tmp_path / "again")
    again.update(1, rounds_of(gains, len(asked), sd=0.02, asked=asked))
    assert again.state.records["1"] == saved.records["1"]
    assert again.arms_for_round(1, len(asked)) == ctl.arms_for_round(1, len(asked))


def test_on_simulated_slot_nodes_a_calibration_block_comes_first_and_the_race_is_net_of_each_nodes_offset(
        tmp_path: Path) -> None:
    """eagle-sweep's two simulated nodes: the baseline on the first, the arms on the second (the slot), made 10%
    slower here. Without the correction the best arm (+3%) would read -7% and be eliminated below min-gain."""
    ctl = controller(tmp_path, target="sim")
    assert ctl.state.arm_nodes == {"baseline": "sim-node-a", "baseline@sim-node-b": "sim-node-b",
                                   "s1-k1-d2": "sim-node-b", "s3-k1-d4-LL": "sim-node-b", "s5-k1-d6-LL": "sim-node-b"}
    block = ctl.calibration_rounds
    assert block == 8 and ctl.rounds_at(1) == block + ctl.state.max_rounds
    assert ctl.warmup_arms(1) == ["baseline", "baseline@sim-node-b", "s1-k1-d2", "s3-k1-d4-LL", "s5-k1-d6-LL"]
    gains = {"baseline@sim-node-b": 0.0, "s1-k1-d2": -0.2, "s3-k1-d4-LL": 0.01, "s5-k1-d6-LL": 0.03}
    nodes = {"baseline": ("sim-node-a", 1.0), **{arm: ("sim-node-b", 0.9) for arm in gains}}
    asked: list[list[str]] = []
    for n in range(ctl.rounds_at(1)):
        arms = ctl.arms_for_round(1, n)
        if not arms:
            break
        asked.append(arms)
        ctl.round_done(1, n, rounds_of(gains, n + 1, sd=0.005, asked=asked, nodes=nodes))
    assert all(arms == ["baseline", "baseline@sim-node-b"] for arms in asked[:block])
    assert all("baseline@sim-node-b" not in arms for arms in asked[block:])
    record = load_state(tmp_path).records["1"]
    (offset,) = record["calibration"]
    assert offset["node"] == "sim-node-b" and offset["rounds"] == block
    assert offset["low"] < -0.1 < offset["high"]
    assert record["winner"] == "s5-k1-d6-LL" and record["rounds"] == len(asked) - block
    best = next(a for a in record["arms"] if a["arm"] == "s5-k1-d6-LL")
    assert best["node"] == "sim-node-b" and best["estimate"] == pytest.approx(0.03, abs=0.01)


def test_sequential_bench_stops_a_gated_level_at_its_decision_and_records_every_look() -> None:
    loaded = load_stack("eagle-nccl-ll")
    request = BenchRequest(loaded=loaded, plan=plan_for(loaded, quick=True))
    seq = SequentialBench(request, max_rounds=30, echo=lambda _: None)
    stopped = None
    for n in range(1, 31):
        seq.round_done(1, n - 1, rounds_of({"candidate": 0.06}, n))
        if not seq.arms_for_round(1, n):
            stopped = n
            break
    record = seq.records["1"]
    assert record.decision == "promote" and stopped == record.rounds < 30
    assert [look.rounds for look in record.looks] == list(range(1, stopped + 1))
    assert all(look.decision == "continue" for look in record.looks[:-1])
    assert seq.arms_for_round(4, 0) == ["baseline", "candidate"]  # ungated: the fixed rounds
    assert seq.arms_for_round(4, request.plan.ungated_rounds) == []
    flat = SequentialBench(request, max_rounds=12, echo=lambda _: None)
    for n in range(1, 13):
        flat.round_done(1, n - 1, rounds_of({"candidate": 0.005}, n, sd=0.03))
        if not flat.arms_for_round(1, n):
            break
    assert flat.records["1"].decision in ("futile", "inconclusive", "reject")


def test_the_evidence_check_accepts_a_sequential_run_only_where_its_sequence_stopped() -> None:
    from sglab.analysis.checks import _schedule_problems
    from sglab.analysis.synthetic import synthetic_result
    from sglab.analysis.stops import decided_rounds

    policy = {"method": "sequential", "levels": [1]}
    full = synthetic_result(levels=(1,), rounds=30, gain=0.06, policy=policy)
    full.sequential = SequentialRun()  # what run_sequential records: this run stopped on its sequence
    stop = decided_rounds(full,
                          load_stack("eagle-nccl-ll").config.policy.model_copy(update={"method": "sequential"}))[1]
    assert 5 <= stop < 30

    def cut(n: int):
        result = synthetic_result(levels=(1,), rounds=30, gain=0.06, policy=policy)
        level = result.levels[0]
        level.rounds = [r for r in level.rounds if r.round_index < n]
        level.requests = [q for q in level.requests if q.round_index < n]
        result.load_plan = result.load_plan.model_copy(update={"rounds": 30})
        result.sequential = SequentialRun()  # a sequential run (run_sequential records its looks)
        return result

    assert _schedule_problems(cut(stop)) == []  # stopped at its decision: what its plan says
    assert any("is missing" in p for p in _schedule_problems(cut(stop - 1)))  # stopped before it decided
    assert any("beyond the planned" in p for p in _schedule_problems(cut(stop + 2)))  # went on after it


def test_a_cluster_calibration_step_runs_only_the_baseline_config_in_every_slot_and_records_the_offsets(
        tmp_path: Path) -> None:
    """The calibration step before a cluster sweep's wave 1 (docs/sweep.md, "On a cluster"): every slot serves the
    baseline's config (`baseline@sglang-slot-<i>`, by URL); its Job runs calibration-rounds rounds of them beside the
    baseline at each gated level, no race, and ends `calibrated` with each slot node's offset; the nodes are the
    ones the rounds record (the pods' nodes), never the slot names."""
    from sglab.sweep.outputs import sweep_verdict
    from sglab.sweep.run import finish

    loaded = load_stack("eagle-sweep")
    grid = expand(loaded)
    grid.arms = []
    plan = plan_for(loaded, quick=True)
    slots = ["baseline@sglang-slot-1", "baseline@sglang-slot-2"]
    state = new_state(loaded, grid, plan, run_id="cal", quick=True, sim_env={}, target="in-cluster",
                      calibration=slots)
    ctl = SweepController(state, plan, loaded.config.policy, tmp_path, echo=lambda _: None)
    assert state.arm_nodes == {s: s.split("@")[1] for s in slots} and state.contenders == []
    block = ctl.calibration_rounds
    assert block == loaded.config.sweep.calibration_rounds == 8
    nodes = {"baseline": ("node-a", 1.0), slots[0]: ("node-b", 0.9), slots[1]: ("node-c", 1.05)}
    asked: list[list[str]] = []
    for n in range(ctl.rounds_at(1)):
        arms = ctl.arms_for_round(1, n)
        if not arms:
            break
        asked.append(arms)
        ctl.round_done(1, n, rounds_of({s: 0.0 for s in slots}, n + 1, sd=0.005, asked=asked, nodes=nodes))
    assert asked == [["baseline", *slots]] * block
    assert ctl.arms_for_round(4, 0) == []  # the ungated levels: nothing to run
    finish(state, synthetic_complete(), tmp_path)
    saved = load_state(tmp_path)
    assert saved.status == "calibrated" and saved.winner is None
    cal = saved.calibration["1"]
    assert cal["baseline_node"] == "node-a"
    assert [(o["node"], o["rounds"]) for o in cal["offsets"]] == [("node-b", 8), ("node-c", 8)]
    assert cal["offsets"][0]["low"] < -0.1 < cal["offsets"][0]["high"]
    verdict = sweep_verdict(saved)
    assert verdict["outcome"] == "calibrated" and verdict["winner"] is None and verdict["ranking"] == []
    assert "node-b: -10" in verdict["sentence"] and "against node-a" in verdict["sentence"]


def synthetic_complete():
    from sglab.analysis.synthetic import synthetic_result

    return synthetic_result(levels=(1,), rounds=2, stack="eagle-sweep").model_copy(update={"complete": True})
