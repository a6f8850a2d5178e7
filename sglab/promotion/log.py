"""Reading stacks/promotions.jsonl: which promotion a target runs now, and what it replaced.

`sglab promote` appends one entry per promotion (sglab/promotion/promote.py), `sglab rollback` one per rollback
(sglab/promotion/rollback.py); both under the target's lock. A rollback undoes the newest promotion not yet undone,
so the log reads as a stack: a promotion pushes, a rollback pops. Entries name their target, so one log
serves every target stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglab.core.errors import ConfigError
from sglab.core.untrusted_json import JsonLimits, JsonRefused, jsonl_lines, parse

LOG_NAME = "promotions.jsonl"
ROLLBACK = "rollback"
MAX_LOG_BYTES = 64 * 1024 * 1024
LOG_LIMITS = JsonLimits("a promotion log", max_bytes=MAX_LOG_BYTES, max_depth=16,
                        fix="restore the log from version control (it is committed with the stack)")


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
    """Every entry of the log (empty when there is none); a damaged line is an error naming it."""
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


def break_even(entry: LogEntry | None) -> tuple[float | None, str]:
    """The bench's break-even accept length recorded with a promotion: the lowest over its gated levels (below
    it speculation cannot pay at any load the bench measured), and where it came from."""
    if entry is None:
        return None, "no promotion in the log"
    found = [(lv["break_even_accept_length"], lv.get("concurrency")) for lv in entry.record.get("levels") or []
             if isinstance(lv, dict) and lv.get("gating") and isinstance(lv.get("break_even_accept_length"),
                                                                        (int, float))]
    if not found:
        return None, f"{entry.describe()} records no break-even accept length"
    value, level = min(found)
    return float(value), f"bench run {entry.run_id} (level {level}), {entry.describe()}"
