"""Hostile file contents and the readers of files sglab did not write, shared by the tests of hostile inputs.

`CASES` are the named attacks (deep nesting, junk bytes, truncation, duplicate keys, non-finite and huge
numbers, lone surrogates, a directory, a FIFO, a dangling link, a file over the size limit, a 50 MB line,
too many lines); `write_case` puts one where a reader will look. `READERS` call every reader the way the
product does; each must return or raise ConfigError (the probe's reader: ValueError), never anything else.
"""

from __future__ import annotations

import gzip
import base64
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from sglab.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
RESULT = (DATA / "results" / "v1-article-replay.json").read_bytes()
TRACE = (DATA / "trace_small.jsonl").read_bytes()
OPENAI = (DATA / "openai_small.jsonl").read_bytes()
SHAREGPT = (DATA / "sharegpt_small.json").read_bytes()
MiB = 1024 * 1024


def _jsonl(valid: bytes) -> bool:
    """One JSON object per line (not a pretty-printed document or an array)."""
    return not valid.lstrip().startswith((b"[", b"{\n"))


def _deep_inside(valid: bytes, depth: int) -> bytes:
    """A valid document with one more key holding `depth` nested arrays (for JSONL: on the first line)."""
    first, _, rest = valid.partition(b"\n") if _jsonl(valid) else (valid, b"", b"")
    text = first.rstrip()
    nested = b"[" * depth + b"]" * depth
    if text.endswith(b"}"):
        text = text[:-1].rstrip() + b', "x": ' + nested + b"}"
    elif text.endswith(b"]"):
        text = text[:-1].rstrip() + b", " + nested + b"]"
    return text + (b"\n" + rest if rest else b"")


def _duplicate_key(valid: bytes) -> bytes:
    first, sep, rest = valid.partition(b"\n") if _jsonl(valid) else (valid, b"", b"")
    text = first.rstrip()
    if text.startswith(b"["):  # ShareGPT array: duplicate a key inside the first conversation
        return text.replace(b'"id":', b'"id": "dup", "id":', 1)
    return text[:-1].rstrip() + b', "complete": false, "complete": true}' + (sep + rest if sep else b"")


def _replace_number(valid: bytes, token: bytes) -> bytes:
    """The first number-valued field of the first line/document replaced by `token` (NaN, 1e308, ...)."""
    import re

    return re.sub(rb'(": )-?[0-9][0-9.eE+-]*', lambda m: m.group(1) + token, valid, count=1)


Case = Callable[[bytes, int], bytes] | str

# name -> bytes from the reader's valid example (and its size limit), or a kind of non-file
CASES: dict[str, Case] = {
    "deep-array": lambda valid, _: b"[" * 100_000 + b"]" * 100_000,
    "deep-object": lambda valid, _: b'{"a": ' * 20_000 + b"1" + b"}" * 20_000,
    "deep-inside-valid": lambda valid, _: _deep_inside(valid, 5_000),
    "depth-40-inside-valid": lambda valid, _: _deep_inside(valid, 40),
    "binary-junk": lambda valid, _: bytes(range(256)) * 64,
    "junk-after-bom": lambda valid, _: b"\xef\xbb\xbf\xff\xfe\x00garbage",
    "utf-16": lambda valid, _: valid.decode("utf-8").encode("utf-16"),
    "truncated": lambda valid, _: valid[: len(valid) // 2],
    "duplicate-key": lambda valid, _: _duplicate_key(valid),
    "nan": lambda valid, _: _replace_number(valid, b"NaN"),
    "infinity": lambda valid, _: _replace_number(valid, b"-Infinity"),
    "1e308": lambda valid, _: _replace_number(valid, b"1e308"),
    "1e400": lambda valid, _: _replace_number(valid, b"1e400"),
    "5000-digits": lambda valid, _: _replace_number(valid, b"9" * 5000),
    "lone-surrogate": lambda valid, _: valid.replace(b'": "', b'": "\\ud800', 1),
    "empty": lambda valid, _: b"",
    "null": lambda valid, _: b"null\n",
    "a-string": lambda valid, _: b'"just a string"\n',
    "50MB-line": lambda valid, _: b'{"prompt": "' + b"x" * (50 * MiB) + b'"}\n',
    "too-many-lines": lambda valid, _: b"{}\n" * 1_000_001,
    "directory": "directory",
    "fifo": "fifo",
    "dangling-link": "dangling-link",
    "over-size-limit": "over-size-limit",
}


def write_case(path: Path, name: str, valid: bytes, max_bytes: int) -> Path:
    """Put case `name` at `path` (a file, or the non-file the case is); returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    case = CASES[name]
    if case == "directory":
        path.mkdir()
    elif case == "fifo":
        os.mkfifo(path)
    elif case == "dangling-link":
        path.symlink_to(path.parent / "nowhere")
    elif case == "over-size-limit":
        with open(path, "wb") as fh:  # sparse: costs no disk
            fh.write(valid[:1])
            fh.truncate(max_bytes + 1)
    else:
        path.write_bytes(case(valid, max_bytes))
    return path


def _configmap(payload: bytes) -> list[Any]:
    from sglab.results.sink import PARTS_ANNOTATION, PAYLOAD_KEY

    packed = base64.b64encode(gzip.compress(payload)).decode()
    meta = SimpleNamespace(name="sglab-result", annotations={PARTS_ANNOTATION: "1"}, labels={})
    return [SimpleNamespace(metadata=meta, binary_data={PAYLOAD_KEY: packed})]


def _result(path: Path) -> Any:
    from sglab.results.store import load_result

    return load_result(path.parent)  # a run directory, as `sglab results`/`promote` pass it


def _trace(path: Path) -> Any:
    from sglab.load.profiles import read_trace

    return read_trace(path)


def _sharegpt(path: Path) -> Any:
    from sglab.load.datasets import load_sharegpt

    return load_sharegpt(path)


def _openai(path: Path) -> Any:
    from sglab.load.datasets import load_openai_jsonl

    return load_openai_jsonl(path)


def _prompt_file(path: Path) -> Any:
    from sglab.config.loadplan import PromptSpec
    from sglab.load.prompts import build_prompts

    return build_prompts(PromptSpec(source="file", file=str(path), count=5))


def _sweep_state(path: Path) -> Any:
    from sglab.sweep.run import load_state

    return load_state(path.parent)


def _probe(path: Path) -> Any:
    from sglab.probe.result import load_probe

    try:
        return load_probe(path)
    except ValueError as exc:  # its documented error (the CLI turns it into one message)
        raise ConfigError(path, None, str(exc)) from None


def _provenance(path: Path) -> Any:
    from sglab.results.pull import pulled_provenance
    from sglab.schema.result import RunResult

    record, problem = pulled_provenance(path.parent / "result.json", RunResult.model_validate_json(RESULT))
    if problem is not None:
        raise ConfigError(path, None, problem)
    return record


def _configmap_payload(path: Path) -> Any:
    from sglab.results.pull import read_document

    data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
    document, problem = read_document(_configmap(data))
    if problem is not None:
        raise ConfigError(path, None, problem)
    return document


def _sim_profile(path: Path) -> Any:
    from sglab.sim.profile import ProfileError, load_profile

    try:
        return load_profile(str(path))
    except ProfileError as exc:  # the simulator prints it and exits 2
        raise ConfigError(path, None, str(exc)) from None


def _adaptive_config(path: Path) -> Any:
    from sglab.sim.adaptive import AdaptiveConfigError, load_adaptive_config

    try:
        return load_adaptive_config(str(path))
    except AdaptiveConfigError as exc:
        raise ConfigError(path, None, str(exc)) from None


# name -> (file name the reader looks for, the reader, a valid example, the reader's size limit)
def _limits() -> dict[str, int]:
    from sglab.load.datasets import JSONL_LIMITS, SHAREGPT_LIMITS
    from sglab.load.profiles import TRACE_LIMITS
    from sglab.results.pull import PROVENANCE_LIMITS
    from sglab.results.store import RESULT_LIMITS

    return {"result": RESULT_LIMITS.max_bytes, "trace": TRACE_LIMITS.max_bytes,
            "sharegpt": SHAREGPT_LIMITS.max_bytes, "jsonl": JSONL_LIMITS.max_bytes,
            "provenance": PROVENANCE_LIMITS.max_bytes, "sim": 1024 * 1024}


READERS: dict[str, tuple[str, Callable[[Path], Any], bytes, str]] = {
    "result": ("result.json", _result, RESULT, "result"),
    "trace": ("trace.jsonl", _trace, TRACE, "trace"),
    "sharegpt": ("share.json", _sharegpt, SHAREGPT, "sharegpt"),
    "openai": ("logs.jsonl", _openai, OPENAI, "jsonl"),
    "prompt-file": ("prompts.jsonl", _prompt_file, b'{"prompt": "hello there", "n": 1}\n', "jsonl"),
    "sweep-state": ("sweep.json", _sweep_state, b'{"max_rounds": 4, "run_id": "r"}', "result"),
    "probe": ("probe.json", _probe, b'{"schema_version": 1, "kind": "nccl-probe"}', "result"),
    "provenance": ("provenance.json", _provenance, b'{"pulled_at": 1, "source": "configmap", "key_id": "x"}',
                   "provenance"),
    "configmap-payload": ("payload.json", _configmap_payload, RESULT, "result"),
    "sim-profile": ("profile.json", _sim_profile, b'{"scheduler_overhead_ms": 1.5}', "sim"),
    "adaptive-config": ("adaptive.json", _adaptive_config,
                        b'{"ema_alpha": 0.5, "strategy": "ema", "candidate_steps": [1, 3, 7]}', "sim"),
}


# What a reader may read: a bare string is a prompt; a ConfigMap document's shape is its caller's business; a
# pulled result's provenance that is not there means "never pulled".
READABLE = {("prompt-file", "a-string"), ("configmap-payload", "a-string"), ("provenance", "dangling-link"),
            ("sim-profile", "lone-surrogate")}  # a profile's strings are not read: the escape changes no number


def max_bytes(reader: str) -> int:
    return _limits()[READERS[reader][3]]


def refused_cleanly(call: Callable[[], Any], path: Path) -> str | None:
    """None if `call` read the file; the message if it refused it as a ConfigError naming the file. Anything
    else (RecursionError, UnicodeDecodeError, TypeError, ...) propagates and fails the test."""
    try:
        call()
    except ConfigError as exc:
        message = str(exc)
        assert str(path.parent) in message or path.name in message, message
        assert "Traceback" not in message
        return message
    return None


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()
