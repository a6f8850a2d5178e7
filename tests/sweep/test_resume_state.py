"""Nothing in sweep.json (not sealed) decides a sweep's resume, confirmation or promotion: results are verified
before a resume writes anything, the arms are the grid's (by name), the pick is recomputed from the sealed rounds,
and a damaged or hostile sweep.json is one message. Recorded rounds, no simulators (one short CLI run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.config import load_stack
from sglab.core.errors import ConfigError
from sglab.load.schedule import plan_for
from sglab.results.store import load_result, write_result
from sglab.schema.result import SweepConfirmation
from sglab.sglang.env import without_server_env
from sglab.sweep.confirm import confirmed_source
from sglab.sweep.grid import expand
from sglab.sweep.run import STATE_FILE, SweepController, load_resume, load_state, new_state

from .conftest import NO_TTFT_GUARD, SIM_STACK, write_stack
from .test_controllers import measured, race

ROOT = Path(__file__).resolve().parents[2]
RUN = "20260101T000000Z-sweep"
GAINS = {"s1-k1-d2": -0.2, "s3-k1-d4": 0.02, "s1-k1-d2-LL": -0.1, "s3-k1-d4-LL": 0.15}
BEST = "s3-k1-d4-LL"
ATTACKER = {"algorithm": "EAGLE", "draft_model_path": "/shared/attacker-draft"}


@pytest.fixture(autouse=True)
def result_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLAB_RESULT_KEY", "a test key")


def swept(root: Path, *, drop: str | None = None) -> tuple:
    """A finished sweep of stack `pick` as the runner leaves it: sweep.json and its sealed result.json (the race
    run on recorded rounds); `drop`: an arm the sweep did not start with (added to the grid since)."""
    write_stack(root, "pick", {"num-steps": [1, 3], "num-draft-tokens": "steps+1", "max-rounds": 12,
                               "nccl-variants": {"default": {}, "LL": {"NCCL_PROTO": "LL"}}},
                policy={"metric": "output_tok_per_s", "ttft-p99-max-increase": NO_TTFT_GUARD}, **SIM_STACK)
    loaded = load_stack("pick", root)
    grid = expand(loaded)
    started = expand(loaded)
    started.arms = [a for a in started.arms if a.name != drop]
    plan = plan_for(loaded, quick=True)
    run_dir = root / "results" / "pick" / RUN
    run_dir.mkdir(parents=True)
    state = new_state(loaded, started, plan, run_id=RUN, quick=False, sim_env={}, target="sim")
    ctl = SweepController(state, plan, loaded.config.policy, run_dir, echo=lambda _: None)
    gains = {a.name: GAINS[a.name] for a in started.arms}
    asked = race(ctl, gains)
    result = synthetic_result(levels=(1,), rounds=2, stack="pick").model_copy(
        update={"kind": "sweep", "run_id": RUN, "levels": [measured(ctl, gains, asked)]})
    state.status = "swept"
    state.save(run_dir)
    write_result(result, run_dir)
    return loaded, grid, run_dir


def edit(path: Path, change) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def test_a_resume_recomputes_the_pick_from_the_sealed_rounds(tmp_path: Path) -> None:
    loaded, grid, run_dir = swept(tmp_path)
    assert load_state(run_dir).winner == BEST
    edit(run_dir / STATE_FILE, lambda d: d.update(winner="s1-k1-d2", records={}, contenders=["s1-k1-d2"]))
    state, result = load_resume(loaded, grid, run_dir, load_state(run_dir))
    assert state.winner == BEST and state.status == "swept" and result.complete
    assert state.records["1"]["winner"] == BEST


def test_an_arm_edited_in_sweep_json_is_refused_by_name(tmp_path: Path) -> None:
    loaded, grid, run_dir = swept(tmp_path)
    edit(run_dir / STATE_FILE, lambda d: next(a for a in d["arms"] if a["name"] == BEST).update(ATTACKER))
    with pytest.raises(ConfigError) as caught:
        load_resume(loaded, grid, run_dir, load_state(run_dir))
    assert caught.value.key == "arms" and BEST in caught.value.problem and "other flags" in caught.value.problem


def test_an_arm_the_grid_does_not_have_is_refused_by_name(tmp_path: Path) -> None:
    loaded, grid, run_dir = swept(tmp_path)
    edit(run_dir / STATE_FILE, lambda d: d["arms"][0].update(name="s9-k1-d10"))
    with pytest.raises(ConfigError, match="arm s9-k1-d10 is not an arm"):
        load_resume(loaded, grid, run_dir, load_state(run_dir))


def test_arms_added_to_the_grid_since_the_sweep_started_are_refused(tmp_path: Path) -> None:
    loaded, grid, run_dir = swept(tmp_path, drop="s3-k1-d4")
    with pytest.raises(ConfigError) as caught:
        load_resume(loaded, grid, run_dir, load_state(run_dir))
    assert "did not start with: s3-k1-d4" in caught.value.problem and "new sweep" in caught.value.fix


def test_a_result_whose_seal_fails_stops_the_resume(tmp_path: Path) -> None:
    loaded, grid, run_dir = swept(tmp_path)
    edit(run_dir / "result.json", lambda d: d["levels"][0]["rounds"][0].update(output_tok_per_s=9e6))
    with pytest.raises(ConfigError) as caught:
        load_resume(loaded, grid, run_dir, load_state(run_dir))
    assert caught.value.key == "integrity" and "never re-seals" in caught.value.problem


def test_a_confirmation_whose_result_fails_its_seal_is_refused(tmp_path: Path) -> None:
    loaded, grid, run_dir = swept(tmp_path)
    where = tmp_path / "results" / "pick" / "confirmation"
    confirmation = synthetic_result(levels=(1,), rounds=4, stack="pick")
    confirmation.sweep = SweepConfirmation.model_validate({"sweep_run_id": RUN, "arm": grid.arm(BEST).record()})
    write_result(confirmation, where)
    edit(run_dir / STATE_FILE, lambda d: d.update(status="confirmed", confirmation={
        "run_id": confirmation.run_id, "path": str(where), "outcome": "promote", "complete": True}))
    state, _ = load_resume(loaded, grid, run_dir, load_state(run_dir))
    assert state.confirmation is not None and state.confirmation["path"] == str(where)
    edit(where / "result.json", lambda d: d["sweep"]["arm"].update(ATTACKER))
    with pytest.raises(ConfigError, match="integrity"):
        load_resume(loaded, grid, run_dir, load_state(run_dir))


def test_a_resume_on_other_simulated_nodes_than_the_sweep_started_on_is_refused(tmp_path: Path) -> None:
    """Arms moved to another node mid-level would mix two nodes' offsets: an edited layout is refused by name."""
    loaded, grid, run_dir = swept(tmp_path)
    assert load_state(run_dir).arm_nodes["baseline@sim-node-b"] == "sim-node-b"
    edit(run_dir / STATE_FILE, lambda d: d["arm_nodes"].update({BEST: "sim-node-a"}))
    with pytest.raises(ConfigError) as caught:
        load_resume(loaded, grid, run_dir, load_state(run_dir))
    assert caught.value.key == "arm_nodes" and "sim.nodes" in caught.value.problem


@pytest.mark.parametrize("key, value", [
    ("max_rounds", 10 ** 12),
    ("arm_nodes", {"baseline": "x" * 300}),
    ("calibration_rounds", -1),  # the race would size itself by it
    ("arms", [{"name": "s1-k1-d2"}]),  # a record without its flags
    ("arms", [None]),
    ("arms", [{"name": "s1-k1-d2", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 2, "adaptive": False,
               "variant": "default", "nccl": {}, "config_hash": "c" * 64, "surplus": 1}]),  # a key no arm writes
    ("gated_levels", list(range(1, 100))),
    ("records", []),
    ("target", "elsewhere"),
    ("plan", {"rounds": 10 ** 9}),
    ("surplus", 1),
])
def test_a_damaged_or_hostile_sweep_json_is_one_config_error(tmp_path: Path, key: str, value: object) -> None:
    _, _, run_dir = swept(tmp_path)
    edit(run_dir / STATE_FILE, lambda d: d.update({key: value}))
    with pytest.raises(ConfigError) as caught:
        load_state(run_dir)
    assert str(caught.value.key).startswith(key)


def test_a_state_file_that_is_not_an_object_is_one_config_error(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text("[1, 2]")
    with pytest.raises(ConfigError):
        load_state(tmp_path)


def test_a_confirmation_stores_the_sweeps_race_records_as_the_sweep_saved_them(tmp_path: Path) -> None:
    """`selected_by` is typed (sglab.schema.result.RaceRecord) and written back key for key: the seal covers it."""
    from sglab.results import integrity
    from sglab.sweep.confirm import sweep_record

    _, grid, run_dir = swept(tmp_path)
    state = load_state(run_dir)
    result = synthetic_result(levels=(1,), rounds=4, stack="pick")
    result.sweep = sweep_record(state, grid.arm(BEST).record())
    path = write_result(result, tmp_path / "confirmation")
    stored = json.loads(path.read_text())["sweep"]
    assert stored["selected_by"] == json.loads((run_dir / STATE_FILE).read_text())["records"]
    assert stored["arm"] == grid.arm(BEST).record()
    back = load_result(path)
    assert integrity.verify(back) is None and back.sweep.selected_by["1"].winner == BEST


def confirmation_of(tmp_path: Path, arm: dict):
    """A sealed confirmation result naming `arm`, read back from its file as promote reads it."""
    result = synthetic_result(levels=(1,), rounds=4, stack="pick")
    result.sweep = SweepConfirmation.model_validate({"sweep_run_id": RUN, "arm": arm})
    write_result(result, tmp_path / "confirmation")
    return load_result(tmp_path / "confirmation")


def test_promote_rebuilds_the_confirmed_arm_from_the_grid(tmp_path: Path) -> None:
    loaded, grid, _ = swept(tmp_path)
    source, refusal = confirmed_source(loaded, confirmation_of(tmp_path, grid.arm(BEST).record()), explicit=True)
    assert refusal is None and source is not None
    assert source.config.candidate.speculative.num_steps == 3


@pytest.mark.parametrize("change, said", [
    (ATTACKER, "other flags"),
    ({"name": "s9-k1-d10"}, "not an arm of stack 'pick''s grid"),
])
def test_promote_refuses_a_confirmed_arm_outside_the_grid(tmp_path: Path, change: dict, said: str) -> None:
    loaded, grid, _ = swept(tmp_path)
    arm = {**grid.arm(BEST).record(), **change}
    source, refusal = confirmed_source(loaded, confirmation_of(tmp_path, arm), explicit=True)
    assert source is None and refusal is not None and said in refusal[0]


@pytest.mark.parametrize("damage", ["seal", "state"])
def test_sweep_resume_of_a_tampered_run_exits_2_and_leaves_its_result_as_it_was(tmp_path: Path, damage: str) -> None:
    """The CLI: one message, exit 2, no traceback; the tampered result.json is not re-sealed."""
    _, _, run_dir = swept(tmp_path)
    if damage == "seal":
        edit(run_dir / "result.json", lambda d: d["levels"][0]["rounds"][0].update(output_tok_per_s=9e6))
    else:
        edit(run_dir / STATE_FILE, lambda d: d.update(max_rounds=10 ** 12))
    before = (run_dir / "result.json").read_bytes()
    env = {**without_server_env(os.environ), "SGLAB_STACKS_DIR": str(tmp_path / "stacks")}
    done = subprocess.run([sys.executable, "-m", "sglab.cli", "sweep", "--stack", "pick", "--out",
                           str(tmp_path / "results"), "--no-progress", "--no-confirm", "--resume", RUN],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and ("integrity" if damage == "seal" else "max_rounds") in done.stderr
    assert (run_dir / "result.json").read_bytes() == before


def test_promote_dry_run_of_a_confirmation_of_an_arm_outside_the_grid_is_refused(root: Path) -> None:
    """`sglab promote --result <confirmation> --dry-run` refuses before it writes anything into the target."""
    from sglab.promotion.promote import PromotionRefused, promote

    _, grid, _ = swept(root)
    target = (root / "stacks" / "Pulumi.production.yaml").read_bytes()
    confirmation = synthetic_result(levels=(1,), rounds=4, stack="pick", producer="simulator")
    confirmation.sweep = SweepConfirmation.model_validate({"sweep_run_id": RUN,
                                                           "arm": {**grid.arm(BEST).record(), **ATTACKER}})
    write_result(confirmation, root / "results" / "pick" / "confirmation")
    with pytest.raises(PromotionRefused, match=f"arm {BEST} with other flags"):
        promote("pick", root=root, result_path=root / "results" / "pick" / "confirmation", dry_run=True)
    assert (root / "stacks" / "Pulumi.production.yaml").read_bytes() == target
