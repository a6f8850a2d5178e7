"""What kind of prompt this is, read from its text alone: the simulator's stand-in for a draft model's
sensitivity to content.

A cheap, deterministic scorer: code symbols and language names, digits next to operators and maths
words, JSON braces and extraction words, summary words, translation words and non-ASCII letters; very
long prompts are long-context. Natural-language text with sentence punctuation that matches nothing
else is chat; text without any punctuation (bench_serving-style random words, `make_prompt` output) is
`random`, which keeps the calibrated default acceptance. No request field or label is consulted.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sglab.sim.tokens import count_tokens

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
