"""`sglab:traffic`: what production serves, so the gate is evaluated where the config will run.

A stack that declares traffic is gated at every one of its levels (each must be a win, or
non-inferior where `non-inferiority` gives that level a margin), instead of only at `policy.levels`.
The SLO (`slo`, or `policy.slo`) defines the good requests counted by the goodput metrics
(sglab/metrics/builtin.py). docs/verdict.md describes the gate.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from sglab.config.base import Model
from sglab.config.loadplan import MAX_LEVELS, Level

Bound = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Slo(Model):
    """A request is good when it meets every bound given here (and did not fail)."""

    ttft_ms: Bound | None = None
    # Time per output token after the first: (e2e - TTFT) / (output tokens - 1).
    tpot_ms: Bound | None = None
    # Optional bound on a quantile of the request's own inter-token gaps (stricter than the mean TPOT).
    itl_ms: Bound | None = None
    itl_quantile: Annotated[float, Field(gt=0, le=1)] = 0.99

    @model_validator(mode="after")
    def _some_bound(self) -> "Slo":
        if self.ttft_ms is None and self.tpot_ms is None and self.itl_ms is None:
            raise ValueError("an SLO needs at least one bound: ttft-ms, tpot-ms or itl-ms")
        return self


class Traffic(Model):
    """The operating points production serves: a load profile and its levels (with optional weights)."""

    profile: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")] = "concurrency"
    levels: list[Level] = Field(min_length=1, max_length=MAX_LEVELS)
    # Share of production traffic at each level (same order as levels); a weighted gain is reported.
    weights: list[Bound] | None = None
    slo: Slo | None = None
    # level -> margin: at that level the candidate may be at most `margin` worse (gain low >= -margin)
    # instead of having to win by policy.min-gain.
    non_inferiority: dict[int, Annotated[float, Field(ge=0, lt=1)]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> "Traffic":
        if len(set(self.levels)) != len(self.levels):
            raise ValueError("traffic levels must be distinct")
        if self.weights is not None and len(self.weights) != len(self.levels):
            raise ValueError(f"weights has {len(self.weights)} entries for {len(self.levels)} levels; "
                             "give one weight per level, in the same order")
        stray = sorted(set(self.non_inferiority) - set(self.levels))
        if stray:
            raise ValueError(f"non-inferiority names level(s) {stray} that are not traffic levels {self.levels}")
        return self

    def weight_of(self, level: int) -> float:
        if self.weights is None:
            return 1.0
        return self.weights[self.levels.index(level)]
