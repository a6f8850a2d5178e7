"""When a candidate may be promoted: the promotion policy (`sglab:policy`) and the production traffic it is gated
at (`sglab:traffic`).

A stack that declares traffic is gated at every one of its levels (each must be a win, or non-inferior where
`non-inferiority` gives that level a margin), instead of only at `policy.levels`. The SLO (`policy.slo`, with or
without traffic) defines the good requests counted by the goodput metrics (sglab/metrics/builtin.py).
docs/verdict.md describes the gate.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from sglab import metrics
from sglab.config.base import Model
from sglab.config.loadplan import MAX_LEVELS, MAX_ROUNDS, MAX_ROUND_REQUESTS, Level


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


# The interval of a recorded policy that names none: every result written before `sequential` became the
# default was judged with it (docs/verdict.md, "Sequential decisions"). Not a second default of `method`.
UNRECORDED_METHOD = "paired-t"


class PromotionPolicy(Model):
    """When a candidate may be promoted. Defaults are deliberately conservative."""

    # Finite numbers only (NaN compares false and would pass every gate); a negative min-gain would promote losers.
    min_gain: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.005
    # Any gate-able metric of the registry (sglab/metrics); the Literal lists the built-in ones for the docs.
    metric: Literal[tuple(metrics.gate_metric_names())] = "decode_tok_per_s"  # type: ignore[valid-type]
    levels: Annotated[list[Level], Field(min_length=1, max_length=MAX_LEVELS)] = Field(default_factory=lambda: [1])
    ttft_p99_max_increase: Annotated[float, Field(allow_inf_nan=False)] | None = 0.5
    itl_p99_max_increase: Annotated[float, Field(allow_inf_nan=False)] | None = None
    error_cap: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.01
    min_rounds: Annotated[int, Field(ge=2, le=MAX_ROUNDS)] = 3
    min_requests: Annotated[int, Field(ge=1, le=MAX_ROUNDS * MAX_ROUND_REQUESTS)] = 20
    confidence: Annotated[float, Field(gt=0.5, lt=1, allow_inf_nan=False)] = 0.95
    # How the per-round interval is computed at the gated levels (sglab/analysis/samples.py; docs/verdict.md
    # measures them). sequential: the anytime-valid confidence sequence, and `sglab bench` stops a gated
    # level once it decides (at most the bench's --rounds); paired-t / bootstrap: fixed-n intervals, read once.
    method: Literal["paired-t", "bootstrap", "sequential"] = "sequential"
    # The sequence's floor and holds (sglab/analysis/sequential.py CHECKS; docs/verdict.md (f) measures both).
    # standard: promotion from round 10, fast, but 6% of A/A runs on strongly dependent rounds (AR(1) rho 0.8)
    # promote; strict: promotion from round 20 and a stricter dependence hold, <= 2% on every measured noise
    # model, at the price of every early stop. A gate that installs into serving wants strict.
    checks: Literal["standard", "strict"] = "standard"
    # Where the arms run (docs/verdict.md, "Same conditions on real nodes"). crossover: the arms swap nodes
    # halfway, so a difference between the two nodes cancels from the gain and is reported on its own;
    # switchback: one node, the arms take turns in ABBA blocks; parallel: both at once on their own node, and
    # the gain includes any difference between the nodes (never promotable where a balanced design is asked).
    design: Literal["crossover", "switchback", "parallel"] = "crossover"
    # Output parity gates (sglab/analysis/provenance.py): the share of temperature-0 answers the candidate gives
    # exactly as the baseline does must reach the baseline's own A/A parity (real GPUs differ a little by
    # themselves; 100% on the simulator, which is lossless) minus this margin. Speculative decoding is lossless,
    # so a candidate below that changed what the model answers. A run without such answers cannot promote.
    output_parity_margin: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.05
    # What a good request is, for the goodput metrics (goodput_tok_per_s, goodput_req_per_s).
    slo: Slo | None = None
    # Set from sglab:traffic by the stack (write sglab:traffic, not this): the gate runs at its levels. The key
    # reference lists it as derived, not as keys to write (sglab/config/reference.py reads `set_from`).
    traffic: Traffic | None = Field(None, json_schema_extra={"set_from": "sglab:traffic"})

    @classmethod
    def from_record(cls, recorded: dict) -> "PromotionPolicy":
        """The policy a result recorded (snake_case keys). A record without `method` predates the sequential
        default and was judged with the fixed-n paired-t, so it still is (a sequential run always records
        its method); every other missing key takes today's default, as before. `min-output-parity`, the
        parity floor before the A/A-relative gate, is read as nothing: the margin's default gates instead."""
        return cls.model_validate({"method": UNRECORDED_METHOD,
                                   **{k: v for k, v in recorded.items() if k != "min_output_parity"}})

    def interval_method(self, level: int) -> str:
        """The interval at one level: a sequential policy's ungated levels run their fixed load.ungated-rounds
        and are read once, so they get the fixed-n paired-t (the confidence sequence would be unbounded for
        their first 4 rounds); gated levels and the fixed-n methods use `method`."""
        return "paired-t" if self.method == "sequential" and level not in self.levels else self.method

    @field_validator("metric", mode="plain")
    @classmethod
    def _gate_metric(cls, value: object) -> str:
        """Checked against the registry at validation time, so a metric declared later can gate."""
        allowed = metrics.gate_metric_names()
        if value not in allowed:
            quoted = [repr(n) for n in allowed]
            expected = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
            raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
        return str(value)
