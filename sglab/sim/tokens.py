"""A deterministic stand-in tokenizer: prompt token counts from text, synthetic output tokens.

A token is a run of word characters or one punctuation character, so re-tokenizing the simulator's
own output gives back exactly `completion_tokens` (each output token is " " + one word). Load
generators can build prompts of an exact token length with `make_prompt`.
"""

from __future__ import annotations

import re
import zlib

_TOKEN = re.compile(r"\w+|[^\w\s]")
WORDS = (
    "the", "model", "draft", "token", "verify", "accept", "batch", "decode", "server", "cache", "layer",
    "expert", "signal", "vector", "stream", "kernel", "graph", "result", "metric", "speed", "value", "place",
    "river", "mountain", "light", "music", "garden", "window", "paper", "orange", "silver", "winter",
)
CHAT_TOKENS_PER_MESSAGE = 4
CHAT_TOKENS_ASSISTANT_PREFIX = 3


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def count_prompt_tokens(text: str) -> int:
    """At least 1: an empty prompt still holds the BOS token."""
    return max(1, count_tokens(text))


def count_chat_tokens(contents: list[str]) -> int:
    """Messages rendered through a chat template: role markers per message plus the assistant prefix."""
    return sum(count_tokens(c) + CHAT_TOKENS_PER_MESSAGE for c in contents) + CHAT_TOKENS_ASSISTANT_PREFIX


def make_prompt(num_tokens: int, seed: int = 0) -> str:
    """A prompt that counts exactly `num_tokens` tokens (for load generators)."""
    start = zlib.crc32(str(seed).encode())
    return " ".join(WORDS[(start + i * 7) % len(WORDS)] for i in range(num_tokens))


class OutputTokens:
    """The synthetic tokens of one request: deterministic from a per-request offset."""

    def __init__(self, offset: int) -> None:
        self._offset = offset

    def token_id(self, index: int) -> int:
        return 1000 + (self._offset + index * 13) % 30000

    def text(self, start: int, stop: int) -> str:
        return "".join(" " + WORDS[(self._offset + i * 13) % len(WORDS)] for i in range(start, stop))

    def ids_json(self, start: int, stop: int) -> str:
        """Comma-joined ids, to extend a cumulative JSON array without re-serialising it."""
        return ",".join(str(self.token_id(i)) for i in range(start, stop))
