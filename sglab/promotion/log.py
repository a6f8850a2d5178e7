"""Reading stacks/promotions.jsonl: which promotion a target runs now, and what it replaced.

`sglab promote` appends one entry per promotion, `sglab rollback` one per rollback (both in
sglab/promotion/promote.py), under the target's lock. A rollback undoes the newest promotion not yet undone,
so the log reads as a stack: a promotion pushes, a rollback pops. Entries name their target, so one log
serves every target stack.

Each line is sealed like a result (sglab/results/integrity.py): `seal` holds an HMAC-SHA256 of the line's
canonical JSON with the machine's key (a plain SHA-256 where there is none), and every read verifies it. A
rollback writes what a line says into the target and the canary reads its break-even from one, so an
unsealed, edited or forged line is refused where it is read, naming the line; values are checked as the
stack checks its own keys.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sglab.core.errors import ConfigError
from sglab.core.untrusted_json import JsonLimits, JsonRefused, jsonl_lines, parse
from sglab.results import integrity

LOG_NAME = "promotions.jsonl"
ROLLBACK = "rollback"
MAX_LOG_BYTES = 64 * 1024 * 1024
LOG_LIMITS = JsonLimits("a promotion log", max_bytes=MAX_LOG_BYTES, max_depth=16,
                        fix="restore the log from version control (it is committed with the stack)")


SEAL = "log_seal"  # the promotion record has its own "seal" (how the result was sealed)
RESTORE_FIX = "restore the line from version control (the log is committed with the stack)"


def _canonical(record: dict[str, Any]) -> bytes:
    body = {k: v for k, v in record.items() if k != SEAL}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _mac(record: dict[str, Any], key: bytes | None) -> str:
    data = _canonical(record)
    return hmac.new(key, data, hashlib.sha256).hexdigest() if key else hashlib.sha256(data).hexdigest()


def sealed(record: dict[str, Any], key: bytes | None | Literal["machine"] = "machine") -> dict[str, Any]:
    """The record with its seal (the machine's key, created if needed; a plain digest where none can be)."""
    secret = integrity.machine_key(create=True) if isinstance(key, str) else key
    body = {k: v for k, v in record.items() if k != SEAL}
    return {**body, SEAL: {"algorithm": "hmac-sha256" if secret else "sha256", "digest": _mac(body, secret),
                           "key_id": integrity.key_id(secret) if secret else None}}


def seal_problem(record: dict[str, Any], key: bytes | None | Literal["machine"] = "machine") -> str | None:
    """None when the line's seal matches its content; else what is wrong, in words (quoting the line raw: the
    ConfigError that carries it makes it printable)."""
    seal = record.get(SEAL)
    if not isinstance(seal, dict) or not isinstance(seal.get("digest"), str):
        return "it carries no seal (written by hand, or by an sglab that did not seal its log)"
    if seal.get("algorithm") == "sha256":
        ok = hmac.compare_digest(_mac(record, None), seal["digest"])
    elif seal.get("algorithm") == "hmac-sha256":
        secret = integrity.machine_key() if isinstance(key, str) else key
        if secret is None or integrity.key_id(secret) != seal.get("key_id"):
            return (f"it is sealed with a key this machine does not hold (key id "
                    f"{str(seal.get('key_id'))[:40]}); set ${integrity.KEY_ENV} to that machine's key")
        ok = hmac.compare_digest(_mac(record, secret), seal["digest"])
    else:
        return f"its seal names an unknown algorithm {str(seal.get('algorithm'))[:40]}"
    return None if ok else "its seal does not match its content: the line was changed after it was written"


def append_log(log_path: Path, record: dict[str, Any]) -> None:
    """One sealed JSON line, fsync'd. Top-level keys sorted; nested maps keep their order (a config's keys as
    written)."""
    line = sealed(record)
    with open(log_path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({key: line[key] for key in sorted(line)}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


@dataclass(frozen=True)
class LogEntry:
    line: int  # 1-based line in the log
    record: dict[str, Any]

    @property
    def action(self) -> str:
        return str(self.record.get("action") or "promote")

    @property
    def run_id(self) -> str:
        return str(self.record.get("run_id") or "?")

    def describe(self) -> str:
        r = self.record
        if self.action == ROLLBACK:
            return f"rollback at {r.get('time', '?')} (line {self.line})"
        return f"promotion of {r.get('source_stack', '?')} run {self.run_id} at {r.get('time', '?')} (line {self.line})"


def read_log(path: Path) -> list[LogEntry]:
    """Every entry of the log (empty when there is none); a damaged or unsealed line is an error naming it."""
    if not path.exists():
        return []
    if path.stat().st_size > MAX_LOG_BYTES:
        raise ConfigError(path, None, f"the promotion log is over {MAX_LOG_BYTES // 2**20} MiB",
                          "archive old entries into another file; keep the newest")
    entries = []
    for number, line in jsonl_lines(path, LOG_LIMITS):  # bounded: depth, numbers, duplicate keys
        try:
            record = parse(line, LOG_LIMITS)
        except JsonRefused as exc:
            raise ConfigError(path, f"line {number}", f"not a JSON object ({exc})",
                              "restore the line from version control (the log is committed with the stack)"
                              ) from None
        if not isinstance(record, dict):
            raise ConfigError(path, f"line {number}", "not a JSON object", "restore the line from version control")
        problem = seal_problem(record)
        if problem is not None:
            raise ConfigError(path, f"line {number}", f"the promotion log's line cannot be trusted: {problem}",
                              RESTORE_FIX + ", or remove the line and promote again")
        entries.append(LogEntry(number, record))
    return entries


def effective(entries: list[LogEntry], target: str) -> list[LogEntry]:
    """The promotions into `target` still in effect, oldest first (each rollback took the newest away)."""
    stack: list[LogEntry] = []
    for entry in entries:
        if entry.record.get("target_stack") != target:
            continue
        if entry.action == ROLLBACK:
            if stack:
                stack.pop()
        else:
            stack.append(entry)
    return stack


def current_promotion(log_path: Path, target: str) -> LogEntry | None:
    """The promotion `target` runs now according to the log (None: none logged, or all rolled back)."""
    history = effective(read_log(log_path), target)
    return history[-1] if history else None


def _break_even_value(value: Any) -> bool:
    """A break-even accept length as the stack's serving key takes it: a finite number above 1 (an accept
    length of 1 is plain decoding; 0, negatives, booleans and 1e-300 are no accept length)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value > 1)


def break_even(entry: LogEntry | None) -> tuple[float | None, str]:
    """The bench's break-even accept length recorded with a promotion: the lowest over its gated levels (below
    it speculation cannot pay at any load the bench measured), and where it came from. A recorded value that
    is no accept length is a ConfigError naming the line (never a guard silently off)."""
    if entry is None:
        return None, "no promotion in the log"
    found = []
    for i, lv in enumerate(entry.record.get("levels") or []):
        if not isinstance(lv, dict) or not lv.get("gating") or lv.get("break_even_accept_length") is None:
            continue
        value = lv["break_even_accept_length"]
        if not _break_even_value(value):
            raise ConfigError(LOG_NAME, f"line {entry.line} levels[{i}].break_even_accept_length",
                              f"{repr(value)[:40]} is no accept length (a finite number above 1)",
                              RESTORE_FIX)
        found.append((float(value), lv.get("concurrency")))
    if not found:
        return None, f"{entry.describe()} records no break-even accept length"
    value, level = min(found)
    return value, f"bench run {entry.run_id} (level {level}), {entry.describe()}"
