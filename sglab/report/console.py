"""Console output of a run (`sglab bench` and `sglab compare` print the same): the verdict table, what served
the arms, then where the report is."""

from __future__ import annotations

from pathlib import Path

from sglab.report.provenance import label_console, machine_lines
from sglab.report.table import format_table
from sglab.schema.result import RunResult
from sglab.schema.verdict import Verdict


def render_console(result: RunResult, verdict: Verdict, report: Path | None = None) -> str:
    """The verdict table (and the run's recorded lints, what served its arms, the simulator-evidence label); the
    last line stays `verdict: <outcome>...` so scripts can grep it."""
    lines = format_table(verdict, result.lints).splitlines()
    recorded = any(a.machine is not None for a in result.arms)  # results before it was recorded: as they were
    for line in machine_lines(result) if recorded else ():
        lines.insert(len(lines) - 1, line)
    if report is not None:
        lines.insert(len(lines) - 1, f"report: {report}")
    return "\n".join(label_console(lines, result, verdict))
