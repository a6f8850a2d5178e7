"""Load profiles: how much load a run applies and when requests are sent, one `@register`ed class each.

    from sglab.load.profiles import profile_for
    profile = profile_for(plan)          # the plan's `profile` (default: concurrency)

Adding a profile = one `@register`ed `LoadProfile` subclass in this module (docs/architecture.md); the registry
finds it, `profile_for` picks it by name.

What a load profile is: the levels a run measures, the users each level runs, and when they send. The runner
walks `levels()`; at each level it keeps `users_for(level)` Locust users running and, in every arm segment, asks
`pacing(level, round_index)` when the n-th request of the segment may start. The interleaved A/B design (same
requests, same order, both arms, paired rounds) stays the runner's job, so a profile only decides *how much*
load and *when*. The profiles:

- `concurrency` (the default): closed loop, N users, each sends its next request as soon as the previous one
  ends (level = N).
- `rate`: open loop, requests arrive at a given rate whether or not earlier ones have finished (level =
  req/s). bench_serving's `--request-rate` convention: Poisson arrivals by default (exponential gaps of mean
  1/rate), `constant` for evenly spaced ones; the first request at the segment's start. The schedule is seeded
  per (seed, level, round), so every arm of a round gets the same arrival times for the same prompts. At most
  `load.rate.max-in-flight` requests run at once (that many Locust users): an arrival that finds them all busy
  starts late, when one frees up (bench_serving's --max-concurrency).
- `trace`: replay a recorded trace, its requests in its order at its arrival times (one level: the trace).
  JSONL, one request per line: `timestamp_s` (seconds, non-decreasing), `prompt` (text) or `messages` (OpenAI
  chat messages), `output_tokens` (the reply length, sent with ignore_eos), optional `category`. Arrival offsets
  are the timestamps relative to the first, divided by `load.trace.time-scale` (2 = twice as fast). Every round
  of every arm replays the same trace from its first request (the same requests, the same times), so rounds
  stay paired; a round ends when the trace is done (or at `load.round-duration-s` / `load.round-requests`,
  whichever comes first). At most `load.trace.max-in-flight` requests run at once.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from sglab.core.errors import ConfigError
from sglab.core.paths import project_root
from sglab.core.untrusted_json import MiB, JsonLimits
from sglab.load.datasets import FIX, MAX_LINE_CHARS, category_label, jsonl_rows, message_content, positive_int
from sglab.load.prompts import Prompt

DEFAULT_PROFILE = "concurrency"


class Pacing:
    """When the request with issue index `index` of a segment may start (seconds after the segment opens).

    None means "as soon as a user is free" (closed loop). Subclasses give a schedule.
    """

    def start_offset_s(self, index: int) -> float | None:
        return None

    def requests(self) -> int | None:
        """How many requests the schedule holds (None = unbounded; the segment's duration or quota ends it)."""
        return None


CLOSED_LOOP = Pacing()


class LoadProfile(ABC):
    """One way of loading the arms. Subclasses set `name` and `@register` themselves in this module."""

    name: ClassVar[str]
    level_label: ClassVar[str]  # what a level is, for humans: "concurrency", "rate"...

    def __init__(self, plan: Any) -> None:
        self.plan = plan

    @abstractmethod
    def levels(self) -> list[int]:
        """The levels of the run, in the order they are measured."""

    @abstractmethod
    def users_for(self, level: int) -> int:
        """Locust users kept running at this level."""

    def pacing(self, level: int, round_index: int) -> Pacing:
        """When each request of a segment starts; the same for every arm of a round."""
        return CLOSED_LOOP

    def level_for_users(self, user_count: int) -> int:
        """An interactive run (Locust's own user count, no runner): the level those users represent."""
        return user_count

    def prompts(self, base_dir: Path | None = None) -> list[Prompt] | None:
        """The profile's own requests (a trace's); None: the plan's prompt set."""
        return None

    def prompt_offset(self, level: int, round_index: int, count: int) -> int | None:
        """Where a round starts in the prompt list (the same for every arm); None: the seeded schedule's offset."""
        return None

    #: False where the schedule is global to the segment (open loop): Locust workers would each replay it.
    distributable: ClassVar[bool] = True


# ---- the registry: profile name -> class ----------------------------------------------------------------------------
PROFILES: dict[str, type[LoadProfile]] = {}


def register(cls: type[LoadProfile]) -> type[LoadProfile]:
    if cls.name in PROFILES and PROFILES[cls.name] is not cls:
        raise ValueError(f"load profile {cls.name!r} is registered twice")
    PROFILES[cls.name] = cls
    return cls


def profile_names() -> list[str]:
    return sorted(PROFILES)


def profile_for(plan: Any, name: str | None = None) -> LoadProfile:
    """The load profile a plan asks for (its `profile` field when it has one)."""
    name = name or getattr(plan, "profile", None) or DEFAULT_PROFILE
    try:
        cls = PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown load profile {name!r}; known: {', '.join(profile_names())}") from None
    return cls(plan)


# ---- concurrency: closed loop ---------------------------------------------------------------------------------------
@register
class ConcurrencyProfile(LoadProfile):
    name = "concurrency"
    level_label = "concurrency"

    def levels(self) -> list[int]:
        return list(self.plan.concurrency)

    def users_for(self, level: int) -> int:
        return level


# ---- rate: open loop ------------------------------------------------------------------------------------------------
class Arrivals(Pacing):
    """Arrival offsets, drawn lazily from one seeded stream (the n-th is always the same)."""

    def __init__(self, rate_per_s: float, *, poisson: bool, seed: str) -> None:
        self.rate_per_s = rate_per_s
        self.poisson = poisson
        self._rng = random.Random(seed)
        self._offsets = [0.0]

    def start_offset_s(self, index: int) -> float:
        while len(self._offsets) <= index:
            gap = self._rng.expovariate(self.rate_per_s) if self.poisson else 1.0 / self.rate_per_s
            self._offsets.append(self._offsets[-1] + gap)
        return self._offsets[index]


@register
class RateProfile(LoadProfile):
    name = "rate"
    level_label = "rate (req/s)"
    distributable = False

    def levels(self) -> list[int]:
        return list(self.plan.rate.levels)

    def users_for(self, level: int) -> int:
        return self.plan.rate.max_in_flight

    def pacing(self, level: int, round_index: int) -> Arrivals:
        spec = self.plan.rate
        return Arrivals(float(level), poisson=spec.arrival == "poisson",
                        seed=f"arrivals:{self.plan.seed}:{level}:{round_index}")

    def level_for_users(self, user_count: int) -> int:
        return user_count  # an interactive Locust run has no rate: its level is its user count


# ---- trace: replay --------------------------------------------------------------------------------------------------
TRACE_KEY = "load.trace.file"
TRACE_LEVEL = 1  # the trace as recorded (time-scaled)
# Every round of every arm replays the whole trace, so it is held in memory and scheduled in full.
TRACE_LIMITS = JsonLimits("a trace", max_bytes=512 * MiB, max_depth=16, max_lines=100_000,
                          max_line_chars=MAX_LINE_CHARS, fix=FIX)
# A trace spans at most a day from its first request: a longer one is a unit mistake (ms or ns for s), and a
# round would wait that long for its next arrival.
MAX_SPAN_S = 86_400.0


class TraceSchedule(Pacing):
    def __init__(self, offsets_s: list[float]) -> None:
        self.offsets_s = offsets_s

    def start_offset_s(self, index: int) -> float:
        return self.offsets_s[index % len(self.offsets_s)]

    def requests(self) -> int:
        return len(self.offsets_s)


def read_trace(path: Path) -> list[tuple[float, Prompt]]:
    """(timestamp_s, Prompt) per line; ConfigError naming the file, line and fix on bad input."""
    if not path.exists():
        raise ConfigError(path, TRACE_KEY, "trace file not found",
                          'give a JSONL file with one {"timestamp_s": 0.0, "prompt": "...", "output_tokens": 128} '
                          "object per line")
    rows: list[tuple[float, Prompt]] = []
    for number, row in jsonl_rows(path, key=TRACE_KEY, limits=TRACE_LIMITS):
        stamp = row.get("timestamp_s")
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not stamp >= 0:
            raise ConfigError(path, f"{TRACE_KEY}:timestamp_s", f"line {number}: timestamp_s must be a number >= 0, "
                              f"got {str(stamp)[:40]}", "write the request's arrival time in seconds", number)
        if rows and stamp - rows[0][0] > MAX_SPAN_S:
            raise ConfigError(path, f"{TRACE_KEY}:timestamp_s", f"line {number}: timestamp_s {stamp:g} is "
                              f"{stamp - rows[0][0]:g} s after the first request, more than the {MAX_SPAN_S:g} s "
                              "(a day) a trace may span", "write timestamps in seconds (not ms or ns), or split "
                              "the trace", number)
        if rows and stamp < rows[-1][0]:
            raise ConfigError(path, f"{TRACE_KEY}:timestamp_s", f"line {number}: timestamp_s {stamp} is before the "
                              f"previous line's {rows[-1][0]}", "sort the trace by timestamp_s", number)
        tokens = positive_int(row.get("output_tokens"), str(path), f"{TRACE_KEY}:output_tokens", number)
        prompt, messages = row.get("prompt"), row.get("messages")
        if (prompt is None) == (messages is None):
            raise ConfigError(path, TRACE_KEY, f"line {number} needs exactly one of prompt or messages",
                              'write "prompt": "..." or "messages": [{"role": "user", "content": "..."}]', number)
        if messages is not None:
            if not isinstance(messages, list) or not messages:
                raise ConfigError(path, f"{TRACE_KEY}:messages", f"line {number}: messages must be a non-empty list",
                                  'write "messages": [{"role": "user", "content": "..."}]', number)
            chat = tuple(message_content(m, str(path), f"{TRACE_KEY}:messages", number) for m in messages)
            text = "\n\n".join(m["content"] for m in chat)
        else:
            if not isinstance(prompt, str) or not prompt:
                raise ConfigError(path, f"{TRACE_KEY}:prompt", f"line {number}: prompt must be a non-empty string",
                                  'write "prompt": "..."', number)
            chat, text = None, prompt
        category = row.get("category")
        if isinstance(category, str):
            category = category_label(category, str(path), f"{TRACE_KEY}:category", number)
        rows.append((float(stamp), Prompt(len(rows), text, len(text.split()), output_tokens=tokens, messages=chat,
                                          category=category if isinstance(category, str) else None)))
    if not rows:
        raise ConfigError(path, TRACE_KEY, "the trace is empty", "add at least one request")
    return rows


@register
class TraceProfile(LoadProfile):
    name = "trace"
    level_label = "trace"
    distributable = False

    def __init__(self, plan) -> None:
        super().__init__(plan)
        self._rows: list[tuple[float, Prompt]] | None = None
        self._base_dir: Path | None = None

    def _trace(self, base_dir: Path | None = None) -> list[tuple[float, Prompt]]:
        if self._rows is None or (base_dir is not None and base_dir != self._base_dir):
            if not self.plan.trace.file:
                raise ConfigError("(stack)", TRACE_KEY, "profile is trace but no trace file is given",
                                  "set load.trace.file or pass --trace FILE")
            path = Path(self.plan.trace.file)
            if not path.is_absolute():
                path = (base_dir or project_root()) / path
            self._rows, self._base_dir = read_trace(path), base_dir
        return self._rows

    def levels(self) -> list[int]:
        return [TRACE_LEVEL]

    def users_for(self, level: int) -> int:
        return self.plan.trace.max_in_flight

    def pacing(self, level: int, round_index: int) -> TraceSchedule:
        rows = self._trace(self._base_dir)
        first, scale = rows[0][0], self.plan.trace.time_scale
        return TraceSchedule([(stamp - first) / scale for stamp, _ in rows])

    def prompts(self, base_dir: Path | None = None) -> list[Prompt]:
        return [prompt for _, prompt in self._trace(base_dir)]

    def prompt_offset(self, level: int, round_index: int, count: int) -> int:
        return 0
