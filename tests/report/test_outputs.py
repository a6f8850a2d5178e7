"""Output formats: one declaration each, chosen by --output on compare and report."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from sglab.cli import main
from sglab.report import outputs

DATA = Path(__file__).parents[1] / "data" / "results"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "article-replay" / "run1"
    folder.mkdir(parents=True)
    shutil.copy(DATA / "v1-article-replay.json", folder / "result.json")
    return folder


def test_a_fake_output_format_is_one_declaration(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def render(ctx: outputs.OutputContext) -> str:
        (ctx.out_dir / "fake.txt").write_text(ctx.verdict.outcome, encoding="utf-8")
        return f"FAKE {ctx.result.run_id} {ctx.verdict.outcome} {len(ctx.verdict.levels)} levels"

    with outputs.registered(outputs.OutputFormat("fake", "a test format", render)):
        assert main(["compare", str(run_dir), "--output", "fake"]) == 0
        assert capsys.readouterr().out.strip() == "FAKE 20261201T123502Z-670167 inconclusive 2 levels"
        assert (run_dir / "fake.txt").read_text(encoding="utf-8") == "inconclusive"
        assert main(["report", str(run_dir / "result.json"), "--output", "fake,json"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("FAKE ") and json.loads(out.split("\n", 1)[1])["outcome"] == "inconclusive"
    assert "fake" not in outputs.names()
    assert main(["compare", str(run_dir), "--output", "fake"]) == 2
    assert "unknown output format 'fake'; choose from: console" in capsys.readouterr().err


def test_defaults_are_todays_outputs(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(run_dir)]) == 0
    table = capsys.readouterr().out
    assert table.rstrip("\n") == (DATA / "v1-article-replay.compare.txt").read_text(encoding="utf-8").rstrip("\n")
    assert main(["compare", str(run_dir), "--output", "json"]) == 0
    by_flag = json.loads(capsys.readouterr().out)
    assert main(["compare", str(run_dir), "--output", "json"]) == 0
    by_name = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in by_flag.items() if k != "computed_at"} == \
        {k: v for k, v in by_name.items() if k != "computed_at"}
    assert main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"report: {run_dir / 'report.html'}"


def test_csv_output_has_a_row_per_round_and_per_level(run_dir: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "csv"
    assert main(["compare", str(run_dir), "--output", "csv", "--out", str(out_dir)]) == 0
    assert f"csv: {out_dir / 'rounds.csv'}" in capsys.readouterr().out
    raw = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    with open(out_dir / "rounds.csv", newline="", encoding="utf-8") as fh:
        rounds = list(csv.DictReader(fh))
    assert len(rounds) == sum(len(lv["rounds"]) for lv in raw["levels"])
    first = raw["levels"][0]["rounds"][0]
    assert float(rounds[0]["output_tok_per_s"]) == pytest.approx(first["output_tok_per_s"])
    with open(out_dir / "verdict.csv", newline="", encoding="utf-8") as fh:
        levels = list(csv.DictReader(fh))
    assert [row["concurrency"] for row in levels] == ["1", "2"]
    assert levels[0]["outcome"] == "undecided" and float(levels[0]["decode_tok_per_s_gain"]) == pytest.approx(
        0.2006, abs=1e-3)


def test_plots_output_writes_pngs(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(run_dir), "--output", "plots", "--out", str(tmp_path / "p")]) == 0
    assert "plot decode:" in capsys.readouterr().out
    assert (tmp_path / "p" / "decode_tok_per_s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
