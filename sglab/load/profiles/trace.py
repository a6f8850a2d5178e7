"""Replay a recorded trace: its requests, in its order, at its arrival times (one level: the trace).

JSONL, one request per line: `timestamp_s` (seconds, non-decreasing), `prompt` (text) or `messages`
(OpenAI chat messages), `output_tokens` (the reply length, sent with ignore_eos), optional `category`.
Arrival offsets are the timestamps relative to the first, divided by `load.trace.time-scale` (2 =
twice as fast). Every round of every arm replays the same trace from its first request (the same
requests, the same times), so rounds stay paired; a round ends when the trace is done (or at
`load.round-duration-s` / `load.round-requests`, whichever comes first). At most
`load.trace.max-in-flight` requests run at once.
"""

from __future__ import annotations

from pathlib import Path

from sglab.core.errors import ConfigError
from sglab.load.datasets.model import category_label, message_content, positive_int
from sglab.load.jsonl import FIX, MAX_LINE_CHARS, jsonl_rows
from sglab.load.profiles.base import LoadProfile, Pacing
from sglab.load.profiles.registry import register
from sglab.load.prompts import Prompt
from sglab.core.paths import project_root
from sglab.core.untrusted_json import MiB, JsonLimits

KEY = "load.trace.file"
LEVEL = 1  # the trace as recorded (time-scaled)
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
        raise ConfigError(path, KEY, "trace file not found",
                          'give a JSONL file with one {"timestamp_s": 0.0, "prompt": "...", "output_tokens": 128} '
                          "object per line")
    rows: list[tuple[float, Prompt]] = []
    for number, row in jsonl_rows(path, key=KEY, limits=TRACE_LIMITS):
        stamp = row.get("timestamp_s")
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not stamp >= 0:
            raise ConfigError(path, f"{KEY}:timestamp_s", f"line {number}: timestamp_s must be a number >= 0, "
                              f"got {str(stamp)[:40]}", "write the request's arrival time in seconds", number)
        if rows and stamp - rows[0][0] > MAX_SPAN_S:
            raise ConfigError(path, f"{KEY}:timestamp_s", f"line {number}: timestamp_s {stamp:g} is "
                              f"{stamp - rows[0][0]:g} s after the first request, more than the {MAX_SPAN_S:g} s "
                              "(a day) a trace may span", "write timestamps in seconds (not ms or ns), or split "
                              "the trace", number)
        if rows and stamp < rows[-1][0]:
            raise ConfigError(path, f"{KEY}:timestamp_s", f"line {number}: timestamp_s {stamp} is before the "
                              f"previous line's {rows[-1][0]}", "sort the trace by timestamp_s", number)
        tokens = positive_int(row.get("output_tokens"), str(path), f"{KEY}:output_tokens", number)
        prompt, messages = row.get("prompt"), row.get("messages")
        if (prompt is None) == (messages is None):
            raise ConfigError(path, KEY, f"line {number} needs exactly one of prompt or messages",
                              'write "prompt": "..." or "messages": [{"role": "user", "content": "..."}]', number)
        if messages is not None:
            if not isinstance(messages, list) or not messages:
                raise ConfigError(path, f"{KEY}:messages", f"line {number}: messages must be a non-empty list",
                                  'write "messages": [{"role": "user", "content": "..."}]', number)
            chat = tuple(message_content(m, str(path), f"{KEY}:messages", number) for m in messages)
            text = "\n\n".join(m["content"] for m in chat)
        else:
            if not isinstance(prompt, str) or not prompt:
                raise ConfigError(path, f"{KEY}:prompt", f"line {number}: prompt must be a non-empty string",
                                  'write "prompt": "..."', number)
            chat, text = None, prompt
        category = row.get("category")
        if isinstance(category, str):
            category = category_label(category, str(path), f"{KEY}:category", number)
        rows.append((float(stamp), Prompt(len(rows), text, len(text.split()), output_tokens=tokens, messages=chat,
                                          category=category if isinstance(category, str) else None)))
    if not rows:
        raise ConfigError(path, KEY, "the trace is empty", "add at least one request")
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
                raise ConfigError("(stack)", KEY, "profile is trace but no trace file is given",
                                  "set load.trace.file or pass --trace FILE")
            path = Path(self.plan.trace.file)
            if not path.is_absolute():
                path = (base_dir or project_root()) / path
            self._rows, self._base_dir = read_trace(path), base_dir
        return self._rows

    def levels(self) -> list[int]:
        return [LEVEL]

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
