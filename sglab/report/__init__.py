"""Reports: a self-contained HTML page and PNG plots per run, and the console table."""

from __future__ import annotations

from pathlib import Path

from sglab.analysis.verdict import judge
from sglab.schema.result import RunResult
from sglab.schema.verdict import Verdict

REPORT_FILE = "report.html"


def write_report(result: RunResult, run_dir: Path, verdict: Verdict | None = None) -> Path:
    """Write report.html and its PNGs into `run_dir`; returns the HTML path. Derived files, rewritten freely."""
    from sglab.report.html import render_html
    from sglab.report.plots import write_plots

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    verdict = verdict or judge(result)
    plots = write_plots(result, verdict, run_dir)
    path = run_dir / REPORT_FILE
    tmp = path.with_name(f".{REPORT_FILE}.tmp")
    tmp.write_text(render_html(result, verdict, plots), encoding="utf-8")
    tmp.replace(path)
    return path


__all__ = ["REPORT_FILE", "write_report"]
