"""Progress of a bench run: one rich bar per concurrency level, advanced per arm segment."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sglab.core.untrusted import printable


class BenchProgress:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task = None
        self.console = Console(file=sys.stderr)

    def __enter__(self) -> "BenchProgress":
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[status]}"), console=self.console, transient=False,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def level(self, concurrency: int, segments: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task(f"c={concurrency:<3}", total=segments, status="")

    def segment(self, status: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, status=status)

    def advance(self, status: str = "") -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, status=status)

    def note(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(printable(message, limit=None), markup=False, highlight=False)
        else:
            print(printable(message, limit=None), file=sys.stderr)
