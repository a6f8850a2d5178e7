"""A deterministic stand-in tokenizer: prompt token counts from text, synthetic output tokens.

A token is a run of word characters or one punctuation character, so re-tokenizing the simulator's
own output gives back exactly `completion_tokens` (each output token is " " + one word). Load
generators can build prompts of an exact token length with `make_prompt`.
"""

from __future__ import annotations

import json
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


CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# markers of a chat template already rendered into raw text (ChatML, Llama 2/3, Gemma, Phi)
_TEMPLATE_MARKERS = re.compile(r"<\|im_start\|>|\[INST\]|<\|start_header_id\|>|<start_of_turn>|<\|user\|>")


def chat_prompt_key(contents: list[str]) -> str:
    """The prompt key of a chat request: its "role: content" lines as a JSON list (see prompt_content)."""
    return json.dumps(contents)


def prompt_content(prompt_key: str) -> tuple[str, bool]:
    """(the prompt's words, whether they went through a chat template) from a request's prompt key.

    Chat keys (chat_prompt_key) give their message contents, templated; token-id keys give no words;
    raw text is itself, templated only if it carries a rendered template's markers."""
    if prompt_key.startswith("["):
        try:
            parsed = json.loads(prompt_key)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list) and parsed and all(isinstance(p, int) for p in parsed):
            return "", False
        if isinstance(parsed, list) and parsed and all(isinstance(p, str) for p in parsed):
            parts = [p.split(": ", 1) for p in parsed]
            if all(len(part) == 2 and part[0] in CHAT_ROLES for part in parts):
                return "\n\n".join(part[1] for part in parts), True
    return prompt_key, bool(_TEMPLATE_MARKERS.search(prompt_key))


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
