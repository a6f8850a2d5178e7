"""The one reader of JSON and JSONL that sglab did not just write (ground floor: imports only errors.py).

Results, traces, prompt files, ShareGPT/OpenAI logs, sweep state, probe results, provenance records,
ConfigMap payloads and the answers of Prometheus and of SGLang servers (`read_stream`, `parse_bytes`) all come
through here, each with its own `JsonLimits`. Whatever the bytes are, the
reader returns plain JSON data or raises one ConfigError naming the file, the limit or the fault, and the
fix: never a RecursionError, UnicodeDecodeError, MemoryError or a hang on a FIFO. Refused:

- files that are missing, not regular files (a directory, a FIFO, a device) or unreadable;
- more bytes than the limit (checked before reading), more lines, or a longer line (JSONL);
- text that is not UTF-8, not JSON, or nested deeper than the limit;
- NaN, Infinity and numbers beyond +-2**53 (the integers a double holds exactly; nothing sglab records
  comes near it, and past it another JSON tool reads a different number), including 1e308 and 1e400;
- a key given twice in one object (`"complete": false, "complete": true`: Python keeps the last, other
  tools the first, so the two would read different documents);
- lone UTF-16 surrogates (`"\\ud800"`), which no UTF-8 writer can store.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglab.core.errors import ConfigError

MiB = 1024 * 1024
MAX_NUMBER = 2 ** 53
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]", re.ASCII)


@dataclass(frozen=True)
class JsonLimits:
    """What one kind of file may hold. `what` names it in messages ("a result document"); `fix` is the
    advice when its content is refused. `max_lines`/`max_line_chars` apply to JSONL."""

    what: str
    max_bytes: int
    max_depth: int = 32
    max_lines: int | None = None
    max_line_chars: int | None = None
    fix: str = "give a file sglab wrote, or fix it to be valid JSON"

    def describe(self) -> str:
        """The limits in words, for docs and messages."""
        parts = [f"{_size(self.max_bytes)}", f"nesting depth {self.max_depth}"]
        if self.max_lines is not None:
            parts.append(f"{self.max_lines:,} lines")
        if self.max_line_chars is not None:
            parts.append(f"{self.max_line_chars:,} characters per line")
        return ", ".join(parts)


class JsonRefused(ValueError):
    """Text that is not acceptable JSON under the limits; `str()` says why (no file: the caller adds it)."""


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for "is a JSON array, not an object" messages."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null")


def _size(n: int) -> str:
    return f"{n / MiB:g} MiB" if n >= MiB else f"{n:,} bytes"


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise JsonRefused(f"the key {json.dumps(duplicate)[:80]} appears twice in one object (JSON readers "
                          "disagree on which one counts)")
    return obj


def _constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not a number JSON allows (finite numbers only)")


def _where(trail: tuple | None) -> str:
    keys = []
    while trail is not None:
        key, trail = trail
        keys.append(f".{key}" if isinstance(key, str) else f"[{key}]")
    return "".join(reversed(keys))[-120:] or "the top level"


def _bad_number(value: int | float, trail: tuple | None) -> JsonRefused | None:
    if type(value) is float and not math.isfinite(value) or abs(value) > MAX_NUMBER:
        shown = f"{value:.6g}" if type(value) is float else f"with {len(str(value))} digits"
        return JsonRefused(f"the number {shown} at {_where(trail)} is outside +-2**53 (finite numbers only)")
    return None


def _check(value: Any, limits: JsonLimits, surrogates: bool) -> None:
    """Depth, numbers and (when the text escaped any) lone surrogates, iteratively (json makes exact types)."""
    stack: list[tuple[Any, int, tuple | None]] = [(value, 1, None)]
    while stack:
        node, depth, trail = stack.pop()
        kind = type(node)
        if kind is dict:
            items: Any = node.items()
        elif kind is list:
            items = enumerate(node)
        else:
            if kind is str:
                if surrogates:
                    _no_surrogate(node, trail)
            elif kind is not bool and node is not None and (bad := _bad_number(node, trail)) is not None:
                raise bad
            continue
        if depth > limits.max_depth:
            raise JsonRefused(f"nested deeper than {limits.max_depth} levels (at {_where(trail)})")
        for key, item in items:
            kind = type(item)
            if kind is str:
                if surrogates:
                    _no_surrogate(item, (key, trail))
            elif kind is dict or kind is list:
                stack.append((item, depth + 1, (key, trail)))
            elif (kind is float or kind is int) and (bad := _bad_number(item, (key, trail))) is not None:
                raise bad
            if surrogates and type(key) is str:
                _no_surrogate(key, trail)


def _no_surrogate(text: str, trail: tuple | None) -> None:
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        raise JsonRefused(f"a string at {_where(trail)} holds a lone UTF-16 surrogate (a \\ud800-\\udfff "
                          "escape), which is not text")


def parse(text: str, limits: JsonLimits) -> Any:
    """JSON text -> data under `limits`; JsonRefused says why not (JSONDecodeError's line and column kept)."""
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_constant=_constant)
    except JsonRefused:
        raise
    except json.JSONDecodeError as exc:
        raise JsonRefused(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise JsonRefused(f"nested deeper than {limits.max_depth} levels") from None
    except ValueError:  # Python refuses integers of more than 4300 digits
        raise JsonRefused("holds an integer of thousands of digits (finite numbers within +-2**53 only)") from None
    _check(value, limits, bool(_SURROGATE_ESCAPE.search(text)))
    return value


def read_stream(chunks: Iterable[bytes], limits: JsonLimits, *, deadline: float | None = None) -> bytes:
    """The bytes of a stream that sglab did not write (an HTTP body, already decompressed), refused (JsonRefused)
    past `limits.max_bytes` or past `deadline` (a time.monotonic() instant): a server that answers without end,
    or one byte at a time, is refused instead of filling memory or hanging."""
    data = bytearray()
    for chunk in chunks:
        data += chunk
        if len(data) > limits.max_bytes:
            raise JsonRefused(f"{limits.what} is over {_size(limits.max_bytes)} (decompressed)")
        if deadline is not None and time.monotonic() > deadline:
            raise JsonRefused(f"{limits.what} did not arrive whole before the deadline")
    return bytes(data)


def parse_bytes(data: bytes, limits: JsonLimits) -> Any:
    """UTF-8 JSON bytes (a leading BOM dropped) -> data under `limits`; JsonRefused says why not."""
    if len(data) > limits.max_bytes:
        raise JsonRefused(f"{limits.what} is over {_size(limits.max_bytes)}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JsonRefused(f"{limits.what} is not UTF-8 text (byte {exc.start})") from None
    return parse(text, limits)


def _open(path: Path, key: str | None, limits: JsonLimits) -> int:
    """A file descriptor of a regular file within the size limit (O_NONBLOCK: a FIFO cannot hang us)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(path, key, f"{limits.what} not found", "give the path of an existing file") from None
    except IsADirectoryError:
        raise ConfigError(path, key, f"is a directory, not {limits.what}", "give the file itself") from None
    except OSError as exc:
        raise ConfigError(path, key, f"cannot read {limits.what}: {exc.strerror}",
                          "check the file's permissions") from None
    info = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(info.st_mode):
        problem = f"is a directory, not {limits.what}", "give the file itself"
    elif not stat.S_ISREG(info.st_mode):
        problem = f"is not a regular file (a FIFO, socket or device), not {limits.what}", "give a plain file"
    elif info.st_size > limits.max_bytes:
        problem = (f"is {_size(info.st_size)}, over the limit for {limits.what} ({_size(limits.max_bytes)})",
                   f"split it or keep fewer records ({limits.what}: {limits.describe()}, docs/load.md, Limits)")
    if problem is not None:
        os.close(fd)
        raise ConfigError(path, key, *problem)
    os.set_blocking(fd, True)
    return fd


def read_bytes(path: Path | str, limits: JsonLimits, *, key: str | None = None) -> bytes:
    """The file's bytes, at most `limits.max_bytes` (also if it grows while read)."""
    path = Path(path)
    fd = _open(path, key, limits)
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(limits.max_bytes + 1)
    except OSError as exc:
        raise ConfigError(path, key, f"cannot read {limits.what}: {exc.strerror}", "check the file") from None
    if len(data) > limits.max_bytes:
        raise ConfigError(path, key, f"is over the limit for {limits.what} ({_size(limits.max_bytes)})",
                          "split it or keep fewer records")
    return data


def decode(data: bytes, path: Path | str, limits: JsonLimits, *, key: str | None = None) -> str:
    """UTF-8 (a leading BOM dropped), else one ConfigError with the byte offset."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, key, f"{limits.what} is not UTF-8 text (byte {exc.start})",
                          "save the file as UTF-8 JSON") from None


def loads(text: str, path: Path | str, limits: JsonLimits, *, key: str | None = None) -> Any:
    """`parse`, with a refusal as a ConfigError naming `path`."""
    if len(text) > limits.max_bytes:
        raise ConfigError(path, key, f"is over the limit for {limits.what} ({_size(limits.max_bytes)})",
                          "split it or keep fewer records")
    try:
        return parse(text, limits)
    except JsonRefused as exc:
        raise ConfigError(path, key, f"{limits.what}: {exc}", limits.fix) from None


def read_json(path: Path | str, limits: JsonLimits, *, key: str | None = None) -> Any:
    """A whole JSON document from a file, under `limits`; every fault one ConfigError naming the file."""
    text = decode(read_bytes(path, limits, key=key), path, limits, key=key)
    return loads(text, path, limits, key=key)


def jsonl_lines(path: Path | str, limits: JsonLimits, *, key: str | None = None,
                text: str | None = None) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) per non-blank line of a JSONL file (or of `text` read from it), refusing a
    file of more than `max_lines` lines or a line over `max_line_chars` before that line is parsed."""
    path = Path(path)
    if text is None:
        text = decode(read_bytes(path, limits, key=key), path, limits, key=key)
    lines = text.splitlines()
    if limits.max_lines is not None and len(lines) > limits.max_lines:
        raise ConfigError(path, key, f"has {len(lines):,} lines, over the limit for {limits.what} "
                          f"({limits.max_lines:,} lines)", "split it, or keep the first lines")
    for number, line in enumerate(lines, start=1):
        if limits.max_line_chars is not None and len(line) > limits.max_line_chars:
            raise ConfigError(path, key, f"line {number} is {len(line):,} characters, over the limit for one "
                              f"line of {limits.what} ({limits.max_line_chars:,})",
                              "shorten that record (no prompt needs more; docs/load.md, Limits)", number)
        if line.strip():
            yield number, line
