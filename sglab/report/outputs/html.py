"""`--output html` (default of `report`): the self-contained report.html with its PNGs."""

from __future__ import annotations

from sglab.report import write_report
from sglab.report.outputs.registry import OutputContext, OutputFormat, register


def _render(ctx: OutputContext) -> str:
    path = write_report(ctx.result, ctx.out_dir, ctx.verdict)
    return f"{ctx.verdict.sentence}\nreport: {path}"


HTML = register(OutputFormat("html", "report.html (plots embedded) in the output directory", _render))
