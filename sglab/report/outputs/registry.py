"""Output formats of `sglab compare` and `sglab report`: one small interface, one registry.

An output format turns a run and its (recomputed) verdict into what the command prints, writing
any files it makes into the output directory. Adding one is one file with one `register(...)` call,
imported from sglab/report/outputs/__init__.py; `--output NAME` picks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sglab.schema.result import RunResult
from sglab.schema.verdict import Verdict


@dataclass(frozen=True)
class OutputContext:
    result: RunResult
    verdict: Verdict
    run_dir: Path  # the run's directory (where its result.json is)
    out_dir: Path  # where file outputs go (--out; default: the run directory)


@dataclass(frozen=True)
class OutputFormat:
    name: str
    help: str
    render: Callable[[OutputContext], str]  # what the command prints; files go into ctx.out_dir


_FORMATS: dict[str, OutputFormat] = {}


def register(output: OutputFormat) -> OutputFormat:
    if output.name in _FORMATS:
        raise ValueError(f"output format {output.name!r} is already declared")
    _FORMATS[output.name] = output
    return output


def unregister(name: str) -> None:
    _FORMATS.pop(name, None)


@contextmanager
def registered(output: OutputFormat) -> Iterator[OutputFormat]:
    """Declare an output format for the duration of a block (tests, plug-ins)."""
    register(output)
    try:
        yield output
    finally:
        unregister(output.name)


def names() -> list[str]:
    return list(_FORMATS)


def get(name: str) -> OutputFormat:
    try:
        return _FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown output format {name!r}; choose from: {', '.join(_FORMATS)}") from None


def render(names_csv: str, ctx: OutputContext) -> str:
    """Render the comma-separated formats in order (unknown names raise KeyError before anything runs)."""
    chosen = [get(n.strip()) for n in names_csv.split(",") if n.strip()]
    if not chosen:
        raise KeyError(f"no output format given; choose from: {', '.join(_FORMATS)}")
    return "\n".join(text for text in (o.render(ctx) for o in chosen) if text)
