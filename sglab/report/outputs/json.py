"""`--output json`: the recomputed verdict as JSON (sglab.schema.verdict.Verdict), with an `evidence` field: what
produced the numbers, at which time scale, and whether they can promote a GPU stack."""

from __future__ import annotations

import json

from sglab.report.outputs.registry import OutputContext, OutputFormat, register
from sglab.report.provenance import evidence_record


def _render(ctx: OutputContext) -> str:
    return json.dumps({**ctx.verdict.model_dump(mode="json"), "evidence": evidence_record(ctx.result)}, indent=1)


JSON = register(OutputFormat("json", "the verdict as JSON (with `evidence`: what produced the numbers)", _render))
