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
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from sglab.analysis.verdict import Verdict, policy_of, target_gate_refusal
from sglab.config.arms import ArmSpec, baseline_arm, candidate_arm, confounds
from sglab.config.loader import LoadedStack, load_stack
from sglab.core.errors import ConfigError
from sglab.core.paths import project_root, stack_path, write_atomic
from sglab.core.untrusted import printable
from sglab.promotion.evidence import (PromotionRefused, check_design, check_evidence, check_launch_commands,
                                     check_producer, check_seal, judge_under_policies)
from sglab.promotion.log import LOG_NAME, ROLLBACK, LogEntry, append_log, effective, read_log
from sglab.results.store import RESULT_FILE, git_commit, latest_complete, load_result, results_root, utc_now_iso
from sglab.schema.records import Confound
from sglab.schema.result import RunResult

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


def _same_file(a: Path, b: Path) -> bool:
    """Two stack paths that are one file: a symlink, a hard link, `..` components, another spelling."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def find_evidence(stack: str, *, results_base: Path | None, result_path: Path | None) -> tuple[Path, RunResult]:
    if result_path is not None:
        result = load_result(result_path)
        path = result_path if result_path.is_dir() else result_path.parent
        _check_stack(stack, result, result_path)
        if not result.complete:
            raise PromotionRefused(f"{result_path} is an incomplete run ({result.incomplete_reason or 'no reason'})",
                                   f"run `sglab bench --stack {stack}` to completion")
        return path, result
    found = latest_complete(stack, results_base)
    if found is None:
        where = (results_base or results_root()) / stack
        raise PromotionRefused(f"no complete A/B run of stack '{stack}' under {where}",
                               f"run `sglab bench --stack {stack}` first")
    _check_stack(stack, found[1], found[0])  # a run copied into this stack's directory is not its run
    return found


def _check_stack(stack: str, result: RunResult, where: Path) -> None:
    if result.stack != stack:
        raise PromotionRefused(f"{where} is a result of stack '{result.stack}', not '{stack}'",
                               f"pass a result of {stack}, or promote --stack {result.stack}")


def promote(stack: str, *, target: str | None = None, root: Path | None = None, results_base: Path | None = None,
            result_path: Path | None = None, dry_run: bool = False, lock_timeout_s: float = 60.0,
            accept_unkeyed_seal: bool = False) -> Promotion:
    """Promote `stack`'s candidate into `stacks/Pulumi.<target>.yaml`; raises PromotionRefused.
    `accept_unkeyed_seal` admits a plain SHA-256 seal that is not the cluster's record (logged as such); `target`
    defaults to the stack's sglab:promote-to (production)."""
    root = root or project_root()
    if target is None:
        target = load_stack(stack, root).config.promote_to
    if results_base is None and root != project_root():
        results_base = root / "results"
    if target == stack or _same_file(stack_path(target, root), stack_path(stack, root)):
        same = "" if target == stack else f" ({stack_path(target, root).name} is {stack_path(stack, root).name})"
        raise PromotionRefused(f"the target stack '{target}' is the stack being promoted{same}",
                               "promote into another stack, e.g. --to production")
    source = load_stack(stack, root)
    run_dir, result = find_evidence(stack, results_base=results_base, result_path=result_path)
    if result.sweep is not None:  # a sweep's confirmation: evidence for the arm it confirms (sglab/sweep/)
        from sglab.sweep.confirm import confirmed_source

        source, refusal = confirmed_source(source, result, explicit=result_path is not None)
        if refusal is not None:
            raise PromotionRefused(*refusal)
    if result.kind not in ("ab", "interactive"):
        raise PromotionRefused(f"run {result.run_id} is a '{result.kind}' run; only A/B runs are evidence",
                               f"run `sglab bench --stack {stack}` (without --aa/--attribute)")

    check_evidence(source, result)
    from sglab.analysis.accumulate import recheck  # a continued sequence: its earlier runs, verified again

    if (problem := recheck(result, results_base, policy_of(result))) is not None:
        raise PromotionRefused(f"run {result.run_id} continues a sequence whose {problem}",
                               f"restore that run, or re-run `sglab bench --stack {stack} --fresh-sequence` (a new "
                               "sequence, recorded as such)")
    from sglab.bench.crossover import check_joined  # a crossover across two URL runs: its period 1, verified again

    if (problem := check_joined(result, results_base)) is not None:
        raise PromotionRefused(f"run {result.run_id} is period 2 of a crossover whose {problem}",
                               f"restore that run, or measure both periods again (`sglab bench --stack {stack}`, "
                               "then `--crossover-of` that run with the machines swapped)")
    target_path = stack_path(target, root)
    try:
        target_stack = load_stack(target, root)
    except ConfigError as exc:
        raise PromotionRefused(f"the target stack is not usable: {exc}",
                               f"create or fix {target_path} (see stacks/Pulumi.production.yaml)") from None
    producer = check_producer(source, result, target_stack)  # simulator evidence never changes a GPU stack
    check_design(source, result, target_stack)  # parallel evidence never into a stack that asks for a balanced one

    benchmarked = {name: result.config_hash.get(name) for name in ("baseline", "candidate")}
    now = {"baseline": baseline_arm(source.config).config_hash, "candidate": candidate_arm(source.config).config_hash}
    stale = [name for name in now if benchmarked[name] != now[name]]
    if stale:
        raise PromotionRefused(
            f"stale evidence: the {' and '.join(stale)} arm of stack '{stack}' changed since run {result.run_id} "
            f"(config hash {', '.join(f'{n} {str(benchmarked[n])[:12]} -> {now[n][:12]}' for n in stale)})",
            f"re-run `sglab bench --stack {stack}` so the evidence matches the config, then promote")
    check_launch_commands(source, result)

    # Confounds from the stack's arms (they hash to what was benchmarked); the file's own list is not read.
    judged = result.model_copy(update={"confounds": [Confound(**c.as_dict()) for c in confounds(source.config)]})
    verdict = judge_under_policies(source, judged)
    result_file = result_path if result_path is not None and result_path.is_file() else run_dir / RESULT_FILE
    seal = check_seal(stack, result, result_file, accept_unkeyed=accept_unkeyed_seal)

    # the target's own gate, on the same evidence
    if (refusal := target_gate_refusal(result, target_stack, stack)) is not None:
        raise PromotionRefused(*refusal)
    values = promoted_values(source)
    log_path = target_path.parent / LOG_NAME

    def plan(before: str) -> tuple[str, str]:
        after = apply_promotion(before, values)
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp) / target_path.name
            probe.write_text(after, encoding="utf-8")
            try:
                promoted = load_stack(target, path=probe)
            except ConfigError as exc:
                raise PromotionRefused(f"the promoted {target} config would not be valid: {exc.problem} "
                                       f"({exc.key})", f"make {target_path.name}'s own keys compatible with "
                                       f"stack '{stack}' (e.g. placement vs server.tp-size)") from None
        want, got = _launch(candidate_arm(source.config)), _launch(candidate_arm(promoted.config))
        if want != got:
            differs = [k for k in want if want[k] != got[k]]
            shown = "; ".join(f"{k}: benchmarked {want[k]!r}, {target} {got[k]!r}" for k in differs
                              if k in ("command", "secret references"))
            fixes = [_LAUNCH_FIXES.get(k, "its non-promoted keys").format(target=target) for k in differs]
            raise PromotionRefused(f"the {target} candidate would not run what was benchmarked (differs in "
                                   f"{', '.join(differs)}{': ' + shown if shown else ''})",
                                   f"check {target_path.name}'s {'; '.join(dict.fromkeys(fixes))}")
        diff = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                            fromfile=f"a/{target_path.name}", tofile=f"b/{target_path.name}"))
        return after, diff

    def entry(before: str, after: str) -> dict[str, Any]:
        return {
            "time": utc_now_iso(), "action": "promote", "source_stack": stack, "target_stack": target,
            "run_id": result.run_id,
            "result": str(run_dir), "outcome": verdict.outcome, "sentence": verdict.sentence,
            "policy": verdict.policy,
            "levels": [{"concurrency": lv.concurrency, "gating": lv.gating,
                        "decode_gain": lv.decode.estimate, "decode_ci": [lv.decode.low, lv.decode.high],
                        "output_gain": lv.output.estimate, "output_ci": [lv.output.low, lv.output.high],
                        "rounds": lv.decode.rounds,
                        "break_even_accept_length": lv.economics.break_even_accept_length} for lv in verdict.levels],
            "config_hash": benchmarked, "git_commit": git_commit(root), "result_git_commit": result.git_commit,
            "integrity": result.integrity.model_dump(mode="json", include={"algorithm", "digest", "key_id"}),
            "seal": seal, "producer": producer,
            "target_sha256_before": _sha256(before), "target_sha256_after": _sha256(after),
            # what the owned keys held before and hold now: `sglab rollback` restores `previous`
            "previous": owned_values(before), "promoted": owned_values(after),
        }

    if dry_run:
        before = target_path.read_text(encoding="utf-8")
        after, diff = plan(before)
        return Promotion(stack, target, target_path, run_dir, verdict, diff, False, log_path, entry(before, after))

    lock = target_lock(target_path, lock_timeout_s)
    try:
        with lock:
            before = target_path.read_text(encoding="utf-8")
            after, diff = plan(before)
            record = entry(before, after)
            if after == before:  # a no-op: the target already runs this; nothing to write or log
                return Promotion(stack, target, target_path, run_dir, verdict, diff, False, log_path, record)
            write_atomic(target_path, after)
            append_log(log_path, record)
    except Timeout:
        raise PromotionRefused(f"another promotion into {target_path.name} held its lock for {lock_timeout_s:g} s",
                               "wait for it to finish and retry") from None
    return Promotion(stack, target, target_path, run_dir, verdict, diff, True, log_path, record)


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
