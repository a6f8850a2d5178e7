"""`sglab compare RUN RUN ...`: several runs as one table (each run's verdict recomputed, its gain per level with
its interval), and what differs between them besides the results (configs, machines, design, plan, producer),
so runs measured under other conditions are not read as one series."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.cli import main
from sglab.results.store import write_result


def _write(tmp_path: Path, run_id: str, **kw) -> Path:
    result = synthetic_result(levels=(1, 4), rounds=8, run_id=run_id, **kw)
    return write_result(result, tmp_path / result.stack / run_id).parent


def test_two_runs_are_one_table_with_each_verdict_and_gain(tmp_path: Path, capsys) -> None:
    first = _write(tmp_path, "20261201T000000Z-aaaaaa", gain=0.06, seed=1)
    second = _write(tmp_path, "20261202T000000Z-bbbbbb", gain=-0.04, seed=2)
    assert main(["compare", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    row = {run: [line for line in lines if line.startswith(run + " ")] for run in (first.name, second.name)}
    assert len(row[first.name]) == 2 and len(row[second.name]) == 2  # one row per level
    assert "+6." in row[first.name][0] or "+5." in row[first.name][0]
    assert "-4." in row[second.name][0] or "-3." in row[second.name][0]
    assert f"{first.name}: promote" in out and f"{second.name}: reject" in out
    assert "same conditions: " in out  # nothing but the results differ


def test_what_differs_between_the_runs_is_named(tmp_path: Path, capsys) -> None:
    first = _write(tmp_path, "20261201T000000Z-aaaaaa", design="parallel", seed=1)
    second = _write(tmp_path, "20261202T000000Z-bbbbbb", design="crossover", node_effect=0.03, seed=2,
                    config_hash={"baseline": "b" * 64, "candidate": "c" * 64}, producer="sglang")
    assert main(["compare", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    differs = next(line for line in out.splitlines() if line.startswith("differ: "))
    for what in ("candidate config", "design", "produced by"):
        assert what in differs, differs


def test_several_runs_print_the_console_table_only(tmp_path: Path, capsys) -> None:
    first = _write(tmp_path, "20261201T000000Z-aaaaaa")
    second = _write(tmp_path, "20261202T000000Z-bbbbbb")
    assert main(["compare", str(first), str(second), "--output", "html"]) == 2
    assert "one run" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["missing", "file"])
def test_a_run_that_cannot_be_read_names_its_path(tmp_path: Path, capsys, bad: str) -> None:
    good = _write(tmp_path, "20261201T000000Z-aaaaaa")
    other = tmp_path / "nope"
    if bad == "file":
        other.mkdir()
        (other / "result.json").write_text("{")
    assert main(["compare", str(good), str(other)]) == 2
    assert "nope" in capsys.readouterr().err
