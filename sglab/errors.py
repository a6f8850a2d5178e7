"""Errors every layer may raise or catch, on the ground floor so `results/` need not import `config/`."""

from __future__ import annotations

import difflib
from pathlib import Path


class ConfigError(Exception):
    """Bad stack input. `str()` is the whole user-facing message (file[:line]: key: problem, then the fix)."""

    def __init__(self, file: Path | str, key: str | None, problem: str, fix: str | None = None, line: int | None = None):
        self.file = str(file)
        self.key = key
        self.problem = problem
        self.fix = fix
        self.line = line
        super().__init__(self.render())

    def render(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        head = f"{where}: {self.key}: {self.problem}" if self.key else f"{where}: {self.problem}"
        return head + (f"\n  fix: {self.fix}" if self.fix else "")


def guess(word: str, options: list[str]) -> str | None:
    """The closest option to a misspelt word, for 'did you mean ...?' fixes (None when nothing is close)."""
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return match[0] if match else None
