"""`sglab sweep --stack S --next`: advancing a wave, confirming the leader and
resuming an interrupted step are one command each. The Pulumi CLI cannot run here: a stand-in `pulumi` (a small
script) answers `stack output --json` from a file, applies `config set/rm --path` to the stack file as the real CLI
does (stackConfigDir), and records every call."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import yaml

from sglab.cli import main as sglab
from sglab.config.arms import candidate_arm
from sglab.config.loader import load_stack
from sglab.core.paths import stack_path
from sglab.sweep.confirm import winner_stack
from sglab.sweep.grid import expand

STACK = "eagle-sweep"

FAKE_PULUMI = '''#!{python}
import json, os, sys, yaml
args = sys.argv[1:]
with open(os.environ["FAKE_PULUMI_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:3] == ["stack", "output", "--json"]:
    print(open(os.environ["FAKE_PULUMI_OUTPUTS"]).read())
    sys.exit(0)
if args[:1] == ["up"]:
    sys.exit(int(os.environ.get("FAKE_PULUMI_UP_EXIT", "0")))
if args[:2] in (["config", "set"], ["config", "rm"]):
    path = args[args.index("--path") + 1].split(":", 1)[1]
    stack = args[args.index("--stack") + 1]
    file = os.path.join(os.environ["SGLAB_STACKS_DIR"], f"Pulumi.{{stack}}.yaml")
    doc = yaml.safe_load(open(file))
    top, _, rest = path.partition(".")
    node = doc["config"].setdefault("sglab:" + top, {{}})
    keys = rest.split(".") if rest else []
    for key in keys[:-1]:
        node = node.setdefault(key, {{}})
    last = keys[-1]
    index = None
    if "[" in last:
        last, index = last[:-1].split("[")
    if args[1] == "rm":
        node.pop(last, None)
    else:
        value = yaml.safe_load(args[-1])  # as --path stores it: true/false and numbers typed
        if index is None:
            node[last] = value
        else:
            items = node.setdefault(last, [])
            items[int(index):int(index) + 1] = [value]
    yaml.safe_dump(doc, open(file, "w"), sort_keys=False)
    sys.exit(0)
sys.exit(3)
'''


@pytest.fixture()
def cluster(tmp_path, monkeypatch):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    shutil.copy(stack_path(STACK), stacks / f"Pulumi.{STACK}.yaml")
    pulumi = tmp_path / "pulumi"
    pulumi.write_text(FAKE_PULUMI.format(python=sys.executable))
    pulumi.chmod(0o755)
    log, outputs = tmp_path / "calls.jsonl", tmp_path / "outputs.json"
    outputs.write_text("{}")
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(stacks))
    monkeypatch.setenv("SGLAB_PULUMI", str(pulumi))
    monkeypatch.setenv("FAKE_PULUMI_LOG", str(log))
    monkeypatch.setenv("FAKE_PULUMI_OUTPUTS", str(outputs))
    monkeypatch.setenv("SGLAB_RESULTS_DIR", str(tmp_path / "results"))  # where `sglab results pull` puts results
    monkeypatch.setenv("SGLAB_RESULT_KEY", "a test key")

    class Cluster:
        def outputs(self, **values) -> None:
            outputs.write_text(json.dumps(values))

        def calls(self) -> list[list[str]]:
            return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

        def sweep(self) -> dict:
            return load_stack(STACK).raw.get("sweep") or {}

        def set(self, **keys) -> None:
            """Edit the stack file's sglab:sweep (underscores as dashes), as `pulumi config set --path` would."""
            file = stacks / f"Pulumi.{STACK}.yaml"
            doc = yaml.safe_load(file.read_text())
            doc["config"]["sglab:sweep"].update({k.replace("_", "-"): v for k, v in keys.items()})
            file.write_text(yaml.safe_dump(doc, sort_keys=False))

    return Cluster()


def next_(*extra: str) -> int:
    return sglab(["sweep", "--stack", STACK, "--next", *extra])


def changes(calls: list[list[str]]) -> list[list[str]]:
    return [c for c in calls if c[0] == "config"]


def test_a_fresh_sweep_starts_wave_1(cluster, capsys):
    cluster.set(calibration_rounds=0)  # no calibration step (tests below)
    assert next_() == 0
    out = capsys.readouterr().out
    assert "start the sweep: wave 1" in out and "capacity: up to 5 servers" in out
    calls = cluster.calls()
    assert calls[0] == ["stack", "output", "--json", "--stack", STACK]
    assert ["config", "set", "--path", "sglab:sweep.wave", "--stack", STACK, "--", "1"] in calls
    assert calls[-1] == ["up", "--stack", STACK]
    assert cluster.sweep()["wave"] == 1
    for argv in calls[1:]:  # it printed every command it ran
        assert " ".join(argv[:3]) in out


def test_a_finished_wave_moves_on_carrying_its_leader(cluster, capsys):
    arms = [a.name for a in expand(load_stack(STACK)).arms]
    cluster.set(calibration_rounds=0)
    next_()
    cluster.outputs(sweep_wave=1, sweep_waves=11, sweep_status="swept", sweep_leader=arms[2])
    assert next_("--yes") == 0
    assert f"wave 2/11, carrying wave 1's leader {arms[2]}" in capsys.readouterr().out
    assert cluster.sweep()["wave"] == 2 and cluster.sweep()["carry-arm"] == arms[2]
    assert cluster.calls()[-1] == ["up", "--stack", STACK, "--yes"]


def test_an_interrupted_wave_is_resumed_and_a_failed_job_rerun(cluster, capsys):
    cluster.set(calibration_rounds=0)
    next_()
    cluster.outputs(sweep_wave=1, sweep_waves=11, sweep_status="pending", sweep_leader=None)
    before = len(cluster.calls())
    assert next_() == 0
    assert "resume wave 1/11" in capsys.readouterr().out
    assert [c[0] for c in cluster.calls()[before:]] == ["stack", "up"]  # the same wave again: no config change
    assert next_("--rerun") == 0
    rerun = [c for c in changes(cluster.calls()) if "sglab:benchmark-job.rerun" in c]
    assert rerun and rerun[-1][-1].startswith("resume-")  # a new Job name: a failed Job is not rerun by itself


def test_the_last_wave_confirms_its_leader_as_the_stacks_candidate(cluster, capsys):
    grid = expand(load_stack(STACK))
    leader = next(a for a in grid.arms if a.variant != "default" and a.adaptive)  # the richest case
    cluster.outputs()
    next_()
    for key, value in (("sglab:sweep.wave", "11"), ("sglab:sweep.carry-arm", grid.arms[5].name)):
        sglab_file = stack_path(STACK)
        doc = yaml.safe_load(sglab_file.read_text())
        doc["config"]["sglab:sweep"][key.split(".")[-1]] = yaml.safe_load(value)
        sglab_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    cluster.outputs(sweep_wave=11, sweep_waves=11, sweep_status="swept", sweep_leader=leader.name)
    expected = winner_stack(load_stack(STACK), leader.record()).config  # as the sweep's own confirmation builds it
    assert next_() == 0
    assert f"the confirmation A/B of {leader.name}" in capsys.readouterr().out
    after = load_stack(STACK)
    assert "wave" not in after.raw["sweep"] and "carry-arm" not in after.raw["sweep"]
    assert candidate_arm(after.config).config_hash == candidate_arm(expected).config_hash


def test_a_finished_confirmation_runs_nothing_and_says_what_is_next(cluster, capsys):
    cluster.outputs(benchmark_verdict="promote", benchmark_run_id="r1", config_hashes={"candidate": "a" * 64})
    assert next_() == 0
    out = capsys.readouterr().out
    assert "sglab results pull --stack eagle-sweep" in out and "sglab promote --stack eagle-sweep" in out
    assert [c[0] for c in cluster.calls()] == ["stack"]


def test_a_step_that_does_not_fit_the_nodes_is_refused_before_anything_runs(cluster, capsys):
    assert next_("--max-nodes", "4") == 2
    assert "more than placement.max-nodes 4" in capsys.readouterr().err
    assert [c[0] for c in cluster.calls()] == ["stack"]


def test_dry_run_prints_and_runs_nothing(cluster, capsys):
    assert next_("--dry-run") == 0
    assert "pulumi config set --path sglab:sweep.wave" in capsys.readouterr().out
    assert [c[0] for c in cluster.calls()] == ["stack"]
    assert "wave" not in cluster.sweep()


def test_a_failing_pulumi_up_stops_with_its_status(cluster, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_PULUMI_UP_EXIT", "7")
    assert next_() == 7
    assert "run the same --next again" in capsys.readouterr().err


def test_next_is_the_in_cluster_sweep_and_takes_no_target(cluster, capsys):
    """One way to say it: `--next` advances the sweep on the cluster; a --target beside it is refused, and
    `cluster` (which only went with --next) is no target of its own."""
    assert sglab(["sweep", "--stack", STACK, "--target", "in-cluster", "--next"]) == 2
    assert "give it no --target" in capsys.readouterr().err
    assert sglab(["sweep", "--stack", STACK, "--target", "cluster"]) == 2
    assert "invalid choice: 'cluster'" in capsys.readouterr().err


# The slot nodes, calibrated (docs/sweep.md, "On a cluster"): a calibration step before wave 1, the waves' slots
# pinned to its nodes, and every wave's race recomputed here net of them, from the two sealed results.

GATED = 1  # eagle-sweep's gated level
SLOTS = [f"baseline@sglang-slot-{i}" for i in range(1, 5)]
SPEEDS = {"gpu-slow": 0.92, "gpu-fast": 1.03, "gpu-c": 1.0, "gpu-d": 1.0}


def sealed(run_id: str, gains: dict[str, float], nodes: dict[str, str], rounds: int, *, seed: int,
           outcome: str = "swept") -> None:
    """A result as `sglab results pull` leaves it: kind sweep, its rounds (arm -> its node), its verdict, sealed."""
    import os
    from pathlib import Path

    from sglab.analysis.synthetic import synthetic_result
    from sglab.results.store import write_result
    from sglab.schema.verdict import SweepVerdict

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from sweep.test_controllers import rounds_of

    placed = {arm: (node, SPEEDS.get(node, 1.0)) for arm, node in nodes.items()}
    level = rounds_of(gains, rounds, seed=seed, nodes={"baseline": ("gpu-base", 1.0), **placed})
    result = synthetic_result(levels=(GATED,), rounds=2, stack=STACK).model_copy(
        update={"kind": "sweep", "run_id": run_id, "levels": [level], "complete": True})
    result.verdict = SweepVerdict(kind="sweep", outcome=outcome, sentence="", metric="decode_tok_per_s")
    run_dir = Path(os.environ["SGLAB_RESULTS_DIR"]) / STACK / run_id
    run_dir.mkdir(parents=True)
    write_result(result, run_dir)


def calibrated(cluster) -> None:
    """The calibration step has run: slot 1 on a node 8% slower, slot 2 on one 3% faster."""
    sealed("cal-run", {s: 0.0 for s in SLOTS}, dict(zip(SLOTS, SPEEDS)), 8, seed=1, outcome="calibrated")


def test_a_fresh_sweep_first_calibrates_the_slot_nodes(cluster, capsys):
    assert next_() == 0
    assert "calibrate the slot nodes" in capsys.readouterr().out
    assert cluster.sweep()["wave"] == 0 and cluster.calls()[-1] == ["up", "--stack", STACK]


def test_after_the_calibration_step_the_slots_are_pinned_to_the_nodes_its_sealed_result_records(cluster, capsys):
    next_()
    cluster.outputs(sweep_wave=0, sweep_waves=11, sweep_status="calibrated", sweep_run_id="cal-run",
                    benchmark_result_configmap="sglab-result-0123456789ab")
    assert next_() == 2  # not pulled yet: nothing unsealed decides where the slots go
    assert "sglab results pull --stack eagle-sweep" in capsys.readouterr().err
    assert cluster.sweep()["wave"] == 0
    calibrated(cluster)
    assert next_() == 0
    out = capsys.readouterr().out
    assert "wave 1/11" in out and "gpu-slow" in out
    assert cluster.sweep()["slot-nodes"] == list(SPEEDS) and cluster.sweep()["calibration-run"] == "cal-run"
    # where the waves' Jobs read the step's sealed block (their Role gets it by name)
    assert cluster.sweep()["calibration-configmap"] == "sglab-result-0123456789ab"
    assert cluster.sweep()["wave"] == 1 and cluster.calls()[-1][0] == "up"


def test_a_calibration_result_whose_seal_fails_is_refused(cluster, capsys):
    import json as json_
    import os
    from pathlib import Path

    next_()
    cluster.outputs(sweep_wave=0, sweep_waves=11, sweep_status="calibrated", sweep_run_id="cal-run")
    calibrated(cluster)
    file = Path(os.environ["SGLAB_RESULTS_DIR"]) / STACK / "cal-run" / "result.json"
    doc = json_.loads(file.read_text())
    doc["levels"][0]["rounds"][1]["node"] = "gpu-elsewhere"
    file.write_text(json_.dumps(doc))
    assert next_() == 2
    assert "integrity" in capsys.readouterr().err and cluster.sweep()["wave"] == 0


def test_a_waves_leader_is_recomputed_net_of_the_slot_nodes_from_the_sealed_rounds(cluster, capsys):
    """The best arm (+6%) in the slot on the slow node, a +4% arm in the slot on the fast node: the Job's race (not
    corrected) leads with the +4% arm; `--next` recomputes the wave net of the calibration and carries the best."""
    arms = [a.name for a in expand(load_stack(STACK)).arms][:4]
    calibrated(cluster)
    cluster.set(wave=1, slot_nodes=list(SPEEDS), calibration_run="cal-run")
    sealed("wave-1", dict(zip(arms, [0.06, 0.04, -0.05, -0.05])), dict(zip(arms, SPEEDS)), 24, seed=2)
    import os
    from pathlib import Path

    from sglab.results.store import load_result
    from sglab.sweep.run import level_race

    loaded = load_stack(STACK)
    (level,) = load_result(Path(os.environ["SGLAB_RESULTS_DIR"]) / STACK / "wave-1").levels
    uncorrected, _ = level_race(level, arms, loaded.config.policy.metric, loaded.config.policy, 32)
    assert uncorrected.leader == arms[1]  # what the Job's race (its sweep_leader) says
    cluster.outputs(sweep_wave=1, sweep_waves=11, sweep_status="swept", sweep_leader=arms[1], sweep_run_id="wave-1")
    assert next_() == 0
    out = capsys.readouterr().out
    assert f"carrying wave 1's leader {arms[0]}" in out
    assert "net of the slot nodes" in out and f"the Job's race (not calibrated) led with {arms[1]}" in out
    assert cluster.sweep()["carry-arm"] == arms[0]


def test_the_confirmation_of_the_pick_is_a_crossover_under_the_lab_default(cluster):
    """The cluster confirmation is the stack's own A/B with the leader as its candidate: under the lab default
    (policy.design crossover, single-node servers, no serving) its Job moves both arms between their nodes."""
    from sglab.deploy.benchmark_job import arm_moved
    from sglab.sweep.next_wave import applied, confirmation_changes

    loaded = load_stack(STACK)
    leader = expand(loaded).arms[3].name
    confirmation = applied(loaded, confirmation_changes(loaded, leader))
    assert confirmation.config.policy.design == "crossover" and confirmation.config.sweep.wave is None
    assert sorted(arm_moved(confirmation.config, STACK)) == ["sglang-baseline", "sglang-slot-4"]
