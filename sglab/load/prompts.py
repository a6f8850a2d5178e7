"""The seeded prompt set, identical for every arm (from the stack's `load.prompts`).

`random` draws prompt lengths uniformly from [input_len * range_ratio, input_len] (bench_serving's
convention) and fills them with words from a fixed vocabulary, so the same seed gives the same bytes
on every machine. `file` reads JSONL with one {"prompt": ...} (or {"text": ...}) object per line.
`suite`, `sharegpt` and `openai` read a dataset (sglab/load/datasets.py): chat messages with a category, an
output length and a natural-stop cap per prompt. The suite is interleaved across its categories so every
round holds a mix; imports keep their file order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from sglab.core.errors import ConfigError
from sglab.core.paths import project_root
from sglab.config.loadplan import PromptSpec
from sglab.load.datasets import (SUITE_CATEGORIES, CategorySource, PromptRecord, jsonl_rows, load_openai_jsonl,
                                 load_sharegpt, load_suite)

# Short common English words: each is about one token for most tokenizers.
_VOCABULARY = (
    "the of and to in is was for on that with as by at from his her it an are were be this which or "
    "had not but have first one their its new after who they two been has more all would she when "
    "into also time than can year other some out about over up city only what people during most "
    "made then world where many there while between state used these part may through use later "
    "such both each game under before him well known team three water light house river music "
    "school work number system high early each small name group film line main area north south "
    "east west large long place around through family old book life often home since early second"
).split()


@dataclass(frozen=True)
class Prompt:
    index: int
    text: str
    approx_tokens: int
    output_tokens: int | None = None  # this request's length (a trace's); None: the plan's max_new_tokens
    messages: tuple[dict[str, str], ...] | None = None  # chat messages as given (a trace's); None: one user turn
    category: str | None = None
    max_tokens: int | None = None  # the cap when the run lets the reply stop by itself; None: output_tokens


def build_prompts(spec: PromptSpec, base_dir: Path | None = None) -> list[Prompt]:
    if spec.source == "file":
        return _from_file(spec, base_dir)
    if spec.chat_shaped:
        return [_from_record(i, r) for i, r in enumerate(_records(spec, base_dir))]
    rng = random.Random(spec.seed)
    low = max(1, int(spec.input_len * spec.range_ratio))
    prompts = []
    for i in range(spec.count):
        n = rng.randint(low, spec.input_len)
        words = [rng.choice(_VOCABULARY) for _ in range(n)]
        prompts.append(Prompt(i, " ".join(words), n))
    return prompts


def _from_file(spec: PromptSpec, base_dir: Path | None) -> list[Prompt]:
    path = _resolve(spec.file, base_dir)
    if not path.exists():
        raise ConfigError(path, "load.prompts.file", "prompt file not found",
                          "give a JSONL file with one {\"prompt\": \"...\"} object per line")
    prompts: list[Prompt] = []
    for number, row in jsonl_rows(path, key="load.prompts.file", objects=False):  # a bare string is a prompt too
        text = row.get("prompt", row.get("text")) if isinstance(row, dict) else row
        if not isinstance(text, str) or not text:
            raise ConfigError(path, "load.prompts.file", f"line {number} has no \"prompt\" string",
                              "write {\"prompt\": \"...\"} on each line", number)
        prompts.append(Prompt(len(prompts), text, len(text.split())))
        if len(prompts) >= spec.count:
            break
    if not prompts:
        raise ConfigError(path, "load.prompts.file", "the prompt file is empty", "add at least one prompt")
    return prompts


def _records(spec: PromptSpec, base_dir: Path | None) -> list[PromptRecord]:
    if spec.source == "suite":
        return _interleaved(load_suite(categories=_suite_categories(spec.categories)).records, spec.limit)
    path = _resolve(spec.file, base_dir)
    if not path.exists():
        raise ConfigError(path, "load.prompts.file", f"{spec.source} dataset file not found",
                          "give the path of the file (relative to the project root)"
                          + (", a JSON array of {\"conversations\": [...]}" if spec.source == "sharegpt"
                             else ", JSONL with one {\"messages\": [...]} object per line"))
    try:
        categories = CategorySource.parse(spec.categories)
    except ValueError as exc:
        raise ConfigError("(stack)", "load.prompts.categories", str(exc),
                          "write field:NAME (a field of each row) or one fixed label") from None
    loader = load_sharegpt if spec.source == "sharegpt" else load_openai_jsonl
    return list(loader(path, categories=categories, limit=spec.limit).records)


def _suite_categories(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = sorted(set(names) - set(SUITE_CATEGORIES))
    if unknown or not names:
        raise ConfigError("(stack)", "load.prompts.categories", f"unknown suite categories {unknown or [value]}",
                          f"give a comma-separated subset of {', '.join(SUITE_CATEGORIES)}, or remove the key")
    return names


def _interleaved(records: tuple[PromptRecord, ...], limit: int | None) -> list[PromptRecord]:
    """Round-robin over the categories (each in file order), so any run of prompts mixes them."""
    groups: dict[str, list[PromptRecord]] = {}
    for record in records:
        groups.setdefault(record.category, []).append(record)
    mixed = [group[i] for i in range(max(map(len, groups.values()), default=0)) for group in groups.values()
             if i < len(group)]
    return mixed[:limit] if limit is not None else mixed


def _from_record(index: int, record: PromptRecord) -> Prompt:
    return Prompt(index, record.text, len(record.text.split()), output_tokens=record.output_tokens,
                  messages=tuple(dict(m) for m in record.messages) if record.messages is not None else None,
                  category=record.category, max_tokens=record.max_tokens)


def _resolve(file: str | None, base_dir: Path | None) -> Path:
    assert file is not None
    path = Path(file)
    return path if path.is_absolute() else (base_dir or project_root()) / path
