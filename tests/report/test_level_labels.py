"""A rate or trace run's table, HTML report and `sglab compare` name its levels as it measured them (not
concurrency)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.cli import main
from sglab.report.html import render_html
from sglab.report.console import format_table
from sglab.schema.result import RunResult
from sglab.results.store import write_result


def profiled(profile: str, levels=(1, 4, 16)) -> RunResult:
    result = synthetic_result(levels=levels, gain={1: 0.06, 4: 0.02, 16: -0.05})
    data = result.model_dump(mode="json", by_alias=False)
    data["load_plan"] = {**data["load_plan"], "profile": profile}
    return RunResult.model_validate(data)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_text(result: RunResult) -> str:
    parser = _Text()
    parser.feed(render_html(result, judge(result), {}))
    return " ".join(p.strip() for p in parser.parts if p.strip())


def head_lines(table: str) -> tuple[str, str]:
    first, columns = table.splitlines()[:2]
    return first, columns


def test_a_rate_runs_table_says_req_per_s_not_concurrency() -> None:
    first, columns = head_lines(format_table(judge(profiled("rate"))))
    assert "at [1] req/s" in first and "concurrency" not in first, first
    assert columns.split("|")[0].split()[0] == "req/s", columns
    assert "conc" not in columns


def test_a_trace_runs_table_names_the_trace() -> None:
    result = profiled("trace", levels=(1,))
    first, columns = head_lines(format_table(judge(result)))
    assert "at the trace replay" in first and "concurrency" not in first, first
    assert columns.split("|")[0].split()[0] == "trace", columns


def test_a_concurrency_runs_table_keeps_its_words() -> None:
    first, columns = head_lines(format_table(judge(profiled("concurrency"))))
    assert "at concurrency [1]," in first and columns.split("|")[0].split()[0] == "conc"


def test_the_html_report_of_a_rate_run_says_req_per_s() -> None:
    text = html_text(profiled("rate"))
    gate = text[text.index("Gate:"):text.index("Crossover:")]
    assert "Per concurrency level" not in text and "concurrency" not in gate, text
    assert "Per rate level (req/s)" in text and "at [1] req/s" in gate
    assert "req/s gates decode tok/s" in text  # the levels table's first column head
    assert "1 req/s: baseline step" in text  # the economics list
    assert "Per concurrency level" in html_text(profiled("concurrency"))


def test_compare_prints_the_rate_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = profiled("rate")
    write_result(result, tmp_path)
    assert main(["compare", str(tmp_path)]) == 0
    first, columns = head_lines(capsys.readouterr().out)
    assert "req/s" in first and "concurrency" not in first and columns.lstrip().startswith("req/s")
