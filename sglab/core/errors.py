"""Errors every layer may raise or catch, on the ground floor so `results/` need not import `config/`."""

from __future__ import annotations

import difflib
from pathlib import Path

from sglab.core.untrusted import printable


class ConfigError(Exception):
    """Bad stack input. `str()` is the whole user-facing message (file[:line]: key: problem, then the fix)."""

    def __init__(self, file: Path | str, key: str | None, problem: str, fix: str | None = None,
                 line: int | None = None):
        self.file = str(file)
        self.key = key
        self.problem = problem
        self.fix = fix
        self.line = line
        super().__init__(self.render())

    def render(self) -> str:
        """Every part may quote the file it is about (a key name, a value): each is made `printable`."""
        where = printable(self.file, limit=300) + (f":{self.line}" if self.line else "")
        problem = printable(self.problem, limit=2000)
        head = f"{where}: {printable(self.key, limit=200)}: {problem}" if self.key else f"{where}: {problem}"
        return head + (f"\n  fix: {printable(self.fix, limit=2000)}" if self.fix else "")


def guess(word: str, options: list[str]) -> str | None:
    """The closest option to a misspelt word, for 'did you mean ...?' fixes (None when nothing is close)."""
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return match[0] if match else None
