"""Simulator numbers are labelled wherever a verdict is shown: console (bench and compare alike), JSON, CSV,
HTML and plots, with the time scale their tok/s are at and how to get evidence from real servers."""

from __future__ import annotations

import csv
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.bench.sequential import judge_and_report
from sglab.cli import main
from sglab.core.paths import project_root
from sglab.analysis.verdict import judge
from sglab.report import plots, write_report
from sglab.report.provenance import SIMULATOR_EVIDENCE
from sglab.results.store import write_result
from sglab.schema.result import RunResult

QUIET = dict(round_cv=0.004, shared_cv=0.002, request_cv=0.01, levels=(1, 4))
LABELLED = f"verdict: promote ({SIMULATOR_EVIDENCE})"


def promoting(producer: str = "simulator", time_scale: float | None = 3.0) -> RunResult:
    result = synthetic_result(gain=0.06, producer=producer, **QUIET)
    if producer == "simulator":
        result.target.time_scale = time_scale
    return result


def compare_lines(result: RunResult, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    write_result(result, tmp_path)
    assert main(["compare", str(tmp_path), *extra]) == 0
    return capsys.readouterr().out.strip().splitlines()


def test_console_labels_a_simulator_promote_and_names_real_evidence_next(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = compare_lines(promoting(), tmp_path, capsys)
    assert out[-1] == LABELLED
    assert out[-1].startswith("verdict: promote")  # still grep-able by its prefix
    scale = next(line for line in out if line.startswith("simulator evidence, not promotable to GPU stacks: "))
    assert "time scale 3 (3x real time)" in scale
    step = next(line for line in out if line.startswith("next: "))
    assert "`pulumi up --stack synthetic`" in step and "`sglab results pull --stack synthetic`" in step
    assert "sglab bench --stack synthetic --baseline-url" in step and not step.startswith("next: sglab promote")


def test_a_simulator_promote_into_a_simulator_stack_keeps_its_promote_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Simulator evidence can change a simulator stack that requests no GPUs, so there next stays the promotion."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    sim = (project_root() / "stacks" / "Pulumi.sim.yaml").read_text()
    (stacks / "Pulumi.simtarget.yaml").write_text(sim)
    promoting_to_it = sim.replace("config:\n", "config:\n  sglab:promote-to: simtarget\n", 1)
    (stacks / "Pulumi.synthetic.yaml").write_text(promoting_to_it)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(stacks))
    out = compare_lines(promoting(), tmp_path / "run", capsys)
    assert "next: sglab promote --stack synthetic --dry-run" in out
    assert out[-1] == LABELLED


def test_console_of_real_servers_is_unlabelled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = compare_lines(promoting("sglang"), tmp_path, capsys)
    assert out[-1] == "verdict: promote"
    assert "next: sglab promote --stack synthetic --dry-run" in out
    assert not any("simulator evidence" in line for line in out)


def test_bench_prints_what_compare_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = promoting()
    assert judge_and_report(result, tmp_path) == "promote"
    bench = capsys.readouterr().out.strip().splitlines()
    assert bench[-1] == LABELLED
    assert f"report: {tmp_path / 'report.html'}" in bench
    assert main(["compare", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().splitlines() == bench


def test_bench_prints_the_produced_by_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    judge_and_report(promoting("sglang"), tmp_path)
    out = capsys.readouterr().out
    assert "produced by: real SGLang servers, version synthetic" in out


def test_json_carries_the_evidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim = json.loads("\n".join(compare_lines(promoting(), tmp_path, capsys, "--output", "json")))
    assert sim["outcome"] == "promote"
    assert sim["evidence"]["producer"] == "simulator" and sim["evidence"]["time_scale"] == 3.0
    assert sim["evidence"]["promotable_to_gpu_stacks"] is False
    assert "3x real time" in sim["evidence"]["rates"]
    real = json.loads("\n".join(compare_lines(promoting("sglang"), tmp_path / "real", capsys, "--output", "json")))
    assert real["evidence"]["producer"] == "sglang" and real["evidence"]["promotable_to_gpu_stacks"] is True
    assert real["evidence"]["time_scale"] is None and real["evidence"]["label"] is None


def test_csv_rows_carry_the_producer_and_time_scale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "csv"
    compare_lines(promoting(), tmp_path, capsys, "--output", "csv", "--out", str(out_dir))
    for name in ("rounds.csv", "verdict.csv"):
        with open(out_dir / name, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        assert rows and all(r["producer"] == "simulator" and float(r["time_scale"]) == 3.0 for r in rows), name


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.parts.append(data.strip())


def _html_text(path: Path) -> str:
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8"))
    return " ".join(parser.parts)


def test_html_says_simulator_evidence_before_the_verdict(tmp_path: Path) -> None:
    text = _html_text(write_report(promoting(), tmp_path))
    banner = text.index("SIMULATOR EVIDENCE")
    assert banner < text.index("PROMOTE (simulator evidence)") < text.index("Per concurrency level")
    assert "3x real time" in text[banner:text.index("PROMOTE")]
    assert "pulumi up --stack synthetic" in text[banner:text.index("PROMOTE")]
    assert "decode tok/s b → c (simulator, 3x real time)" in text
    assert "Next: sglab promote" not in text


def test_html_of_real_servers_has_no_simulator_banner(tmp_path: Path) -> None:
    text = _html_text(write_report(promoting("sglang"), tmp_path))
    assert "SIMULATOR EVIDENCE" not in text and "PROMOTE —" in text.replace("\n", " ")


def test_plot_titles_say_simulator_evidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    titles: dict[str, str] = {}
    save = plots.save_figure

    def capture(fig, path: Path) -> Path:
        titles[path.name] = fig._suptitle.get_text() if fig._suptitle is not None else ""
        return save(fig, path)

    monkeypatch.setattr(plots, "save_figure", capture)
    result = promoting()
    plots.write_plots(result, judge(result), tmp_path)
    assert {"decode_tok_per_s.png", "latency_cdf.png", "accept_length.png"} <= set(titles)
    for name in ("decode_tok_per_s.png", "latency_cdf.png", "accept_length.png"):
        assert titles[name].startswith(SIMULATOR_EVIDENCE) and "3x real time" in titles[name], name



def test_html_shows_a_simulator_promote_in_the_simulator_colour_not_green(tmp_path: Path) -> None:
    from sglab.report.plots import OUTCOME_COLORS, SIMULATOR_COLOR

    page = write_report(promoting(), tmp_path / "sim").read_text(encoding="utf-8")
    assert f"<b style=\"color:{SIMULATOR_COLOR}\">PROMOTE (simulator evidence)</b>" in page
    assert f"border-color:{OUTCOME_COLORS['promote']}" not in page
    real = write_report(promoting("sglang"), tmp_path / "real").read_text(encoding="utf-8")
    assert f"<b style=\"color:{OUTCOME_COLORS['promote']}\">PROMOTE</b>" in real
