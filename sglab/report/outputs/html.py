"""`--output html` (default of `report`): the self-contained report.html with its PNGs."""

from __future__ import annotations

from sglab.report import write_report
from sglab.report.outputs.registry import OutputContext, OutputFormat, register
from sglab.report.provenance import evidence_line, simulator_producer


def _render(ctx: OutputContext) -> str:
    path = write_report(ctx.result, ctx.out_dir, ctx.verdict)
    producer = simulator_producer(ctx.result)
    label = f"\n{evidence_line(producer)}" if producer is not None else ""
    return f"{ctx.verdict.sentence}{label}\nreport: {path}"


HTML = register(OutputFormat("html", "report.html (plots embedded) in the output directory", _render))
