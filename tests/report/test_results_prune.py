"""`sglab results prune`: old runs leave the disk, never evidence something kept still stands on. A dry run by
default; --yes deletes exactly what the dry run listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.cli import main
from sglab.load.owner import this_process
from sglab.promotion.log import append_log
from sglab.results.store import list_runs, write_result
from sglab.schema.result import DesignRecord, RunResult

STACK = "synthetic"


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(stacks))
    return tmp_path / "results", stacks


def _run(results: Path, run_id: str, **fields) -> RunResult:
    result = synthetic_result(levels=(1,), rounds=2)
    data = {**result.model_dump(mode="json", by_alias=False), "run_id": run_id, **fields}
    result = RunResult.model_validate(data)
    write_result(result, results / STACK / run_id)
    return result


def _sequence(*earlier: str) -> dict:
    """result.sequential of a run that continues the sequence of `earlier`."""
    runs = [{"run_id": run_id, "algorithm": "sha256", "digest": "0" * 64, "levels": {}} for run_id in earlier]
    return {"sequence": {"key": "0" * 32, "metric": "decode_tok_per_s", "fresh": False, "runs": runs}}


def _prune(results: Path, capsys, *extra: str) -> tuple[int, str]:
    code = main(["results", "prune", "--stack", STACK, "--out", str(results), *extra])
    return code, capsys.readouterr().out


def _left(results: Path) -> list[str]:
    return [d.name for d in list_runs(STACK, results)]


def test_a_dry_run_lists_what_would_go_and_deletes_nothing(roots, capsys) -> None:
    results, _ = roots
    for n in range(5):
        _run(results, f"2026120{n}-000000")
    code, out = _prune(results, capsys, "--keep", "2")
    assert code == 0
    assert _left(results) == [f"2026120{n}-000000" for n in range(5)]
    for n in range(3):
        assert f"would delete 2026120{n}-000000" in out
    assert "keep 20261203-000000: among the newest 2" in out and "keep 20261204-000000" in out
    assert "--yes" in out


def test_yes_deletes_exactly_the_runs_the_dry_run_listed(roots, capsys) -> None:
    results, _ = roots
    for n in range(5):
        _run(results, f"2026120{n}-000000")
    _, dry = _prune(results, capsys, "--keep", "2")
    code, out = _prune(results, capsys, "--keep", "2", "--yes")
    assert code == 0
    assert _left(results) == ["20261203-000000", "20261204-000000"]
    deleted = sorted(line.split()[1] for line in out.splitlines() if line.startswith("deleted "))
    would = sorted(line.split()[2] for line in dry.splitlines() if line.startswith("would delete "))
    assert deleted == would == ["20261200-000000", "20261201-000000", "20261202-000000"]


def test_the_earlier_runs_of_a_kept_sequence_and_a_joined_period_stay(roots, capsys) -> None:
    results, _ = roots
    _run(results, "20261200-000000")
    _run(results, "20261201-000000")  # period 1 of a crossover joined by ...02
    _run(results, "20261202-000000", sequential=_sequence("20261200-000000"),
         design=DesignRecord(design="crossover", joined_run="20261201-000000").model_dump(mode="json"))
    _run(results, "20261203-000000")  # nothing stands on it
    _run(results, "20261204-000000", sequential=_sequence("20261202-000000"))  # and transitively on 00, 01
    code, out = _prune(results, capsys, "--keep", "1", "--yes")
    assert code == 0
    assert _left(results) == ["20261200-000000", "20261201-000000", "20261202-000000", "20261204-000000"]
    assert "keep 20261200-000000: a kept run's evidence stands on it" in out


def test_a_promoted_run_stays_however_old(roots, capsys) -> None:
    results, stacks = roots
    for n in range(3):
        _run(results, f"2026120{n}-000000")
    append_log(stacks / "promotions.jsonl", {"action": "promote", "run_id": "20261200-000000",
                                              "source_stack": STACK, "target_stack": "production"})
    _prune(results, capsys, "--keep", "1", "--yes")
    assert _left(results) == ["20261200-000000", "20261202-000000"]


def test_a_run_still_measuring_and_an_unfinished_sweep_stay(roots, capsys) -> None:
    results, _ = roots
    _run(results, "20261200-000000", complete=False, incomplete_reason="running",
         loadgen=this_process())
    _run(results, "20261201-000000", kind="sweep", complete=False)
    _run(results, "20261202-000000", complete=False, incomplete_reason="interrupted")
    _run(results, "20261203-000000")
    code, out = _prune(results, capsys, "--keep", "1", "--yes")
    assert code == 0
    assert _left(results) == ["20261200-000000", "20261201-000000", "20261203-000000"], out


def test_an_unreadable_run_stops_the_prune_and_names_the_file(roots, capsys) -> None:
    results, _ = roots
    for n in range(3):
        _run(results, f"2026120{n}-000000")
    (results / STACK / "20261201-000000" / "result.json").write_text('{"run_id": "x"')
    code = main(["results", "prune", "--stack", STACK, "--out", str(results), "--keep", "1", "--yes"])
    captured = capsys.readouterr()
    assert code != 0
    assert "20261201-000000" in captured.err and "nothing was deleted" in captured.err
    assert len(_left(results)) == 3


def test_keep_is_required_and_at_least_one(roots, capsys) -> None:
    results, _ = roots
    _run(results, "20261200-000000")
    assert main(["results", "prune", "--stack", STACK, "--out", str(results)]) == 2
    assert "--keep" in capsys.readouterr().err
    assert main(["results", "prune", "--stack", STACK, "--out", str(results), "--keep", "0"]) == 2
    assert _left(results) == ["20261200-000000"]


def test_a_linked_run_directory_is_unlinked_not_followed(roots, capsys, tmp_path: Path) -> None:
    results, _ = roots
    _run(results, "20261201-000000")
    elsewhere = tmp_path / "elsewhere"
    _run(elsewhere, "20261200-000000")
    (results / STACK / "20261200-000000").symlink_to(elsewhere / STACK / "20261200-000000")
    _prune(results, capsys, "--keep", "1", "--yes")
    assert _left(results) == ["20261201-000000"]
    assert (elsewhere / STACK / "20261200-000000" / "result.json").is_file()
    assert json.loads((elsewhere / STACK / "20261200-000000" / "result.json").read_text())["run_id"]
