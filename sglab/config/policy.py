"""When a candidate may be promoted."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from sglab.config.base import Model


class PromotionPolicy(Model):
    """When a candidate may be promoted. Defaults are deliberately conservative."""

    min_gain: float = 0.005
    metric: Literal["decode_tok_per_s", "output_tok_per_s"] = "decode_tok_per_s"
    levels: list[int] = Field(default_factory=lambda: [1])
    ttft_p99_max_increase: float | None = 0.5
    itl_p99_max_increase: float | None = None
    error_cap: Annotated[float, Field(ge=0, le=1)] = 0.01
    min_rounds: Annotated[int, Field(ge=2)] = 3
    min_requests: Annotated[int, Field(ge=1)] = 20
    confidence: Annotated[float, Field(gt=0.5, lt=1)] = 0.95
    # How the per-round interval is computed (sglab/analysis/stats.py; docs/verdict.md measures both).
    method: Literal["paired-t", "bootstrap"] = "paired-t"


