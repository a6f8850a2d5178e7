"""One reader for the JSONL files sglab loads (prompt files, OpenAI message logs, traces), over the bounded
JSON reader (sglab/core/untrusted_json.py).

Blank lines are skipped; a file over its limits (size, lines, characters per line, nesting, numbers), a line
that is not JSON (or, with `objects`, not a JSON object), a key given twice and a file that is not UTF-8 are
one ConfigError naming the file, the stack key, the line and the fix. What each row must hold is its
caller's business.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sglab.core.errors import ConfigError
from sglab.core.untrusted_json import MiB, JsonLimits, JsonRefused, jsonl_lines, parse

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
