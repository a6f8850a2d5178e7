"""Every command that starts simulators bounds the streams one load generator keeps x their time scale, as
`sglab bench` does (sglab/sglang/sim_knobs.py MAX_STREAMS_X_TIME_SCALE): past it the client, not the servers,
sets the speed, and the faster-streaming candidate wins by the client's overhead."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.cli import main
from sglab.core.paths import project_root


def _sweep_stack_at(root: Path, levels: str) -> str:
    stacks = root / "stacks"
    stacks.mkdir(parents=True)
    text = (project_root() / "stacks" / "Pulumi.eagle-sweep.yaml").read_text()
    (stacks / "Pulumi.wide.yaml").write_text(
        text.replace("  sglab:load:\n", f"  sglab:load:\n    concurrency: {levels}\n", 1))
    return "wide"


def test_a_sweep_on_simulators_refuses_more_streams_than_its_time_scale_allows(tmp_path, monkeypatch, capsys):
    name = _sweep_stack_at(tmp_path, "[1, 8]")
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path / "stacks"))
    monkeypatch.setenv("SGLAB_RESULTS_DIR", str(tmp_path / "results"))
    assert main(["sweep", "--stack", name, "--target", "sim", "--time-scale", "10", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--time-scale: time scale 10 with 8 concurrent streams is 80 streams x scale" in err, err
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("*.json"))


@pytest.mark.parametrize("argv, words", [
    (["watch", "--stack", "production", "--target", "sim", "--time-scale", "10", "--users", "8"],
     "--time-scale: time scale 10 with 8 concurrent streams"),
    (["canary", "--stack", "production", "--target", "sim", "--time-scale", "10", "--users", "8"],
     "--time-scale: time scale 10 with 8 concurrent streams"),
    (["ui", "--stack", "eagle-nccl-ll", "--target", "sim", "--users", "60"],
     "--users: time scale 1 with 60 concurrent streams"),
])
def test_the_rehearsals_and_the_ui_refuse_it_before_starting_anything(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err, err
