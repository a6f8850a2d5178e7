"""The report renders, its PNGs open, and the compare/report commands behave."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.cli import main
from sglab.report import write_report
from sglab.results.store import write_result

NCCL = [{"key": "env NCCL_PROTO", "baseline": None, "candidate": "LL"}]


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append(dict(attrs)["src"] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(path: Path) -> _Collect:
    parser = _Collect()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _opens(png: Path) -> None:
    image = mpimg.imread(png)
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 400
    assert image[..., :3].std() > 0.05  # not a blank canvas


def test_ab_report_has_the_verdict_on_top_and_every_plot(tmp_path: Path) -> None:
    result = synthetic_result(gain={1: 0.059, 4: 0.02, 16: -0.05})
    path = write_report(result, tmp_path)
    assert path == tmp_path / "report.html"
    for name in ("decode_tok_per_s.png", "latency_cdf.png", "accept_length.png"):
        _opens(tmp_path / name)
    assert not (tmp_path / "attribution.png").exists()
    parsed = _parse(path)
    assert len(parsed.images) == 3 and all(src.startswith("data:image/png;base64,") for src in parsed.images)
    text = " ".join(t.strip() for t in parsed.text if t.strip())
    first = text.index("PROMOTE")
    assert first < text.index("Per concurrency level")
    assert "break-even accept length" in text and "crossover" in text.lower()


def test_attribution_report_has_the_bars(tmp_path: Path) -> None:
    result = synthetic_result(kind="attribute", confounds=NCCL, levels=(1, 4))
    path = write_report(result, tmp_path)
    _opens(tmp_path / "attribution.png")
    text = path.read_text()
    assert "NCCL alone" in text and "speculation alone" in text and "INCONCLUSIVE" in text


def test_rounds_only_and_aa_results_still_render(tmp_path: Path) -> None:
    write_report(synthetic_result(with_requests=False, levels=(1,)), tmp_path / "rounds")
    assert sorted(p.name for p in (tmp_path / "rounds").glob("*.png")) == ["decode_tok_per_s.png"]
    write_report(synthetic_result(kind="aa", levels=(1,)), tmp_path / "aa")
    assert not (tmp_path / "aa" / "accept_length.png").exists()
    assert "A/A" in (tmp_path / "aa" / "report.html").read_text()


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    write_result(synthetic_result(gain=-0.05, levels=(1, 4)), tmp_path)
    return tmp_path


def test_compare_prints_the_table_and_a_grepable_last_line(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(run_dir)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "verdict: reject (simulator evidence: not promotable to GPU stacks)"
    assert any(re.match(r"\s+1\s+yes \|", line) for line in out)
    assert main(["compare", str(run_dir / "result.json"), "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "reject"


def test_report_command_writes_where_asked(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "elsewhere"
    assert main(["report", str(run_dir), "--out", str(out_dir)]) == 0
    assert (out_dir / "report.html").exists()
    assert f"report: {out_dir / 'report.html'}" in capsys.readouterr().out


def test_bad_result_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "result.json"
    bad.write_text("{not json")
    assert main(["compare", str(bad)]) == 2
    assert "a result document: not valid JSON" in capsys.readouterr().err
