"""`--output plots`: the PNG plots alone (decode speed and gain, latency CDFs, accept length, attribution)."""

from __future__ import annotations

from sglab.report.outputs.registry import OutputContext, OutputFormat, register


def _render(ctx: OutputContext) -> str:
    from sglab.report.plots import write_plots  # matplotlib only when asked

    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    made = write_plots(ctx.result, ctx.verdict, ctx.out_dir)
    return "\n".join(f"plot {name}: {path}" for name, path in made.items()) or "no samples to plot"


PLOTS = register(OutputFormat("plots", "PNG plots in the output directory", _render))
