"""`--output json`: the recomputed verdict as JSON (sglab.schema.verdict.Verdict)."""

from __future__ import annotations

import json

from sglab.report.outputs.registry import OutputContext, OutputFormat, register


def _render(ctx: OutputContext) -> str:
    return json.dumps(ctx.verdict.model_dump(mode="json"), indent=1)


JSON = register(OutputFormat("json", "the verdict as JSON", _render))
