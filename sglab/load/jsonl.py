"""One reader for the JSONL files sglab loads (prompt files, OpenAI message logs, traces).

Blank lines are skipped; a line that is not JSON (or, with `objects`, not a JSON object) and a file that is
not UTF-8 are one ConfigError naming the file, the stack key, the line and the fix. What each row must hold
is its caller's business.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sglab.errors import ConfigError

FIX = "write one JSON object per line"


def jsonl_rows(path: Path | str, *, key: str | None, text: str | None = None,
               objects: bool = True) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed row) per non-blank line of `path` (or of `text`, already read from it)."""
    path = Path(path)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(path, key, f"the file is not UTF-8 text (byte {exc.start})",
                              "save the file as UTF-8") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(path, key, f"line {number} is not JSON: {exc.msg}", FIX, number) from None
        if objects and not isinstance(row, dict):
            raise ConfigError(path, key, f"line {number} is not an object", FIX, number)
        yield number, row
