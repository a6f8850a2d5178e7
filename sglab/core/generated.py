"""Files generated from the config model (docs table, charts' values.yaml): rewrite them, or check them."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(files: dict[Path, str] | dict[str, str], command: str, argv: list[str] | None = None) -> int:
    """With --check: exit status 1 and a hint when any file differs; otherwise rewrite the ones that differ."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for path, text in files.items():
        path = Path(path)
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if check:
            stale.append(path)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    for path in stale:
        print(f"{path} is out of date; run: {command}", file=sys.stderr)
    return 1 if stale else 0
