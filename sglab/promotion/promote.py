"""Promotion: move a benchmarked candidate's serving config into a target stack (production by default).

Only on evidence: the newest complete A/B result of the stack, its verdict recomputed (never read),
and the stack's arms still hashing to what was benchmarked. The target file keeps its other keys and
its comments (ruamel round-trip); the write is atomic (temp file + rename) and serialised by a file
lock, and each promotion appends its evidence to stacks/promotions.jsonl. The evidence must come from what
the target runs (simulator evidence only into a simulator stack: promote_evidence.check_producer), and the
target's candidate arm must come out identical (command, image, args, env, secret references) to the
benchmarked candidate, or nothing is written.

`sglab rollback` (`rollback`) is the way back: it restores the config a target ran before its newest promotion
(stacks/promotions.jsonl). It is the same write as a promotion: under the target's lock, the owned keys
rewritten with a comment-preserving round trip, the file replaced atomically, the rollback appended to the log
with the file's hashes around it. Refused when the target's owned keys no longer hold what the newest promotion
wrote (a hand edit a rollback would silently discard), or when that promotion did not record what it replaced.
The way back in the cluster is the `pulumi up` it prints (docs/production.md: what it costs).
"""

from __future__ import annotations

import difflib
import hashlib
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from sglab.analysis.verdict import Verdict
from sglab.config.arms import ArmSpec, candidate_arm
from sglab.config.loader import LoadedStack, load_stack
from sglab.core.errors import ConfigError
from sglab.core.paths import project_root, stack_path, write_atomic
from sglab.promotion.evidence import EVIDENCE_CHECKS, Case, PromotionCheck, PromotionRefused, run_checks
from sglab.promotion.log import LOG_NAME, ROLLBACK, LogEntry, append_log, effective, read_log
from sglab.results.store import git_commit, utc_now_iso
from sglab.schema.verdict import Check

# The keys a promotion owns in the target stack; everything else there is the target's own.
PROMOTED_KEYS = ("image", "model", "server", "env", "nccl", "candidate")
# Sub-keys of owned keys that stay the target's: how the weights reach its pods is its own business.
TARGET_OWNED = {"model": ("volume",)}


@dataclass
class Promotion:
    source: str
    target: str
    target_path: Path
    result_path: Path
    verdict: Verdict
    diff: str
    written: bool
    log_path: Path
    log_entry: dict[str, Any]
    checks: list[Check]  # every check passed, in order (the table's)

    @property
    def next_command(self) -> str:
        return f"pulumi up --stack {self.target}"


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if k != "__lines__"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    for kind in (int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def promoted_values(source: LoadedStack) -> dict[str, Any]:
    """The owned keys as the target should hold them: shared settings with the candidate's declared
    differences folded in (in the target they are everyone's), the speculative block unchanged."""
    raw = _plain(source.raw)
    values: dict[str, Any] = {key: raw.get(key) for key in PROMOTED_KEYS}
    for key, kept in TARGET_OWNED.items():
        if isinstance(values.get(key), dict):
            values[key] = {k: v for k, v in values[key].items() if k not in kept}
    candidate = dict(raw["candidate"])
    confounds = candidate.pop("confounds", None) or {}
    if confounds.get("image"):
        values["image"] = confounds["image"]
    for key in ("nccl", "env", "server"):
        if confounds.get(key):
            values[key] = {**(values.get(key) or {}), **confounds[key]}
    values["candidate"] = candidate
    return values


def owned_values(text: str, namespace: str = "sglab") -> dict[str, Any]:
    """The owned keys as a target file holds them now (what `apply_promotion` would have to write to restore
    it; absent keys are None, so restoring removes them). Logged with each promotion for `sglab rollback`."""
    config = _yaml().load(text)["config"]
    values = {key: _plain(config.get(f"{namespace}:{key}")) for key in PROMOTED_KEYS}
    for key, kept in TARGET_OWNED.items():
        if isinstance(values.get(key), dict):
            values[key] = {k: v for k, v in values[key].items() if k not in kept}
    return values


def target_lock(target_path: Path, timeout_s: float) -> FileLock:
    """The lock every write of a target file (promotion, rollback) holds, with its log append."""
    return FileLock(str(target_path.parent / f".{target_path.name}.lock"), timeout=timeout_s)


def _sync(target: CommentedMap, new: dict[str, Any], kept: tuple[str, ...] = ()) -> None:
    """Make `target` equal `new` (except `kept` keys), keeping comments and formatting of what stays."""
    for key in [k for k in target if k not in new and k not in kept]:
        del target[key]
    for key, value in new.items():
        if key in target and isinstance(target[key], CommentedMap) and isinstance(value, dict):
            _sync(target[key], value)
        elif key not in target or _plain(target[key]) != value:
            target[key] = value


def apply_promotion(text: str, values: dict[str, Any], namespace: str = "sglab") -> str:
    """The target file's new text: owned keys rewritten, everything else (and every comment) kept."""
    yaml = _yaml()
    document = yaml.load(text)
    config = document["config"]
    for key in PROMOTED_KEYS:
        full = f"{namespace}:{key}"
        value = values.get(key)
        if value is None:
            if full in config:
                del config[full]
        elif full in config and isinstance(config[full], CommentedMap) and isinstance(value, dict):
            _sync(config[full], value, TARGET_OWNED.get(key, ()))
        elif full not in config:
            keys = list(config)
            anchor = f"{namespace}:candidate"
            config.insert(keys.index(anchor) if anchor in keys else len(keys), full, value)
        elif _plain(config[full]) != value:
            config[full] = value
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _launch(arm: ArmSpec) -> dict[str, Any]:
    """The whole launch of an arm: what the fidelity check compares (the simulator's knobs included: on a
    simulator stack they are its machine)."""
    return {"command": list(arm.command), "image": arm.image, "args": list(arm.args), "env": dict(arm.env),
            "secret references": list(arm.secret_env)}


# What to change in the target when part of the launch differs (the rest: its non-promoted keys).
_LAUNCH_FIXES = {"command": "sglab:backend", "secret references": "sglab:hf-token (pulumi config set --secret "
                 "sglab:hf-token <token> --stack {target}, or remove it)", "env": "sglab:sim (a simulator's knobs) or "
                 "its other keys"}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def promoted_config(case: Case) -> str:
    """The target rewritten with the candidate's keys is still a valid stack."""
    case.after = apply_promotion(case.before, promoted_values(case.source))
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / case.target_stack.path.name
        probe.write_text(case.after, encoding="utf-8")
        try:
            promoted = load_stack(case.target, path=probe)
        except ConfigError as exc:
            raise PromotionRefused(f"the promoted {case.target} config would not be valid: {exc.problem} "
                                   f"({exc.key})", f"make {case.target_stack.path.name}'s own keys compatible with "
                                   f"stack '{case.stack}' (e.g. placement vs server.tp-size)") from None
    case.promoted_stack = promoted
    return "valid"


def fidelity(case: Case) -> str:
    """The target's candidate arm launches exactly as the benchmarked one did."""
    target, name = case.target, case.target_stack.path.name
    want, got = _launch(candidate_arm(case.source.config)), _launch(candidate_arm(case.promoted_stack.config))
    if want != got:
        differs = [k for k in want if want[k] != got[k]]
        shown = "; ".join(f"{k}: benchmarked {want[k]!r}, {target} {got[k]!r}" for k in differs
                          if k in ("command", "secret references"))
        fixes = [_LAUNCH_FIXES.get(k, "its non-promoted keys").format(target=target) for k in differs]
        raise PromotionRefused(f"the {target} candidate would not run what was benchmarked (differs in "
                               f"{', '.join(differs)}{': ' + shown if shown else ''})",
                               f"check {name}'s {'; '.join(dict.fromkeys(fixes))}")
    return "the target's candidate launches as the benchmarked one"


# The checks of the write, on the target's text as read under its lock (or as it is, for a dry run).
WRITE_CHECKS: tuple[PromotionCheck, ...] = (
    PromotionCheck("promoted config",
                   "the rewritten target would not validate as a stack",
                   "make the target's own keys compatible",
                   promoted_config),
    PromotionCheck("fidelity",
                   "the target's candidate arm would not launch exactly as the benchmarked one: the whole launch"
                   " is compared, command (the backend: `python3 -m sglang.launch_server` or `sglab sim`), "
                   "image, args, env (a simulator's `SGLAB_SIM_*` knobs included: on a simulator stack they are "
                   "its machine) and secret references (the target's `sglab:hf-token` reaches its servers as "
                   "`HF_TOKEN`; a token the benchmarked servers did not have, or lacked, is another launch)",
                   "the key the message names (`sglab:backend`, `sglab:hf-token`, `sglab:sim`, or the target's "
                   "other non-promoted keys)",
                   fidelity),
)
# Not a check of the evidence but a refusal all the same: the target's lock (`target_lock`).
LOCK_ROW = ("lock", "another promotion holds the target's lock for 60 s", "retry")


def promote(stack: str, *, target: str | None = None, root: Path | None = None, results_base: Path | None = None,
            result_path: Path | None = None, dry_run: bool = False, lock_timeout_s: float = 60.0,
            accept_unkeyed_seal: bool = False) -> Promotion:
    """Promote `stack`'s candidate into `stacks/Pulumi.<target>.yaml`: every check of EVIDENCE_CHECKS, then
    under the target's lock WRITE_CHECKS and the write; raises PromotionRefused naming the check that refused.
    `accept_unkeyed_seal` admits a plain SHA-256 seal that is not the cluster's record (logged as such); `target`
    defaults to the stack's sglab:promote-to (production). Without `root`, the stacks and results are where the
    command line finds them (SGLAB_STACKS_DIR, SGLAB_RESULTS_DIR, a `--stack` file; else the checkout's)."""
    if target is None:
        target = load_stack(stack, root).config.promote_to
    if results_base is None and root is not None and root != project_root():
        results_base = root / "results"
    case = Case(stack=stack, target=target, root=root, results_base=results_base, result_path=result_path,
                accept_unkeyed_seal=accept_unkeyed_seal, source=load_stack(stack, root))
    passed = run_checks(case, EVIDENCE_CHECKS)
    target_path = case.target_stack.path
    log_path = target_path.parent / LOG_NAME

    def diff() -> str:
        return "".join(difflib.unified_diff(case.before.splitlines(keepends=True), case.after.splitlines(keepends=True),
                                            fromfile=f"a/{target_path.name}", tofile=f"b/{target_path.name}"))

    def outcome(written: bool) -> Promotion:
        return Promotion(stack, target, target_path, case.run_dir, case.verdict, diff(), written, log_path,
                         entry(case, git_commit(root)), passed)

    if dry_run:
        case.before = target_path.read_text(encoding="utf-8")
        passed += run_checks(case, WRITE_CHECKS)
        return outcome(False)

    lock = target_lock(target_path, lock_timeout_s)
    try:
        with lock:
            case.before = target_path.read_text(encoding="utf-8")
            passed += run_checks(case, WRITE_CHECKS)
            if case.after == case.before:  # a no-op: the target already runs this; nothing to write or log
                return outcome(False)
            done = outcome(True)
            write_atomic(target_path, case.after)
            append_log(log_path, done.log_entry)
    except Timeout:
        raise PromotionRefused(f"another promotion into {target_path.name} held its lock for {lock_timeout_s:g} s",
                               "wait for it to finish and retry", check="lock") from None
    return done


def entry(case: Case, commit: str | None) -> dict[str, Any]:
    """The promotion log's record: the evidence, its verdict, the seal and what the owned keys held around it."""
    result, verdict = case.result, case.verdict
    return {
        "time": utc_now_iso(), "action": "promote", "source_stack": case.stack, "target_stack": case.target,
        "run_id": result.run_id,
        "result": str(case.run_dir), "outcome": verdict.outcome, "sentence": verdict.sentence,
        "policy": verdict.policy,
        "levels": [{"concurrency": lv.concurrency, "gating": lv.gating,
                    "decode_gain": lv.decode.estimate, "decode_ci": [lv.decode.low, lv.decode.high],
                    "output_gain": lv.output.estimate, "output_ci": [lv.output.low, lv.output.high],
                    "rounds": lv.decode.rounds,
                    "break_even_accept_length": lv.economics.break_even_accept_length} for lv in verdict.levels],
        "config_hash": {name: result.config_hash.get(name) for name in ("baseline", "candidate")},
        "git_commit": commit, "result_git_commit": result.git_commit,
        "integrity": result.integrity.model_dump(mode="json", include={"algorithm", "digest", "key_id"})
        if result.integrity is not None else None,
        "seal": case.seal, "producer": case.producer,
        "target_sha256_before": _sha256(case.before), "target_sha256_after": _sha256(case.after),
        # what the owned keys held before and hold now: `sglab rollback` restores `previous`
        "previous": owned_values(case.before), "promoted": owned_values(case.after),
    }


def checks_table() -> str:
    """docs/promotion.md's table of checks, from the code's."""
    rows = [(c.name, c.refused_when, c.fix_says) for c in (*EVIDENCE_CHECKS, *WRITE_CHECKS)] + [LOCK_ROW]
    return "\n".join(["| check | refused when | fix it says |", "|---|---|---|",
                      *(f"| {name} | {when} | {fix} |" for name, when, fix in rows)])


# The way back.

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
                               f"({', '.join(foreign)[:200]}); a rollback writes only "
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
    """Undo the newest promotion into `stacks/Pulumi.<target>.yaml` (without `root`: the stacks directory the
    command line uses, SGLAB_STACKS_DIR or the checkout's); raises PromotionRefused."""
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


if __name__ == "__main__":
    print(checks_table())
