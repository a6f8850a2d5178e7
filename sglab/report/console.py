"""Console output of a run: the verdict table, then where the report is."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from sglab.report.table import format_table
from sglab.schema.verdict import Verdict


def render_console(verdict: Verdict, report: Path | None = None, lints: Iterable[Any] = (),
                   machines: Iterable[str] = ()) -> str:
    """The verdict table (and the run's recorded lints, what served its arms); the last line stays
    `verdict: <outcome>` so scripts can grep it."""
    lines = format_table(verdict, lints).splitlines()
    for line in machines:
        lines.insert(len(lines) - 1, line)
    if report is not None:
        lines.insert(len(lines) - 1, f"report: {report}")
    return "\n".join(lines)
