"""What the A/B benchmark sends: the prompt set and the load plan, identical for both arms."""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from sglab.config.base import Model


# What one bench may ask for (docs/load.md, "Limits"): the fields below declare them, the command line and
# the prompt/trace readers read them from here. Larger values are typos or units mistakes, or would exhaust
# the machine that sends the load (file descriptors, memory, a round that never ends).
MAX_CONCURRENCY = 4096  # users (connections) per arm, also the open-loop in-flight cap
MAX_RATE = 1000  # requests/s of an open-loop level
MAX_LEVELS = 32
MAX_ROUNDS = 1000
MAX_ROUND_S = 3600.0
MAX_ROUND_REQUESTS = 100_000
MAX_OUTPUT_TOKENS = 131_072  # per request: load.max-new-tokens, a dataset's or a trace's output_tokens
MAX_PROMPTS = 1_000_000  # prompt count / limit
MAX_INPUT_LEN = 262_144  # words of a random prompt (a 256k-token context)
MAX_REQUEST_TIMEOUT_S = 3600.0
MAX_TRACE_TIME_SCALE = 1000.0
MAX_SEED = 2 ** 32 - 1

Level = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]


def run_seed() -> int:
    """A seed of the run's own: load.seed unset draws one per run (recorded in the result's load plan), so a
    re-run draws new prompts, arm order and acceptance draws instead of replaying the run before it."""
    return secrets.randbelow(MAX_SEED + 1)


def _seconds(gt: float, le: float) -> Any:
    # mypy cannot read a type a call returns: the fields declared with it carry `type: ignore[valid-type]`
    return Annotated[float, Field(gt=gt, le=le, allow_inf_nan=False)]


# Sources whose prompts are chat-shaped (OpenAI messages): they go to the chat endpoint by default.
CHAT_SOURCES = ("suite", "sharegpt", "openai")


class PromptSpec(Model):
    """A seeded prompt set, identical for both arms.

    The default is the bundled suite: chat-shaped prompts by category, the traffic speculation is judged on
    (random words give drafts nothing to predict). `random`/`file`: `count` prompts (random words of `input-len`,
    or JSONL {"prompt"} lines). `suite` (the bundled prompt suite), `sharegpt` (ShareGPT JSON) and `openai`
    (OpenAI messages JSONL): the dataset's records, at most `limit`, each with its category and output length;
    `categories` is `field:NAME` or a fixed label for an import, a comma-separated subset of the suite's
    categories for `suite`.
    """

    source: Literal["random", "file", "suite", "sharegpt", "openai"] = "suite"
    file: str | None = None
    categories: str | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_PROMPTS)] | None = None
    count: Annotated[int, Field(ge=1, le=MAX_PROMPTS)] = 256
    input_len: Annotated[int, Field(ge=1, le=MAX_INPUT_LEN)] = 256
    range_ratio: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.5
    seed: Seed = 1

    @model_validator(mode="after")
    def _file(self) -> "PromptSpec":
        if self.source in ("file", "sharegpt", "openai") and not self.file:
            raise ValueError(f"source is {self.source} but file is missing: give the dataset file "
                             f"({'a JSONL file of prompts' if self.source == 'file' else self.source + ' format'})")
        if self.source in ("random", "suite") and self.file:
            raise ValueError(f"source {self.source} reads no file: remove file, or set source to file, "
                             "sharegpt or openai")
        if self.source not in CHAT_SOURCES and (self.categories is not None or self.limit is not None):
            raise ValueError(f"categories and limit apply to the suite, sharegpt and openai sources, not "
                             f"{self.source}: remove them (count sets how many {self.source} prompts)")
        return self

    @property
    def chat_shaped(self) -> bool:
        return self.source in CHAT_SOURCES


class RateSpec(Model):
    """`profile: rate`: open-loop arrivals (bench_serving's --request-rate). Levels are requests per second."""

    levels: Annotated[list[Annotated[int, Field(ge=1, le=MAX_RATE)]], Field(min_length=1, max_length=MAX_LEVELS)] \
        = Field(default_factory=lambda: [1, 4, 16])
    arrival: Literal["poisson", "constant"] = "poisson"
    max_in_flight: Level = 64


class TraceSpec(Model):
    """`profile: trace`: replay a JSONL trace (timestamp_s, prompt or messages, output_tokens, category)."""

    file: str | None = None
    time_scale: Annotated[float, Field(gt=0, le=MAX_TRACE_TIME_SCALE, allow_inf_nan=False)] = 1.0  # 2: twice as fast
    max_in_flight: Level = 64


class LoadPlan(Model):
    """What the A/B benchmark sends: same prompts, same load, both arms, interleaved rounds."""

    # How much load and when (sglab/load/profiles.py): concurrency (closed loop), rate, trace.
    profile: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")] = "concurrency"
    concurrency: Annotated[list[Level], Field(min_length=1, max_length=MAX_LEVELS)] = Field(
        default_factory=lambda: [1, 4, 16])
    rounds: Annotated[int, Field(ge=1, le=MAX_ROUNDS)] = 16
    # Levels the promotion policy does not gate on only show the crossover: fewer rounds there keeps
    # the measuring time where the decision is (None = load.rounds everywhere).
    ungated_rounds: Annotated[int, Field(ge=1, le=MAX_ROUNDS)] | None = 4
    # Rounds per period of a design that moves the arms (policy.design; sglab/load/design.py): a crossover swaps
    # the arms' nodes after every period, a switchback switches the arm it serves. The analysis pairs round j of
    # period 2k-1 with round j of period 2k, so the first crossover pair exists at round period-rounds + 1 and
    # a sequential level can decide from then on, inside any even period; 4 puts the first pairs (rounds 5-8)
    # before the standard checks' floor of 10 rounds, makes the default plans whole cycles (8 rounds divide
    # load.rounds 16 and the sequential max of 32) and costs three swaps per 16 rounds (each a restart of both
    # servers and a burn-in). A level with fewer rounds (the ungated levels' 4) gets shorter periods so it
    # still swaps (rounds // 2; rounds // 4 for a switchback's ABBA).
    period_rounds: Annotated[int, Field(ge=1, le=MAX_ROUNDS)] = 4
    round_duration_s: _seconds(0, MAX_ROUND_S) | None = 6.0  # type: ignore[valid-type]
    round_requests: Annotated[int, Field(ge=1, le=MAX_ROUND_REQUESTS)] | None = None
    warmup_requests: Annotated[int, Field(ge=0, le=MAX_ROUND_REQUESTS)] = 2
    max_new_tokens: Annotated[int, Field(ge=2, le=MAX_OUTPUT_TOKENS)] = 128
    # Chat-shaped prompt sources (suite, sharegpt, openai) default to chat, so the server applies the
    # model's chat template (what EAGLE drafts are trained on); see _default_endpoint.
    endpoint: Literal["generate", "chat"] = Field("generate", json_schema_extra={
        "default_text": f"`chat` for prompt sources {', '.join(CHAT_SOURCES)}; `generate` otherwise"})
    # true: requests send ignore_eos false and the prompt's max_tokens cap, and a reply may stop early.
    natural_stop: bool = False
    request_timeout_s: _seconds(0, MAX_REQUEST_TIMEOUT_S) = 300.0  # type: ignore[valid-type]
    # Prompt offsets, arm order and the simulators' acceptance draws. Unset: each run draws its own when it
    # starts (for_run; a re-run of the same seed replays the run before and a sequence refuses it,
    # sglab/analysis/accumulate.py); set it to reproduce a recorded run. Never drawn when the config is read, so
    # the stack's hashes and what `pulumi up` renders stay the same from one read to the next.
    seed: Seed | None = None
    prompts: PromptSpec = Field(default_factory=PromptSpec)
    rate: RateSpec = Field(default_factory=RateSpec)
    trace: TraceSpec = Field(default_factory=TraceSpec)

    @model_validator(mode="before")
    @classmethod
    def _default_endpoint(cls, data: Any) -> Any:
        """No endpoint given: chat for chat-shaped prompt sources, the declared default otherwise."""
        if not isinstance(data, dict) or "endpoint" in data:
            return data
        prompts = data.get("prompts")
        default = PromptSpec.model_fields["source"].default
        source = prompts.source if isinstance(prompts, PromptSpec) else (
            prompts.get("source", default) if isinstance(prompts, dict) else default)
        return {**data, "endpoint": "chat"} if source in CHAT_SOURCES else data

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

    def for_run(self) -> "LoadPlan":
        """The plan as one run sends it: an unset seed drawn for this run (what the result records)."""
        return self if self.seed is not None else self.model_copy(update={"seed": run_seed()})


