"""What the A/B benchmark sends: the prompt set and the load plan, identical for both arms."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from sglab.config.base import Model


class PromptSpec(Model):
    """A seeded prompt set, identical for both arms."""

    source: Literal["random", "file"] = "random"
    file: str | None = None
    count: Annotated[int, Field(ge=1)] = 256
    input_len: Annotated[int, Field(ge=1)] = 256
    range_ratio: Annotated[float, Field(ge=0, le=1)] = 0.5
    seed: int = 1

    @model_validator(mode="after")
    def _file(self) -> "PromptSpec":
        if self.source == "file" and not self.file:
            raise ValueError("source is file but file is missing: give a JSONL file of prompts")
        return self


class RateSpec(Model):
    """`profile: rate`: open-loop arrivals (bench_serving's --request-rate). Levels are requests per second."""

    levels: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [1, 4, 16])
    arrival: Literal["poisson", "constant"] = "poisson"
    max_in_flight: Annotated[int, Field(ge=1)] = 64


class TraceSpec(Model):
    """`profile: trace`: replay a JSONL trace (timestamp_s, prompt or messages, output_tokens, category)."""

    file: str | None = None
    time_scale: Annotated[float, Field(gt=0)] = 1.0  # 2 replays twice as fast
    max_in_flight: Annotated[int, Field(ge=1)] = 64


class LoadPlan(Model):
    """What the A/B benchmark sends: same prompts, same load, both arms, interleaved rounds."""

    # How much load and when (sglab/load/profiles/): concurrency (closed loop), rate, trace.
    profile: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")] = "concurrency"
    concurrency: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [1, 4, 16])
    rounds: Annotated[int, Field(ge=1)] = 16
    # Levels the promotion policy does not gate on only show the crossover: fewer rounds there keeps
    # the measuring time where the decision is (None = load.rounds everywhere).
    ungated_rounds: Annotated[int, Field(ge=1)] | None = 4
    round_duration_s: Annotated[float, Field(gt=0)] | None = 6.0
    round_requests: Annotated[int, Field(ge=1)] | None = None
    warmup_requests: Annotated[int, Field(ge=0)] = 2
    max_new_tokens: Annotated[int, Field(ge=2)] = 128
    endpoint: Literal["generate", "chat"] = "generate"
    request_timeout_s: Annotated[float, Field(gt=0)] = 300.0
    seed: int = 0
    prompts: PromptSpec = Field(default_factory=PromptSpec)
    rate: RateSpec = Field(default_factory=RateSpec)
    trace: TraceSpec = Field(default_factory=TraceSpec)

    @model_validator(mode="after")
    def _round_size(self) -> "LoadPlan":
        if (self.round_duration_s is None) == (self.round_requests is None):
            raise ValueError("set exactly one of round-duration-s and round-requests")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise ValueError("concurrency levels must be distinct")
        if len(set(self.rate.levels)) != len(self.rate.levels):
            raise ValueError("rate levels must be distinct")
        if self.profile == "trace" and not self.trace.file:
            raise ValueError("profile is trace but trace.file is missing: give a JSONL trace")
        return self


