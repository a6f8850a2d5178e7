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

    class Cluster:
        def outputs(self, **values) -> None:
            outputs.write_text(json.dumps(values))

        def calls(self) -> list[list[str]]:
            return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

        def sweep(self) -> dict:
            return load_stack(STACK).raw.get("sweep") or {}

    return Cluster()


def next_(*extra: str) -> int:
    return sglab(["sweep", "--stack", STACK, "--next", *extra])


def changes(calls: list[list[str]]) -> list[list[str]]:
    return [c for c in calls if c[0] == "config"]


def test_a_fresh_sweep_starts_wave_1(cluster, capsys):
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
    next_()
    cluster.outputs(sweep_wave=1, sweep_waves=11, sweep_status="swept", sweep_leader=arms[2])
    assert next_("--yes") == 0
    assert f"wave 2/11, carrying wave 1's leader {arms[2]}" in capsys.readouterr().out
    assert cluster.sweep()["wave"] == 2 and cluster.sweep()["carry-arm"] == arms[2]
    assert cluster.calls()[-1] == ["up", "--stack", STACK, "--yes"]


def test_an_interrupted_wave_is_resumed_and_a_failed_job_rerun(cluster, capsys):
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
