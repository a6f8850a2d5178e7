"""Locust's own CSV and HTML reports of a run, written into the run directory (one row per arm and metric)."""

from __future__ import annotations

import csv
from pathlib import Path

from locust.html import get_html_report
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

CSV_PREFIX = "locust"
HTML_FILE = "locust_report.html"


def write_locust_reports(environment, run_dir: Path | None) -> list[Path]:
    if run_dir is None or environment.runner is None:
        return []
    stats_csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
    paths = []
    for suffix, write in (("stats", stats_csv.requests_csv), ("failures", stats_csv.failures_csv),
                          ("exceptions", stats_csv.exceptions_csv)):
        path = run_dir / f"{CSV_PREFIX}_{suffix}.csv"
        with open(path, "w", newline="", encoding="utf-8") as fh:
            write(csv.writer(fh))
        paths.append(path)
    html = run_dir / HTML_FILE
    html.write_text(get_html_report(environment), encoding="utf-8")
    paths.append(html)
    return paths
