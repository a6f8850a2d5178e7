"""A deterministic stand-in tokenizer: prompt token counts from text, synthetic output tokens.

A token is a run of word characters or one punctuation character, so re-tokenizing the simulator's
own output gives back exactly `completion_tokens` (each output token is " " + one word). Load
generators can build prompts of an exact token length with `make_prompt`.

What kind of prompt this is, read from its text alone (`classify`), is the simulator's stand-in for a draft
model's sensitivity to content. A cheap, deterministic scorer: code symbols and language names, digits next to
operators and maths words, JSON braces and extraction words, summary words, translation words and non-ASCII
letters; very long prompts are long-context. Natural-language text with sentence punctuation that matches nothing
else is chat; text without any punctuation (bench_serving-style random words, `make_prompt` output) is `random`,
which keeps the calibrated default acceptance. No request field or label is consulted.
"""

from __future__ import annotations

import json
import re
import zlib
from functools import lru_cache

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


# What kind of prompt this is, read from its text alone.
RANDOM = "random"
CHAT = "chat"
CATEGORIES = ("code", "maths", "extraction", "summarisation", "translation", "long-context", CHAT, RANDOM)
LONG_CONTEXT_MIN_TOKENS = 1500  # prompts at least this long (simulator tokens) are long-context
MIN_SCORE = 3  # a category needs this much evidence to beat the chat/random fallback
CLASSIFY_CACHE_SIZE = 1024  # distinct prompt texts remembered (the bundled suite has 310)


def _words(*words: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(words) + r")\b", re.IGNORECASE)


# (pattern, points per match, cap on the points from this pattern). An explicit instruction ("summarise",
# "translate") outweighs whatever the passage it applies to contains.
_SIGNALS: dict[str, tuple[tuple[re.Pattern[str], int, int], ...]] = {
    "extraction": (
        (_words("json"), 4, 4),
        (_words("extract", "schema", "fields", "keys", "array of objects"), 1, 3),
        (re.compile(r"\{\s*\"|\"\w+\"\s*:"), 1, 2),
    ),
    "code": (
        (re.compile(r"```"), 3, 3),
        (re.compile(r"\bdef \w+\(|\breturn\b|\bimport \w|\bconst \w+ =|=>|\bclass \w+[:({]|#include|"
                    r"\bfn \w+\(|console\.\w+\(|\bprint\(|\w+\.\w+\(|;[ \t]*$|\{[ \t]*$", re.MULTILINE), 1, 4),
        (_words("python", "javascript", "typescript", "rust", "java", "kotlin", "swift", "ruby", "php", "golang",
                "bash", "sql", "regex", "function", "method", "script", "compile", "refactor", "cte", "query",
                "bug", "stack trace", "unit tests?", "program", "compiler"), 1, 3),
        (re.compile(r"\b(?:Go|C\+\+|C#)(?!\w)"), 1, 1),
        (re.compile(r"`\w+`"), 1, 2),
    ),
    "maths": (
        (_words("solve", "equation", "derivative", "integral", "probability", "prove", "simplify", "evaluate",
                "compute", "calculate", "integer", "dice", "compounded", "perimeter", "sum", "ratio",
                "average", "percent", r"log_\w+", "sqrt", "how many ways", "how long", "step by step"), 1, 4),
        (re.compile(r"\d[ \t]*[-+*/^=<>][ \t]*\(?\d|[a-z]\^\d|\d[a-z]\b|\)[ \t]*[-+*/^]"), 1, 3),
        (re.compile(r"\d[ \t]*(?:%|cm|km|kg|km/h|m/s)(?!\w)"), 1, 2),
        (re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)"), 1, 2),
    ),
    "summarisation": (
        (re.compile(r"\bsummar(?:ise|ize|ising|izing|y)\b|\btl;dr\b", re.IGNORECASE), 6, 6),
        (_words("key points", "condense", "bullet points", "main points", "in brief"), 1, 2),
    ),
    "translation": (
        (re.compile(r"\btranslat(?:e|ion|ing)\b|\bhow do you say\b|\btradu(?:ire|cir|cción|zione|ção|is)\b|"
                    r"\bübersetz", re.IGNORECASE), 6, 6),
        (_words("french", "german", "spanish", "italian", "portuguese", "dutch", "japanese", "chinese", "polish",
                "swedish", "korean", "arabic", "english"), 1, 2),
        (re.compile(r"[À-ɏͰ-ӿ぀-ヿ一-鿿]"), 1, 2),
    ),
}
_PUNCTUATION = re.compile(r"[.?!,;:]")


@lru_cache(maxsize=CLASSIFY_CACHE_SIZE)
def classify(text: str) -> str:
    """The category of a prompt's text (one of CATEGORIES). Cached: a run repeats its prompt set, and a long
    prompt costs up to ~2 ms of regex scanning in the scheduler's event loop."""
    if not text.strip():
        return RANDOM
    if not _PUNCTUATION.search(text):  # random words: no human writes a prompt without punctuation
        return RANDOM
    if count_tokens(text) >= LONG_CONTEXT_MIN_TOKENS:
        return "long-context"
    scores = {name: _score(text, signals) for name, signals in _SIGNALS.items()}
    best = max(scores, key=lambda name: scores[name])  # ties: the order of _SIGNALS
    if scores[best] >= MIN_SCORE:
        return best
    return CHAT


def _score(text: str, signals: tuple[tuple[re.Pattern[str], int, int], ...]) -> int:
    return sum(min(cap, points * len(pattern.findall(text))) for pattern, points, cap in signals)
