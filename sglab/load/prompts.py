"""The seeded prompt set, identical for every arm (from the stack's `load.prompts`).

`random` draws prompt lengths uniformly from [input_len * range_ratio, input_len] (bench_serving's
convention) and fills them with words from a fixed vocabulary, so the same seed gives the same bytes
on every machine. `file` reads JSONL with one {"prompt": ...} (or {"text": ...}) object per line.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from sglab.config.loader import ConfigError, project_root
from sglab.config.models import PromptSpec

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


def build_prompts(spec: PromptSpec, base_dir: Path | None = None) -> list[Prompt]:
    if spec.source == "file":
        return _from_file(spec, base_dir)
    rng = random.Random(spec.seed)
    low = max(1, int(spec.input_len * spec.range_ratio))
    prompts = []
    for i in range(spec.count):
        n = rng.randint(low, spec.input_len)
        words = [rng.choice(_VOCABULARY) for _ in range(n)]
        prompts.append(Prompt(i, " ".join(words), n))
    return prompts


def _from_file(spec: PromptSpec, base_dir: Path | None) -> list[Prompt]:
    assert spec.file is not None
    path = Path(spec.file)
    if not path.is_absolute():
        path = (base_dir or project_root()) / path
    if not path.is_file():
        raise ConfigError(path, "load.prompts.file", "prompt file not found",
                          "give a JSONL file with one {\"prompt\": \"...\"} object per line")
    prompts: list[Prompt] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(path, "load.prompts.file", f"line {number} is not JSON: {exc.msg}",
                              "write one JSON object per line", number) from None
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
