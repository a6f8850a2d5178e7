"""The typed prompt record every dataset loader produces, and the dataset that holds them.

A record is either raw `prompt` text (for /generate or /v1/completions) or OpenAI `messages` (for
/v1/chat/completions, rendered by the server's chat template), with a category label and a target output
length. `output_tokens` is what a fixed-length run asks for (with ignore_eos); `max_tokens` is the cap
sent when the run lets the model stop by itself (None: output_tokens).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator

from sglab.config.loadplan import MAX_OUTPUT_TOKENS
from sglab.core.errors import ConfigError
from sglab.core.untrusted import is_control, printable
from sglab.core.untrusted_json import MiB, JsonLimits

ROLES = ("system", "developer", "user", "assistant", "tool")
UNLABELLED = "unlabelled"
WORDS_TO_TOKENS = 1.3  # a reply of n words is about 1.3 n tokens for common English tokenizers
# A ShareGPT JSON array is read whole (ShareGPT_V3_unfiltered_cleaned_split.json, bench_serving's, is 642 MB).
SHAREGPT_LIMITS = JsonLimits("a ShareGPT file", max_bytes=1024 * MiB, max_depth=16,
                             fix="fix the JSON syntax (a ShareGPT file is one JSON array of {\"conversations\": "
                                 "[...]}, or one conversation object per line)")


@dataclass(frozen=True)
class PromptRecord:
    id: str
    category: str
    output_tokens: int
    prompt: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("a PromptRecord has exactly one of prompt or messages")
        if self.output_tokens < 1 or (self.max_tokens is not None and self.max_tokens < 1):
            raise ValueError("output_tokens and max_tokens must be at least 1")

    @property
    def text(self) -> str:
        """The prompt's words: the raw prompt, or the messages' contents joined by blank lines."""
        if self.prompt is not None:
            return self.prompt
        return "\n\n".join(m["content"] for m in self.messages or ())

    def chat_body(self, *, natural_stop: bool = False) -> dict[str, Any]:
        """The /v1/chat/completions body fields (a raw prompt becomes one user message)."""
        messages = list(self.messages) if self.messages is not None else [{"role": "user", "content": self.prompt}]
        return {"messages": [dict(m) for m in messages], **self._limits(natural_stop)}

    def completion_body(self, *, natural_stop: bool = False) -> dict[str, Any]:
        """The /v1/completions body fields (messages become their text, without a chat template)."""
        return {"prompt": self.text, **self._limits(natural_stop)}

    def _limits(self, natural_stop: bool) -> dict[str, Any]:
        if natural_stop:
            return {"max_tokens": self.max_tokens or self.output_tokens, "ignore_eos": False}
        return {"max_tokens": self.output_tokens, "ignore_eos": True}


@dataclass(frozen=True)
class Dataset:
    name: str
    source: str
    records: tuple[PromptRecord, ...]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[PromptRecord]:
        return iter(self.records)

    def categories(self) -> dict[str, int]:
        """Category -> record count, in first-seen order."""
        return dict(Counter(r.category for r in self.records))

    def take(self, count: int) -> list[PromptRecord]:
        """`count` records in file order, cycling when the dataset is shorter (the same list for both arms)."""
        if not self.records:
            return []
        return [self.records[i % len(self.records)] for i in range(count)]


@dataclass(frozen=True)
class CategorySource:
    """Where a loader takes each record's category: a field of the row, or one fixed label for the file.

    CLI form (`parse`): `field:NAME` reads the row's NAME field, anything else is a fixed label."""

    field: str | None = None
    fixed: str | None = None

    @classmethod
    def parse(cls, value: str | None) -> "CategorySource":
        if value is None or not value.strip():
            return cls(fixed=UNLABELLED)
        value = value.strip()
        if value.startswith("field:"):
            name = value[len("field:"):].strip()
            if not name:
                raise ValueError("give the field name after 'field:', e.g. field:category")
            return cls(field=name)
        return cls(fixed=value)

    def category_of(self, row: dict[str, Any], file: str, where: str, line: int | None) -> str:
        if self.field is None:
            return self.fixed or UNLABELLED
        value = row.get(self.field)
        if isinstance(value, str) and value.strip():
            return category_label(value.strip(), file, f"{where}.{self.field}", line)
        raise ConfigError(file, f"{where}.{self.field}", f"the category field {self.field!r} is missing or empty",
                          f"add \"{self.field}\": \"<category>\" to every row, or give a fixed category "
                          "instead of field:NAME", line)


MAX_CATEGORY_CHARS = 64


def category_label(value: str, file: str, key: str, line: int | None) -> str:
    """A category is a label printed in every table: no controls or line breaks, at most 64 characters."""
    if len(value) > MAX_CATEGORY_CHARS or any(is_control(ch) for ch in value):
        raise ConfigError(file, key, f"the category {printable(value, limit=40)!r} is not a label (at most "
                          f"{MAX_CATEGORY_CHARS} characters, no control characters or line breaks)",
                          "give a short category name such as code or chat", line)
    return value


def words_to_tokens(text: str) -> int:
    return max(1, round(len(text.split()) * WORDS_TO_TOKENS))


def positive_int(value: Any, file: str, key: str, line: int | None) -> int:
    """A token count: a whole number from 1 to MAX_OUTPUT_TOKENS (load.max-new-tokens' bound)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_OUTPUT_TOKENS:
        raise ConfigError(file, key, f"must be a positive integer of at most {MAX_OUTPUT_TOKENS}, got "
                          f"{str(value)[:40]}", f"write a whole number from 1 to {MAX_OUTPUT_TOKENS} (the limit of "
                          "load.max-new-tokens)", line)
    return value


def derived_tokens(text: str, file: str, key: str, line: int | None) -> int:
    """words x 1.3 of a logged reply, refused past MAX_OUTPUT_TOKENS (a request must not ask for more)."""
    tokens = words_to_tokens(text)
    if tokens > MAX_OUTPUT_TOKENS:
        raise ConfigError(file, key, f"the reply is about {tokens} tokens ({len(text.split())} words), over the "
                          f"{MAX_OUTPUT_TOKENS} a request may ask for", "give the row an explicit output_tokens, "
                          "or leave the conversation out", line)
    return tokens


def message_content(message: Any, file: str, key: str, line: int | None) -> dict[str, str]:
    """One OpenAI message as {role, content}; list-of-parts content keeps its text parts."""
    if not isinstance(message, dict):
        raise ConfigError(file, key, "a message must be an object with role and content",
                          "write {\"role\": \"user\", \"content\": \"...\"}", line)
    role = message.get("role")
    if role not in ROLES:
        raise ConfigError(file, f"{key}.role", f"unknown role {role!r}", f"use one of {', '.join(ROLES)}", line)
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(p["text"] for p in content if isinstance(p, dict) and p.get("type", "text") == "text"
                            and isinstance(p.get("text"), str))
    if not isinstance(content, str):
        raise ConfigError(file, f"{key}.content", "content must be a string or a list of text parts",
                          "write \"content\": \"...\"", line)
    return {"role": role, "content": content}
