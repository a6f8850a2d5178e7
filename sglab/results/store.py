"""Durable results: results/<stack>/<run-id>/result.json, written atomically, never overwritten."""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import subprocess
from pathlib import Path

from pydantic import ValidationError

from sglab.core.errors import ConfigError
from sglab.core.paths import project_root, write_atomic
from sglab.results.integrity import sealed_document
from sglab.schema.records import error_key, error_message
from sglab.schema.result import SCHEMA_VERSION, RunResult
from sglab.core.untrusted_json import MiB, JsonLimits, json_type, read_json

RESULT_FILE = "result.json"
# A long run with every request's inter-token gaps is tens of MB; the schema nests 6 levels deep.
RESULT_LIMITS = JsonLimits("a result document", max_bytes=256 * MiB, max_depth=32,
                           fix="give a result.json sglab wrote (re-run the benchmark if it was damaged)")


def results_root(root: Path | None = None) -> Path:
    env = os.environ.get("SGLAB_RESULTS_DIR")
    if env:
        return Path(env)
    return (root or project_root()) / "results"


def new_run_id(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def utc_now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def git_commit(root: Path | None = None) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root or project_root(), capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def create_run_dir(stack: str, run_id: str, base: Path | None = None) -> Path:
    """A fresh directory for one run; refuses to reuse an existing one (nothing is ever overwritten)."""
    path = (base or results_root()) / stack / run_id
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(exist_ok=False)
    return path


def write_json_atomic(path: Path, payload: dict | list, *, overwrite: bool = False) -> Path:
    """The document as JSON, written atomically (sglab.core.paths.write_atomic); a result is never overwritten
    unless `overwrite` (its run's own progressive saves)."""
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; results are never overwritten")
    return write_atomic(path, json.dumps(payload, indent=1, sort_keys=False) + "\n", overwrite=overwrite)


def write_result(result: RunResult, run_dir: Path, *, overwrite: bool = False) -> Path:
    """Write result.json into its run directory, sealed (sglab/results/integrity.py). `overwrite` is only
    for the run's own progressive saves."""
    return write_json_atomic(run_dir / RESULT_FILE, sealed_document(result), overwrite=overwrite)


def load_result(path: Path | str) -> RunResult:
    """Load a result file (or a run directory holding one); bad files raise ConfigError with the reason."""
    path = Path(path)
    try:
        if path.is_dir():
            path = path / RESULT_FILE
        found = path.exists()
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read it: {exc.strerror}", "give the path of a result.json") from None
    if not found:
        raise ConfigError(path, None, "result file not found", "pass a result.json or a run directory "
                          "(see `sglab results --stack NAME`)")
    return parse_result(read_json(path, RESULT_LIMITS), path)


def parse_result(data: object, path: Path | str) -> RunResult:
    """A result document read by the bounded reader -> RunResult; ConfigError names the file and key."""
    if not isinstance(data, dict):
        raise ConfigError(path, None, f"is not a result document (a JSON {json_type(data)}, not an object)",
                          RESULT_LIMITS.fix)
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ConfigError(path, "schema_version", f"is {repr(version)[:40]}, this sglab reads {SCHEMA_VERSION}",
                          "re-run the benchmark with this version of sglab")
    try:
        result = RunResult.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise ConfigError(path, error_key(err), error_message(err),
                          "the file is damaged or not a sglab result") from None
    result._stored_document = data
    return result


def list_runs(stack: str, base: Path | None = None) -> list[Path]:
    """Run directories of a stack that hold a result.json, oldest first (run ids sort by time). Whatever is at
    that name counts (a FIFO, a directory, a dangling link): reading it says why it is not a result."""
    folder = (base or results_root()) / stack
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and os.path.lexists(p / RESULT_FILE))


def latest_complete(stack: str, base: Path | None = None, *,
                    kinds: tuple[str, ...] | None = ("ab", "interactive")) -> tuple[Path, RunResult] | None:
    """The newest complete run of a stack (of the given kinds; None = any), or None."""
    for run_dir in reversed(list_runs(stack, base)):
        try:
            result = load_result(run_dir)
        except ConfigError:
            continue
        if result.complete and (kinds is None or result.kind in kinds):
            return run_dir, result
    return None
