"""OpenAI `messages` JSONL (a user's own request logs): one {"messages": [...]} object per line.

Optional per line: `output_tokens` (the target reply length), `max_tokens` (the cap for natural stopping),
`id`, and the category field the user names. When the last message is the assistant's reply (logged
traffic), it is dropped from the prompt and its length (words x 1.3) is the target; otherwise the line's
`output_tokens`, then its `max_tokens`, then the loader's default.
"""

from __future__ import annotations

from pathlib import Path

from sglab.core.errors import ConfigError
from sglab.load.datasets.model import (CategorySource, Dataset, PromptRecord, derived_tokens, message_content,
                                       positive_int)
from sglab.load.jsonl import jsonl_rows

DEFAULT_OUTPUT_TOKENS = 256


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
