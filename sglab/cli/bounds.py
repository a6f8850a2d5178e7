"""Command-line numbers checked by the config model's own fields, where they enter.

An option that overrides a stack value (`--rounds`, `--round-s`, `--concurrency`, ...) is parsed with
`model_option(Model, "field", key)`: argparse validates the text as the stack file's key is validated
(type, range, finite), so each bound is declared once, on the pydantic field (sglab/config/), and a bad
value is refused before anything starts, naming the option (argparse), the key and the limit; exit 2. The
refused text is quoted as repr shows it (a control character escaped) and cut; argparse's message reaches the
terminal as a UsageError, which `sglab.cli.main` prints `printable`.
"""

from __future__ import annotations

import argparse
import types
import typing
from functools import lru_cache
from typing import Any, Callable

from pydantic import BaseModel, TypeAdapter, ValidationError



def _unwrap(annotation: Any) -> Any:
    """`Annotated[X, ...]` -> X, `X | None` -> X, `list[X]` -> list."""
    while True:
        origin = typing.get_origin(annotation)
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if origin is typing.Annotated or (origin in (typing.Union, types.UnionType) and len(args) == 1):
            annotation = args[0]
        else:
            return origin or annotation


@lru_cache(maxsize=None)
def _field(model: type[BaseModel], name: str) -> tuple[TypeAdapter, Any, Any]:
    """(adapter of the field's whole type, its base type, a list field's item base type or None)."""
    info = model.model_fields[name]
    whole = (info.annotation, *info.metadata)  # Annotated[whole] is Annotated[annotation, *metadata]
    annotation: Any = typing.Annotated[whole] if info.metadata else info.annotation
    base = _unwrap(annotation)
    item = None
    if base is list:
        inner = info.annotation
        while typing.get_origin(inner) is not list:
            inner = next(a for a in typing.get_args(inner) if a is not type(None))
        item = _unwrap(typing.get_args(inner)[0])
    return TypeAdapter(annotation), base, item


def _scalar(text: str, kind: Any, key: str) -> Any:
    try:
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give a "
                                         f"{'whole number' if kind is int else 'number'} ({key})") from None
    return text


_WORDS = (("Input should be", "must be"), ("Value error, ", ""), ("less than or equal to", "at most"),
          ("greater than or equal to", "at least"), ("List should have at most", "give at most"))


def _refusal(exc: ValidationError, key: str, shown: str) -> argparse.ArgumentTypeError:
    err = exc.errors(include_url=False)[0]
    message = str(err["msg"])
    for old, new in _WORDS:
        message = message.replace(old, new)
    return argparse.ArgumentTypeError(f"{shown[:40]!r}: {message} (the limit of {key})")


def time_scale_option(text: str) -> float:
    """argparse `type=` of every `--time-scale`: a number within the range the simulator models faithfully
    (sglab/sglang/sim_knobs.py); the streams x scale bound is checked once the run's streams are known
    (check_streams)."""
    from sglab.sglang.sim_knobs import time_scale_problem

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"time scale {text[:40]!r} is not a number") from None
    problem = time_scale_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def model_choices(model: type[BaseModel], field: str) -> list[str]:
    """argparse `choices=`: the values a Literal field takes (`X | None` included), read from the model, so the
    option and the stack key cannot offer different ones."""
    annotation: Any = model.model_fields[field].annotation
    while typing.get_origin(annotation) is not typing.Literal:
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return [str(value) for value in typing.get_args(annotation)]


def model_option(model: type[BaseModel], field: str, key: str, *, item: bool = False) -> Callable[[str], Any]:
    """argparse `type=`: the option's text as `model.field` accepts it; a list field takes comma-separated
    items (`--concurrency 1,4,16`), or with `item` one value as an item of it (`--users 8`)."""

    def parse(text: str) -> Any:
        value = _parse(text)
        if item and len(value) != 1:
            raise argparse.ArgumentTypeError(f"{text[:40]!r}: give one value ({key})")
        return value[0] if item else value

    def _parse(text: str) -> Any:
        adapter, base, item_type = _field(model, field)
        if item_type is None:
            try:
                return adapter.validate_python(_scalar(text.strip(), base, key))
            except ValidationError as exc:
                raise _refusal(exc, key, text) from None
        values = [_scalar(x.strip(), item_type, key) for x in text.split(",") if x.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"{text[:40]!r}: give comma-separated values, "
                                             f"e.g. 1,4,16 ({key})")
        try:
            return adapter.validate_python(values)
        except ValidationError as exc:
            where = next((p for p in exc.errors()[0]["loc"] if isinstance(p, int)), None)
            raise _refusal(exc, key, str(values[where]) if where is not None else text) from None

    parse.__name__ = key  # argparse names the type in "invalid <name> value" messages
    return parse


def bound(model: type[BaseModel], field: str, which: str = "le") -> Any:
    """A field's declared bound (`le`, `ge`, `gt`, `lt`; a list field's items'), for help texts."""
    info = model.model_fields[field]
    metadata, types_ = list(info.metadata), [info.annotation]
    while types_:
        current = types_.pop()
        metadata += getattr(current, "__metadata__", ())
        types_.extend(typing.get_args(current))
    while metadata:
        meta = metadata.pop(0)
        if getattr(meta, which, None) is not None:
            return getattr(meta, which)
        metadata += getattr(meta, "metadata", [])
    return None


def _streams(plan: Any, workers: int) -> int | None:
    """The most concurrent streams one load-generator process keeps (None: an open-loop run, paced by arrivals)."""
    from sglab.load.profiles import profile_for

    profile = profile_for(plan)
    if profile.name != "concurrency":
        return None
    return -(-max(profile.levels()) // max(1, workers))


def fastest_time_scale(wanted: float, plan: Any, workers: int = 1) -> float:
    """`wanted`, or lower where the run's highest closed-loop level would take the load generator past what it
    keeps up with (--quick's preset speed with --concurrency 1,16: the fastest that still measures)."""
    from sglab.sglang.sim_knobs import MAX_STREAMS_X_TIME_SCALE

    streams = _streams(plan, workers)
    return min(wanted, MAX_STREAMS_X_TIME_SCALE / streams) if streams else wanted


def check_streams(loaded: Any, plan: Any, sim_env: dict[str, str], workers: int = 1) -> None:
    """A closed-loop run's streams per load-generator process x the simulators' time scale, bounded like the
    scale itself (sglab/sglang/sim_knobs.py): past it the client, not the servers, sets the speed."""
    from sglab.cli import UsageError
    from sglab.config.server import sim_time_scale
    from sglab.sglang.sim_knobs import time_scale_problem

    streams = _streams(plan, workers)  # per Locust process
    if streams is None:
        return  # open loop: the client's load follows the arrival rate, and the scale's own range applies
    scale = float(sim_env.get("SGLAB_SIM_TIME_SCALE") or sim_time_scale(loaded.config.sim))
    problem = time_scale_problem(scale, streams)
    if problem is not None:
        raise UsageError(f"--time-scale: {problem}")
