"""ShareGPT-format conversations: a JSON array (or JSONL) of {"conversations": [{"from", "value"}, ...]}.

`from` maps to OpenAI roles (human/user -> user, gpt/assistant/chatgpt -> assistant, system -> system).
The prompt is the conversation up to its last human turn; the target output length is the gpt reply that
follows it (words x 1.3), or the loader's default when the conversation ends on a human turn.
Conversations with no human turn are skipped (as bench_serving does) and counted in the dataset name.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from sglab.core.errors import ConfigError
from sglab.load.datasets.model import (SHAREGPT_LIMITS, CategorySource, Dataset, PromptRecord, derived_tokens,
                                       positive_int)
from sglab.load.jsonl import JSONL_LIMITS, jsonl_rows
from sglab.core.untrusted_json import decode, loads, read_bytes

ROLE_OF = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
           "bard": "assistant", "bing": "assistant", "model": "assistant", "system": "system"}
DEFAULT_OUTPUT_TOKENS = 256


def load_sharegpt(path: Path | str, *, categories: CategorySource | None = None,
                  default_output_tokens: int = DEFAULT_OUTPUT_TOKENS, limit: int | None = None) -> Dataset:
    path = Path(path)
    categories = categories or CategorySource()
    if not path.exists():
        raise ConfigError(path, None, "ShareGPT file not found",
                          "give a JSON array of {\"conversations\": [{\"from\": \"human\", \"value\": \"...\"}]}")
    text = decode(read_bytes(path, SHAREGPT_LIMITS), path, SHAREGPT_LIMITS)
    records: list[PromptRecord] = []
    for row, line, where in _rows(path, text):
        record = _record(row, str(path), line, where, categories, default_output_tokens)
        if record is not None:
            records.append(record)
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise ConfigError(path, None, "no conversation with a human turn in the file",
                          "each entry needs \"conversations\" with at least one {\"from\": \"human\"} turn")
    return Dataset(path.stem, str(path), tuple(records))


def _rows(path: Path, text: str):
    """(row, line or None, key prefix) per conversation, from a JSON array or JSONL."""
    if text.lstrip().startswith("["):
        for i, row in enumerate(loads(text, path, SHAREGPT_LIMITS)):
            yield row, None, f"[{i}]"
        return
    limits = replace(JSONL_LIMITS, what=SHAREGPT_LIMITS.what, fix="write a JSON array, or one conversation object "
                     "per line")
    for number, row in jsonl_rows(path, key=None, text=text, objects=False, limits=limits):
        yield row, number, f"line {number}"


def _record(row: Any, file: str, line: int | None, where: str, categories: CategorySource,
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
