"""`sglab bench` refuses a lint that needs an opt-in, as validate, render and `pulumi up` do."""

from __future__ import annotations

from pathlib import Path

from sglab.cli import main
from sglab.core.paths import project_root


def test_bench_refuses_an_unaccepted_ll128_before_starting_anything(tmp_path: Path, monkeypatch, capsys):
    text = (project_root() / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text()
    text = text.replace("NCCL_PROTO: LL\n", "NCCL_PROTO: LL128\n")
    assert "NCCL_PROTO: LL128" in text
    (tmp_path / "Pulumi.lab.yaml").write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    assert main(["bench", "--stack", "lab", "--out", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "NCCL_PROTO" in err and "accept-lints" in err
    assert not (tmp_path / "results").exists()
