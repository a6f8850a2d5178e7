"""A sweep's slot nodes are calibrated: the baseline config on each slot node beside the baseline gives the node's
offset with an interval, and the race compares arms net of their node's offset, its bounds widened by the
intervals, so a slow node cannot hide the best arm and a fast one cannot crown a worse one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sglab.sweep.race import CALIBRATION_ALPHA_SHARE, Race, arm_corrections, node_offsets, race_record

SLOW, FAST = math.log(0.92), math.log(1.03)  # two slot nodes against the baseline's node
NOISE = 0.015  # per server and round, beside a noise the round shares (drift, neighbours)


def _rounds(rng: np.random.Generator, trials: int, n: int, effects: list[float]) -> np.ndarray:
    shared = rng.normal(0, 0.02, size=(trials, n, 1))
    return shared + np.asarray(effects)[None, None, :] + rng.normal(0, NOISE, size=(trials, n, len(effects)))


def test_a_nodes_offset_is_the_mean_log_ratio_with_a_t_interval_at_its_share_of_alpha() -> None:
    rng = np.random.default_rng(1)
    block = _rounds(rng, 1, 8, [0.0, SLOW, FAST])[0]
    block[3, 2] = np.nan  # a segment that gave no value leaves that round out for that node only
    slow, fast = node_offsets(block, ["slow", "fast"], confidence=0.95)
    diff = block[:, 1] - block[:, 0]
    alpha = 0.05 * CALIBRATION_ALPHA_SHARE / 2
    half = stats.t.ppf(1 - alpha / 2, 7) * diff.std(ddof=1) / math.sqrt(8)
    assert slow.rounds == 8 and slow.mean_log == pytest.approx(diff.mean())
    assert slow.halfwidth_log == pytest.approx(half)
    assert slow.low == pytest.approx(math.expm1(diff.mean() - half))
    assert fast.rounds == 7
    assert slow.low < 0.92 - 1 < slow.high and fast.low < 0.03 < fast.high
    assert "slow: -8" in slow.describe("node-a") and "against node-a (8 rounds)" in slow.describe("node-a")


def test_an_arm_on_the_baseline_node_needs_no_correction_and_one_on_an_unmeasured_node_is_never_decided() -> None:
    block = np.array([[0.0, -0.08], [0.01, -0.07], [0.0, -0.09]])
    offsets = node_offsets(block, ["slow"], confidence=0.95)
    offset, half, ids = arm_corrections(["base-node", "slow", "slow", "other"], "base-node", offsets)
    assert offset[0] == 0 and half[0] == 0
    assert offset[1] == pytest.approx(-0.25 / 3) and half[1] == half[2] > 0 and ids[1] == ids[2] != ids[0]
    assert half[3] == math.inf
    one = node_offsets(block[:1], ["slow"], confidence=0.95)
    assert one[0].halfwidth_log is None and arm_corrections(["slow"], "base-node", one)[1][0] == math.inf


def test_each_bound_is_the_corrected_sequence_widened_by_the_half_widths_it_involves() -> None:
    rng = np.random.default_rng(2)
    data = _rounds(rng, 1, 10, [0.0, 0.03 + SLOW, 0.01 + SLOW, 0.0 + FAST])[0]
    offset, half = np.array([SLOW, SLOW, FAST]), np.array([0.01, 0.01, 0.02])
    calibrated = Race(1, 3, min_gain=0.02, max_rounds=10, offset_log=offset, halfwidth_log=half,
                      node_ids=np.array([1, 1, 2]))
    plain = Race(1, 3, min_gain=0.02, max_rounds=10, confidence=1 - 0.05 * (1 - CALIBRATION_ALPHA_SHARE))
    every = np.ones(4, dtype=bool)[None, :]
    for row in data[:4]:
        calibrated.observe(np.where(every, row, np.nan))
        plain.observe(np.where(every, row - np.r_[0.0, offset], np.nan))
    assert calibrated.arm_confidence == pytest.approx(plain.arm_confidence)
    assert calibrated.base_lower[0] == pytest.approx(plain.base_lower[0] - half)
    assert calibrated.base_upper[0] == pytest.approx(plain.base_upper[0] + half)
    assert calibrated.pair_lower[0, 0, 1] == pytest.approx(plain.pair_lower[0, 0, 1])  # one node: no widening
    assert calibrated.pair_lower[0, 0, 2] == pytest.approx(plain.pair_lower[0, 0, 2] - 0.03)


def _race(rng: np.random.Generator, trials: int, *, calibrated: bool) -> Race:
    """The best arm (+6%) on a slot node 8% slower, a +4% arm on one 3% faster, two worse arms."""
    gains, nodes = [0.06, 0.04, 0.0, -0.03], ["slow", "fast", "fast", "slow"]
    effect = {"slow": SLOW, "fast": FAST}
    offset, half, ids = np.zeros((trials, 4)), np.zeros((trials, 4)), np.zeros(4, dtype=int)
    if calibrated:
        block = _rounds(rng, trials, 8, [0.0, SLOW, FAST])
        for t in range(trials):
            offset[t], half[t], ids = arm_corrections(nodes, "base", node_offsets(block[t], ["slow", "fast"],
                                                                                  confidence=0.95))
    race = Race(trials, 4, min_gain=0.02, max_rounds=60, offset_log=offset, halfwidth_log=half, node_ids=ids)
    data = _rounds(rng, trials, 60, [0.0, *(g + effect[n] for g, n in zip(gains, nodes))])
    for r in range(60):
        if not race.running.any():
            break
        race.observe(np.where(race.plan(), data[:, r, :], np.nan))
    return race


def test_a_slow_node_hides_the_best_arm_unless_the_slots_are_calibrated() -> None:
    rng = np.random.default_rng(3)
    uncorrected = _race(rng, 400, calibrated=False)
    assert (uncorrected.leader == 1).mean() >= 0.95  # the +4% arm on the fast node
    calibrated = _race(rng, 400, calibrated=True)
    assert (calibrated.leader == 0).mean() >= 0.95
    assert (~calibrated.alive[:, 0]).mean() <= 0.05  # the best arm eliminated at most alpha of the time


def test_the_race_record_names_each_arms_node_and_the_calibration() -> None:
    rng = np.random.default_rng(4)
    block = _rounds(rng, 1, 8, [0.0, SLOW])[0]
    offsets = node_offsets(block, ["slow"], confidence=0.95)
    values = _rounds(rng, 1, 12, [0.0, 0.05 + SLOW, 0.0])[0]
    record = race_record(["s3", "s1"], values, min_gain=0.02, max_rounds=12, arm_nodes=["slow", "base"],
                         baseline_node="base", calibration=offsets, calibration_rounds=8)
    arms = {a.arm: a for a in record.arms}
    assert arms["s3"].node == "slow" and arms["s1"].node == "base"
    assert record.calibration == offsets and record.calibration_rounds == 8 and record.baseline_node == "base"
    assert record.arm_confidence == pytest.approx(1 - 0.05 * (1 - CALIBRATION_ALPHA_SHARE) / 2)
    assert arms["s3"].estimate == pytest.approx(0.05, abs=0.03)  # net of the node's -8%


def test_without_a_calibration_block_nothing_is_corrected_or_widened() -> None:
    offset, half, _ = arm_corrections(["slow", "base"], "base", [])
    assert not offset.any() and not half.any()
    race = Race(1, 2, min_gain=0.02, max_rounds=10, offset_log=offset, halfwidth_log=half)
    assert not race.calibrated and race.arm_confidence == pytest.approx(1 - 0.05 / 2)


# A cluster sweep calibrates its slot nodes in a step of its own, before wave 1 (docs/sweep.md, "On a cluster"): the
# wave's race is the same race over its sealed rounds after the calibration step's sealed block.

def _cluster_levels(baseline_node: str = "base") -> tuple:
    from sglab.config import load_stack

    from .test_controllers import rounds_of

    cal = {"baseline@sglang-slot-1": ("slow", 0.92), "baseline@sglang-slot-2": ("fast", 1.03)}
    calibration = rounds_of({arm: 0.0 for arm in cal}, 8, seed=5, nodes={"baseline": ("base", 1.0), **cal})
    wave = rounds_of({"s5-k1-d6-LL": 0.06, "s1-k1-d2": 0.04}, 24, seed=6,
                     nodes={"baseline": (baseline_node, 1.0), "s5-k1-d6-LL": ("slow", 0.92),
                            "s1-k1-d2": ("fast", 1.03)})
    return calibration, wave, load_stack("eagle-sweep").config.policy


def test_a_cluster_waves_race_is_net_of_the_calibration_steps_offsets() -> None:
    from sglab.sweep.run import level_race, with_calibration

    calibration, wave, policy = _cluster_levels()
    arms = ["s1-k1-d2", "s5-k1-d6-LL"]
    plain, _ = level_race(wave, arms, "output_tok_per_s", policy, max_rounds=24)
    assert plain.leader == "s1-k1-d2" and not plain.calibration  # the fast node crowns the worse arm
    merged, notes = with_calibration(calibration, wave)
    corrected, block = level_race(merged, arms, "output_tok_per_s", policy, max_rounds=24)
    assert block == 8 and notes == []
    assert corrected.leader == "s5-k1-d6-LL" and {o.node for o in corrected.calibration} == {"slow", "fast"}
    assert {a.arm: a.node for a in corrected.arms} == {"s5-k1-d6-LL": "slow", "s1-k1-d2": "fast"}
    assert corrected.baseline_node == "base" and corrected.calibration_rounds == 8


def test_a_wave_whose_baseline_moved_since_the_calibration_is_compared_uncorrected_and_says_so() -> None:
    from sglab.sweep.run import with_calibration

    calibration, wave, _ = _cluster_levels(baseline_node="other")
    merged, notes = with_calibration(calibration, wave)
    assert merged is wave
    assert notes == ["the baseline ran on other in this wave and on base in the calibration step: the slot nodes' "
                     "offsets are against another node, so this wave is compared uncorrected"]


def test_an_arm_on_a_node_the_calibration_step_did_not_measure_is_named() -> None:
    from .test_controllers import rounds_of
    from sglab.sweep.run import with_calibration

    calibration, _, _ = _cluster_levels()
    wave = rounds_of({"s1-k1-d2": 0.04}, 6, nodes={"baseline": ("base", 1.0), "s1-k1-d2": ("new-node", 1.0)})
    _, notes = with_calibration(calibration, wave)
    assert notes == ["s1-k1-d2 ran on new-node, which the calibration step did not measure: its interval against "
                     "the baseline and the other arms stays unbounded (never decided on)"]


def test_a_cluster_waves_controller_races_net_of_the_calibration_steps_block_from_its_first_round(
        tmp_path) -> None:
    """A wave's Job given the calibration step's block (read from its sealed result): every look of its race is net of
    the slot nodes, so the rounds go where the corrected race wants them (no block rounds in this run)."""
    from .test_controllers import controller, rounds_of
    from sglab.sweep.run import load_state

    ctl = controller(tmp_path, arms=("s1-k1-d2", "s5-k1-d6-LL"), target="in-cluster")
    cal = {"baseline@sglang-slot-1": ("slow", 0.92), "baseline@sglang-slot-2": ("fast", 1.03)}
    ctl.block = {1: rounds_of({arm: 0.0 for arm in cal}, 8, seed=5, nodes={"baseline": ("base", 1.0), **cal})}
    assert ctl.calibration_rounds == 0 and ctl.arms_for_round(1, 0) == ["baseline", "s1-k1-d2", "s5-k1-d6-LL"]
    gains = {"s1-k1-d2": 0.04, "s5-k1-d6-LL": 0.06}
    nodes = {"baseline": ("base", 1.0), "s1-k1-d2": ("fast", 1.03), "s5-k1-d6-LL": ("slow", 0.92)}
    asked: list[list[str]] = []
    for n in range(ctl.rounds_at(1)):
        arms = ctl.arms_for_round(1, n)
        if not arms:
            break
        asked.append(arms)
        ctl.round_done(1, n, rounds_of(gains, n + 1, seed=6, asked=asked, nodes=nodes))
    record = load_state(tmp_path).records["1"]
    assert record["winner"] == "s5-k1-d6-LL" and record["rounds"] == len(asked)
    assert {o["node"] for o in record["calibration"]} == {"slow", "fast"} and record["calibration_rounds"] == 8


def _stored_calibration(api, *, run_id: str = "cal-run", tamper: bool = False) -> None:
    import json

    from sglab.analysis.synthetic import synthetic_result
    from sglab.results import integrity
    from sglab.results.sink import write_result_configmap

    from .test_controllers import rounds_of

    cal = {"baseline@sglang-slot-1": ("slow", 0.92)}
    level = rounds_of({arm: 0.0 for arm in cal}, 8, seed=5, nodes={"baseline": ("base", 1.0), **cal})
    result = synthetic_result(levels=(1,), rounds=2, stack="eagle-sweep").model_copy(
        update={"kind": "sweep", "run_id": run_id, "levels": [level], "complete": True})
    document = json.loads(integrity.seal(result, key=None).model_dump_json())  # what a pod seals: a plain digest
    if tamper:
        document["levels"][0]["rounds"][0]["node"] = "elsewhere"
    write_result_configmap(json.dumps(document), "sglab-result-cal", "ns", core_api=api.core_api())


def test_a_waves_job_reads_the_calibration_steps_block_from_its_sealed_result_configmap() -> None:
    from deploy_extras.fake_api import FakeConfigMapApi
    from sglab.sweep.run import read_calibration

    with FakeConfigMapApi() as api:
        _stored_calibration(api)
        before = len(api.requests)
        blocks, notes = read_calibration("sglab-result-cal", "cal-run", "eagle-sweep", namespace="ns",
                                         core_api=api.core_api())
        assert notes == [] and list(blocks) == [1] and len(blocks[1].rounds) == 16
        assert {m for m, _, _ in api.requests[before:]} == {"GET"}  # the Role's get, by name
        other, notes = read_calibration("sglab-result-cal", "another-run", "eagle-sweep", namespace="ns",
                                        core_api=api.core_api())
        assert other == {} and "is run cal-run" in notes[0] and "uncorrected" in notes[0]
        gone, notes = read_calibration("sglab-result-gone", "cal-run", "eagle-sweep", namespace="ns",
                                       core_api=api.core_api())
        assert gone == {} and "sglab-result-gone" in notes[0] and "uncorrected" in notes[0]


def test_a_calibration_result_whose_seal_fails_is_not_used_by_the_waves_job() -> None:
    from deploy_extras.fake_api import FakeConfigMapApi
    from sglab.sweep.run import read_calibration

    with FakeConfigMapApi() as api:
        _stored_calibration(api, tamper=True)
        blocks, notes = read_calibration("sglab-result-cal", "cal-run", "eagle-sweep", namespace="ns",
                                         core_api=api.core_api())
    assert blocks == {} and "SHA-256" in notes[0] and "uncorrected" in notes[0]


def test_a_waves_arm_on_a_node_the_calibration_step_did_not_measure_is_said_in_the_log_and_the_ranking(
        tmp_path) -> None:
    from .test_controllers import controller, rounds_of
    from sglab.sweep.outputs import ranking_table

    said: list[str] = []
    ctl = controller(tmp_path, arms=("s1-k1-d2", "s5-k1-d6-LL"), target="in-cluster")
    ctl.echo = said.append
    cal = {"baseline@sglang-slot-1": ("slow", 0.92)}
    ctl.block = {1: rounds_of({arm: 0.0 for arm in cal}, 8, seed=5, nodes={"baseline": ("base", 1.0), **cal})}
    nodes = {"baseline": ("base", 1.0), "s1-k1-d2": ("new-node", 1.0), "s5-k1-d6-LL": ("slow", 0.92)}
    gains = {"s1-k1-d2": 0.0, "s5-k1-d6-LL": 0.06}
    for n in range(2):
        ctl.round_done(1, n, rounds_of(gains, n + 1, seed=6, nodes=nodes))
    note = ("s1-k1-d2 ran on new-node, which the calibration step did not measure: its interval against the baseline "
            "and the other arms stays unbounded (never decided on)")
    assert said.count(f"note: {note}") == 1  # said once, when first seen
    assert f"note: {note}" in ranking_table(ctl.state)


def test_a_finished_calibration_step_read_back_by_resume_stays_calibrated(tmp_path) -> None:
    """load_resume recomputes everything from the sealed rounds: a calibration step (no arms) is `calibrated` with
    its offsets again, never `no-winner`."""
    from sglab.analysis.synthetic import synthetic_result
    from sglab.config import load_stack
    from sglab.load.schedule import plan_for
    from sglab.results.store import write_result
    from sglab.sweep.grid import expand
    from sglab.sweep.run import SweepController, finish, load_resume, load_state, new_state

    from .test_controllers import rounds_of

    loaded = load_stack("eagle-sweep")
    grid = expand(loaded)
    grid.arms = []
    plan = plan_for(loaded, quick=True)
    slots = ["baseline@sglang-slot-1", "baseline@sglang-slot-2"]
    state = new_state(loaded, grid, plan, run_id="cal", quick=True, sim_env={}, target="in-cluster",
                      calibration=slots)
    ctl = SweepController(state, plan, loaded.config.policy, tmp_path, echo=lambda _: None)
    nodes = {"baseline": ("node-a", 1.0), slots[0]: ("node-b", 0.9), slots[1]: ("node-c", 1.05)}
    level = rounds_of({s: 0.0 for s in slots}, 8, sd=0.005, nodes=nodes)
    for n in range(8):
        ctl.round_done(1, n, level)
    result = synthetic_result(levels=(1,), rounds=2, stack="eagle-sweep").model_copy(
        update={"kind": "sweep", "run_id": "cal", "levels": [level], "complete": True})
    finish(state, result, tmp_path)
    write_result(result, tmp_path)
    again, _ = load_resume(loaded, grid, tmp_path, load_state(tmp_path))
    assert again.status == "calibrated" and again.calibration == state.calibration


def test_the_slot_calibration_benchmark_runs(capsys) -> None:
    """benchmarks/slot_calibration.py (docs/sweep.md's uncorrected / replay / live numbers) runs on the race classes."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "slot_calibration.py"
    spec = importlib.util.spec_from_file_location("slot_calibration", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--races", "60"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "%" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| uncorrected (the Job without the step)",
                                                      "| replay of those rounds net of the step (--next)",
                                                      "| live, net of the step from the first look (the Job)"]
    picked = [float(row.split(" | ")[1].rstrip("%")) for row in rows]
    assert picked[0] < 20 < picked[2]


def test_a_gated_level_the_calibration_step_did_not_measure_is_raced_uncorrected_and_said(tmp_path) -> None:
    from .test_controllers import controller, rounds_of

    said: list[str] = []
    ctl = controller(tmp_path, arms=("s1-k1-d2", "s5-k1-d6-LL"), target="in-cluster")
    ctl.echo = said.append
    cal = {"baseline@sglang-slot-1": ("slow", 0.92)}
    ctl.block = {4: rounds_of({arm: 0.0 for arm in cal}, 8, seed=5, nodes={"baseline": ("base", 1.0), **cal})}
    for n in range(2):
        ctl.round_done(1, n, rounds_of({"s1-k1-d2": 0.0, "s5-k1-d6-LL": 0.06}, n + 1, seed=6))
    assert said.count("note: the calibration step did not measure c=1: this level's race is compared uncorrected") == 1
    assert ctl.state.records["1"]["calibration"] == []
