"""Judge a finished A/B run, store its verdict, print its table and write its report (bench and a sweep's
confirmation share this step; the CLI and the sweep both call it, so it lives above analysis, not in cli/)."""

from __future__ import annotations

from pathlib import Path

from sglab.analysis.verdict import judge
from sglab.report.console import render_console
from sglab.schema.result import RunResult
from sglab.results.store import write_result
from sglab.core.untrusted import printable


def judge_and_report(result: RunResult, run_dir: Path) -> str | None:
    """Store the verdict in the result, write the report, print what `sglab compare` prints; returns the
    outcome. A sweep's confirmation (result.sweep) is promoted only by naming it, so its next step names this
    run's directory."""
    verdict = judge(result)
    if result.sweep is not None:
        verdict.promote_result = str(run_dir)
    result.verdict = verdict.model_dump(mode="json")
    write_result(result, run_dir, overwrite=True)
    try:
        from sglab.report import write_report
    except ImportError:
        write_report = None
    report = write_report(result, run_dir, verdict) if write_report is not None else None
    # what `sglab compare` prints: the table, what served the arms (and the simulator label), the report
    print(printable(render_console(result, verdict, report), newlines=True, limit=None))
    return verdict.outcome
