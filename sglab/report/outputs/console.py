"""`--output console` (default of `compare`): the verdict table; the last line is `verdict: <outcome>`."""

from __future__ import annotations

from sglab.report import REPORT_FILE
from sglab.report.console import render_console
from sglab.report.outputs.registry import OutputContext, OutputFormat, register


def _render(ctx: OutputContext) -> str:
    report = ctx.run_dir / REPORT_FILE
    return render_console(ctx.result, ctx.verdict, report if report.exists() else None)


CONSOLE = register(OutputFormat("console", "the verdict table (levels x gains, CIs, guards)", _render))
