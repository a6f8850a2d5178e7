"""`sglab rollback`: restore the config a target ran before its newest promotion (stacks/promotions.jsonl).

The same write as a promotion (sglab/promotion/promote.py): under the target's lock, the owned keys rewritten with a
comment-preserving round trip, the file replaced atomically, the rollback appended to the log with the
file's hashes around it. Refused when the target's owned keys no longer hold what the newest promotion
wrote (a hand edit a rollback would silently discard), or when that promotion did not record what it
replaced. The way back in the cluster is the `pulumi up` it prints (docs/production.md: what it costs).
"""

from __future__ import annotations

import difflib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import Timeout

from sglab.core.errors import ConfigError
from sglab.core.untrusted import printable
from sglab.config.loader import load_stack
from sglab.core.paths import project_root, stack_path
from sglab.core.paths import write_atomic
from sglab.promotion.promote import PROMOTED_KEYS, _sha256, apply_promotion, owned_values, target_lock
from sglab.promotion.evidence import PromotionRefused
from sglab.promotion.log import LOG_NAME, ROLLBACK, LogEntry, append_log, effective, read_log
from sglab.results.store import git_commit, utc_now_iso


@dataclass
class Rollback:
    target: str
    target_path: Path
    undone: LogEntry
    restored: LogEntry | None  # the promotion in effect afterwards (None: the config before any logged one)
    diff: str
    written: bool
    log_path: Path
    log_entry: dict[str, Any]

    @property
    def next_command(self) -> str:
        return f"pulumi up --stack {self.target}"


def _ref(entry: LogEntry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    r = entry.record
    return {"line": entry.line, "run_id": r.get("run_id"), "source_stack": r.get("source_stack"), "time": r.get("time")}


def plan_rollback(target: str, before: str, entries: list[LogEntry], target_path: Path
                  ) -> tuple[LogEntry, LogEntry | None, str, dict[str, Any], dict[str, Any]]:
    """(the promotion undone, the one restored, the new text, values now, values restored); raises PromotionRefused."""
    history = effective(entries, target)
    log_name = f"stacks/{LOG_NAME}"
    if not history:
        raise PromotionRefused(f"{log_name} holds no promotion into '{target}' that is still in effect",
                               f"nothing to roll back; `sglab promote --stack <stack> --to {target}` records one")
    newest = history[-1]
    previous, promoted = newest.record.get("previous"), newest.record.get("promoted")
    if not isinstance(previous, dict) or not isinstance(promoted, dict):
        raise PromotionRefused(f"the newest {newest.describe()} in {log_name} does not record the config it "
                               "replaced (logged by an older sglab)",
                               f"restore {target_path.name}'s promoted keys by hand from version control (the entry's "
                               "target_sha256_before is the file to find: git log -p stacks/), then pulumi up")
    foreign = sorted(str(k) for k in previous if k not in PROMOTED_KEYS)
    if foreign:
        raise PromotionRefused(f"the newest {newest.describe()} in {log_name} records keys no promotion owns "
                               f"({printable(', '.join(foreign), limit=200)}); a rollback writes only "
                               f"sglab:{', sglab:'.join(PROMOTED_KEYS)}",
                               f"restore {log_name} from version control")
    now = owned_values(before)
    changed = [key for key in PROMOTED_KEYS if now.get(key) != promoted.get(key)]
    if changed:
        raise PromotionRefused(f"{target_path.name}'s promoted keys changed since the newest {newest.describe()} "
                               f"(sglab:{', sglab:'.join(changed)}); a rollback would silently discard that change",
                               f"undo the edit (git diff {target_path.name}) or promote it through sglab promote, "
                               "then roll back")
    after = apply_promotion(before, previous)
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / target_path.name
        probe.write_text(after, encoding="utf-8")
        try:
            load_stack(target, path=probe)
        except ConfigError as exc:
            raise PromotionRefused(f"the restored {target} config would not be valid today: {exc.problem} "
                                   f"({exc.key})", f"fix {target_path.name}'s own keys, or restore by hand") from None
    return newest, (history[-2] if len(history) > 1 else None), after, now, previous


def rollback(target: str = "production", *, root: Path | None = None, dry_run: bool = False, reason: str = "",
             lock_timeout_s: float = 60.0) -> Rollback:
    """Undo the newest promotion into `stacks/Pulumi.<target>.yaml`; raises PromotionRefused."""
    root = root or project_root()
    target_path = stack_path(target, root)
    if not target_path.exists():
        raise PromotionRefused(f"{target_path} does not exist", f"check the stack name (--stack {target})")
    log_path = target_path.parent / LOG_NAME

    def attempt() -> tuple[Rollback, str]:
        before = target_path.read_text(encoding="utf-8")
        undone, restored, after, now, previous = plan_rollback(target, before, read_log(log_path), target_path)
        diff = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                            fromfile=f"a/{target_path.name}", tofile=f"b/{target_path.name}"))
        record = {"time": utc_now_iso(), "action": ROLLBACK, "target_stack": target, "reason": reason,
                  "undoes": _ref(undone), "restores": _ref(restored), "git_commit": git_commit(root),
                  "target_sha256_before": _sha256(before), "target_sha256_after": _sha256(after),
                  "previous": now, "promoted": previous}
        return Rollback(target, target_path, undone, restored, diff, False, log_path, record), after

    if dry_run:
        return attempt()[0]
    try:
        with target_lock(target_path, lock_timeout_s):
            done, after = attempt()
            write_atomic(target_path, after)
            append_log(log_path, done.log_entry)
    except Timeout:
        raise PromotionRefused(f"another promotion or rollback of {target_path.name} held its lock for "
                               f"{lock_timeout_s:g} s", "wait for it to finish and retry") from None
    done.written = True
    return done
