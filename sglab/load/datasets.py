"""Prompt datasets that look like traffic: the bundled suite, ShareGPT JSON and OpenAI `messages` JSONL, and the
one JSONL reader every prompt file sglab loads goes through (prompt files, message logs, traces).

    from sglab.load.datasets import load_suite, load_sharegpt, load_openai_jsonl, CategorySource
    suite = load_suite()                                   # Dataset of PromptRecord, 7 categories
    logs = load_openai_jsonl("logs.jsonl", categories=CategorySource.parse("field:route"))
    body = record.chat_body(natural_stop=True)             # messages + max_tokens (+ ignore_eos)

Loaders raise sglab.core.errors.ConfigError (file, line, fix) on bad input.

- The record: every loader produces `PromptRecord`s, held by a `Dataset`. A record is either raw `prompt` text
  (for /generate or /v1/completions) or OpenAI `messages` (for /v1/chat/completions, rendered by the server's
  chat template), with a category label and a target output length. `output_tokens` is what a fixed-length run
  asks for (with ignore_eos); `max_tokens` is the cap sent when the run lets the model stop by itself (None:
  output_tokens).
- JSONL (`jsonl_rows`), over the bounded JSON reader (sglab/core/untrusted_json.py): blank lines are skipped; a
  file over its limits (size, lines, characters per line, nesting, numbers), a line that is not JSON (or, with
  `objects`, not a JSON object), a key given twice and a file that is not UTF-8 are one ConfigError naming the
  file, the stack key, the line and the fix. What each row must hold is its caller's business.
- OpenAI `messages` JSONL (a user's own request logs, `load_openai_jsonl`): one {"messages": [...]} object per
  line. Optional per line: `output_tokens` (the target reply length), `max_tokens` (the cap for natural
  stopping), `id`, and the category field the user names. When the last message is the assistant's reply (logged
  traffic), it is dropped from the prompt and its length (words x 1.3) is the target; otherwise the line's
  `output_tokens`, then its `max_tokens`, then the loader's default.
- ShareGPT-format conversations (`load_sharegpt`): a JSON array (or JSONL) of {"conversations": [{"from",
  "value"}, ...]}. `from` maps to OpenAI roles (human/user -> user, gpt/assistant/chatgpt -> assistant, system ->
  system). The prompt is the conversation up to its last human turn; the target output length is the gpt reply
  that follows it (words x 1.3), or the loader's default when the conversation ends on a human turn.
  Conversations with no human turn are skipped (as bench_serving does).
- The bundled prompt suite (`load_suite`): a few hundred prompts written for sglab (tools/gen_prompt_suite.py
  makes them), in categories chat, code, maths, summarisation, extraction, translation, long-context; every
  record carries its category, a target output length and a natural-stop cap. Shipped as package data
  (sglab/load/data/prompt_suite.jsonl).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from sglab.config.loadplan import MAX_OUTPUT_TOKENS
from sglab.core.errors import ConfigError
from sglab.core.untrusted import is_control
from sglab.core.untrusted_json import MiB, JsonLimits, JsonRefused, decode, jsonl_lines, loads, parse, read_bytes

ROLES = ("system", "developer", "user", "assistant", "tool")
UNLABELLED = "unlabelled"
WORDS_TO_TOKENS = 1.3  # a reply of n words is about 1.3 n tokens for common English tokenizers
DEFAULT_OUTPUT_TOKENS = 256  # a loader's reply length where a row gives none


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
        raise ConfigError(file, key, f"the category {value[:40]!r} is not a label (at most "
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


# ---- JSONL ----------------------------------------------------------------------------------------------------------
FIX = "write one JSON object per line"
# A prompt or trace line: a 256k-token context is about 1 MB of text; 4 Mi characters leave room for JSON.
MAX_LINE_CHARS = 4 * MiB
JSONL_LIMITS = JsonLimits("a JSONL prompt file", max_bytes=512 * MiB, max_depth=16, max_lines=1_000_000,
                          max_line_chars=MAX_LINE_CHARS, fix=FIX)


def jsonl_rows(path: Path | str, *, key: str | None, text: str | None = None, objects: bool = True,
               limits: JsonLimits = JSONL_LIMITS) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed row) per non-blank line of `path` (or of `text`, already read from it)."""
    path = Path(path)
    for number, line in jsonl_lines(path, limits, key=key, text=text):
        try:
            row = parse(line, limits)
        except JsonRefused as exc:
            problem = str(exc).replace("not valid JSON (line 1, column", "is not JSON (column", 1)
            sep = " " if problem.startswith("is not JSON") else ": "
            raise ConfigError(path, key, f"line {number}{sep}{problem}", limits.fix, number) from None
        if objects and not isinstance(row, dict):
            raise ConfigError(path, key, f"line {number} is not an object", limits.fix, number)
        yield number, row


# ---- OpenAI messages JSONL ------------------------------------------------------------------------------------------
def load_openai_jsonl(path: Path | str, *, categories: CategorySource | None = None,
                      default_output_tokens: int = DEFAULT_OUTPUT_TOKENS, limit: int | None = None,
                      text: str | None = None, name: str | None = None) -> Dataset:
    """Read the file (or `text` already read from it) into a Dataset; ConfigError names file, line, fix."""
    path = Path(path)
    categories = categories or CategorySource()
    if text is None:
        if not path.exists():
            raise ConfigError(path, None, "dataset file not found",
                              "give a JSONL file with one {\"messages\": [...]} object per line")
    records: list[PromptRecord] = []
    for number, row in jsonl_rows(path, key=None, text=text):
        records.append(record_from_row(row, str(path), number, categories, default_output_tokens, len(records)))
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise ConfigError(path, None, "the dataset file holds no records",
                          "add lines like {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}")
    return Dataset(name or path.stem, str(path), tuple(records))


def record_from_row(row: object, file: str, line: int, categories: CategorySource, default_output_tokens: int,
                    index: int) -> PromptRecord:
    if not isinstance(row, dict) or not isinstance(row.get("messages"), list) or not row["messages"]:
        raise ConfigError(file, "messages", f"line {line} has no non-empty \"messages\" list",
                          "write {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]} on each line", line)
    messages = [message_content(m, file, f"messages[{i}]", line) for i, m in enumerate(row["messages"])]
    reply = None
    if messages[-1]["role"] == "assistant" and len(messages) > 1:
        reply = messages.pop()["content"]
    if not any(m["role"] == "user" for m in messages):
        raise ConfigError(file, "messages", f"line {line} has no user message",
                          "each line needs at least one {\"role\": \"user\", ...} message", line)
    max_tokens = positive_int(row["max_tokens"], file, "max_tokens", line) if "max_tokens" in row else None
    if "output_tokens" in row:
        output_tokens = positive_int(row["output_tokens"], file, "output_tokens", line)
    elif reply is not None:
        output_tokens = derived_tokens(reply, file, "messages", line)
    else:
        output_tokens = max_tokens or default_output_tokens
    record_id = row.get("id")
    return PromptRecord(id=str(record_id) if record_id is not None else f"line-{line}",
                        category=categories.category_of(row, file, f"line {line}", line),
                        output_tokens=output_tokens, messages=tuple(messages), max_tokens=max_tokens)


# ---- ShareGPT -------------------------------------------------------------------------------------------------------
ROLE_OF = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
           "bard": "assistant", "bing": "assistant", "model": "assistant", "system": "system"}
# A ShareGPT JSON array is read whole (ShareGPT_V3_unfiltered_cleaned_split.json, bench_serving's, is 642 MB).
SHAREGPT_LIMITS = JsonLimits("a ShareGPT file", max_bytes=1024 * MiB, max_depth=16,
                             fix="fix the JSON syntax (a ShareGPT file is one JSON array of {\"conversations\": "
                                 "[...]}, or one conversation object per line)")


def load_sharegpt(path: Path | str, *, categories: CategorySource | None = None,
                  default_output_tokens: int = DEFAULT_OUTPUT_TOKENS, limit: int | None = None) -> Dataset:
    path = Path(path)
    categories = categories or CategorySource()
    if not path.exists():
        raise ConfigError(path, None, "ShareGPT file not found",
                          "give a JSON array of {\"conversations\": [{\"from\": \"human\", \"value\": \"...\"}]}")
    text = decode(read_bytes(path, SHAREGPT_LIMITS), path, SHAREGPT_LIMITS)
    records: list[PromptRecord] = []
    for row, line, where in _sharegpt_rows(path, text):
        record = _sharegpt_record(row, str(path), line, where, categories, default_output_tokens)
        if record is not None:
            records.append(record)
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise ConfigError(path, None, "no conversation with a human turn in the file",
                          "each entry needs \"conversations\" with at least one {\"from\": \"human\"} turn")
    return Dataset(path.stem, str(path), tuple(records))


def _sharegpt_rows(path: Path, text: str):
    """(row, line or None, key prefix) per conversation, from a JSON array or JSONL."""
    if text.lstrip().startswith("["):
        for i, row in enumerate(loads(text, path, SHAREGPT_LIMITS)):
            yield row, None, f"[{i}]"
        return
    limits = replace(JSONL_LIMITS, what=SHAREGPT_LIMITS.what, fix="write a JSON array, or one conversation object "
                     "per line")
    for number, row in jsonl_rows(path, key=None, text=text, objects=False, limits=limits):
        yield row, number, f"line {number}"


def _sharegpt_record(row: Any, file: str, line: int | None, where: str, categories: CategorySource,
            default_output_tokens: int) -> PromptRecord | None:
    turns = row.get("conversations") if isinstance(row, dict) else None
    if not isinstance(turns, list):
        raise ConfigError(file, f"{where}.conversations", "missing or not a list",
                          "each entry needs \"conversations\": [{\"from\": \"human\", \"value\": \"...\"}, ...]", line)
    messages: list[dict[str, str]] = []
    for j, turn in enumerate(turns):
        key = f"{where}.conversations[{j}]"
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise ConfigError(file, key, "a turn needs \"from\" and a string \"value\"",
                              "write {\"from\": \"human\", \"value\": \"...\"}", line)
        role = ROLE_OF.get(str(turn.get("from", "")).lower())
        if role is None:
            raise ConfigError(file, f"{key}.from", f"unknown speaker {turn.get('from')!r}",
                              "use human or gpt (also: user, assistant, system)", line)
        messages.append({"role": role, "content": turn["value"]})
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last_user is None:
        return None
    reply = next((m["content"] for m in messages[last_user + 1:] if m["role"] == "assistant"), None)
    output_tokens = derived_tokens(reply, file, where, line) if reply else default_output_tokens
    max_tokens = positive_int(row["max_tokens"], file, f"{where}.max_tokens", line) if "max_tokens" in row else None
    record_id = row.get("id")
    return PromptRecord(id=str(record_id) if record_id is not None else where,
                        category=categories.category_of(row, file, where, line), output_tokens=output_tokens,
                        messages=tuple(messages[:last_user + 1]), max_tokens=max_tokens)


# ---- the bundled suite ----------------------------------------------------------------------------------------------
SUITE_NAME = "sglab-suite"
SUITE_FILE = "prompt_suite.jsonl"
SUITE_CATEGORIES = ("chat", "code", "maths", "summarisation", "extraction", "translation", "long-context")


def load_suite(*, categories: tuple[str, ...] | None = None, limit: int | None = None) -> Dataset:
    """The suite, optionally only some categories (in file order)."""
    resource = resources.files("sglab.load") / "data" / SUITE_FILE
    dataset = load_openai_jsonl(str(resource), categories=CategorySource(field="category"),
                                text=resource.read_text(encoding="utf-8"), name=SUITE_NAME)
    records = dataset.records
    if categories is not None:
        unknown = sorted(set(categories) - set(SUITE_CATEGORIES))
        if unknown:
            raise ValueError(f"unknown suite categories {unknown}: choose from {', '.join(SUITE_CATEGORIES)}")
        records = tuple(r for r in records if r.category in categories)
    if limit is not None:
        records = records[:limit]
    return Dataset(dataset.name, dataset.source, records)
