"""`sglab results --stack NAME`: the runs of a stack as a table; `sglab results pull --stack NAME` copies
the in-cluster benchmark and NCCL probe results into results/; `sglab results prune --stack NAME --keep N`
deletes old runs from disk, never one that a kept run, a promotion or a running bench still needs."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from sglab.analysis.operating_point import level_label
from sglab.cli.bounds import model_option
from sglab.config.cluster import BenchmarkJob
from sglab.core.errors import ConfigError
from sglab.schema.result import RunResult
from sglab.schema.verdict import Verdict
from sglab.results.store import list_runs, load_result, results_root
from sglab.core.untrusted import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("results", help="list a stack's benchmark runs (pull in-cluster results, prune old ones)")
    p.add_argument("action", nargs="?", choices=["list", "pull", "prune"], default="list")
    p.add_argument("--stack", required=True, help="a stack name under stacks/, or a path to a stack file")
    p.add_argument("--out", help="results root (default: results/ in the checkout, or $SGLAB_RESULTS_DIR)")
    p.add_argument("--namespace", help="pull: namespace of the result ConfigMaps (default: the stack's)")
    p.add_argument("--context", help="pull: kubeconfig context")
    p.add_argument("--kubeconfig", help="pull: kubeconfig file")
    p.add_argument("--keep", type=_keep_option(), metavar="N|all", help="pull: runs left in the cluster; older ones "
                   "that are now on disk are deleted from it (default: the stack's benchmark-job.keep-results; all: "
                   "delete nothing); prune (required): the newest runs kept on disk, besides every run they, a "
                   "promotion or a running bench need")
    p.add_argument("--yes", action="store_true", help="prune: delete (without it, list what would be deleted)")
    p.set_defaults(func=run)


KEEP_ALL = "all"


def _keep_option():
    """--keep N (bounded as benchmark-job.keep-results) or --keep all."""
    count = model_option(BenchmarkJob, "keep_results", "benchmark-job.keep-results")

    def parse(text: str):
        return KEEP_ALL if text.strip().lower() == KEEP_ALL else count(text)
    return parse


def _level_name(label: str, level: int) -> str:
    """A level as the run's profile measured it: c4 (concurrency), 4 req/s (rate), trace."""
    return {"rate": f"{level} req/s", "trace": "trace"}.get(label, f"c{level}")


def _gains(result: RunResult) -> str:
    """The gains of the verdict snapshot the run stored (a snapshot: shown, never trusted; a sweep's has none)."""
    label = level_label(result)
    levels = result.verdict.levels if isinstance(result.verdict, Verdict) else []
    parts = [f"{_level_name(label, level.concurrency)} {level.decode.estimate:+.1%}" for level in levels
             if level.decode.estimate is not None]
    return (", " if label == "rate" else " ").join(parts) or "-"


def _state(result: RunResult) -> str:
    """yes / no (why) / invalid (why) / abandoned: `running` written by a process that is gone."""
    if result.complete:
        return "yes"
    if result.invalid_reason:
        return f"invalid ({result.invalid_reason})"
    if result.incomplete_reason == "running":
        from sglab.load.owner import owner_alive

        alive = owner_alive(result.loadgen)
        if alive is False:
            return f"abandoned (its bench process {result.loadgen.pid} is gone)"
        if alive is None and result.loadgen.host:
            return f"no (running on {result.loadgen.host}?)"
        return "no (running)"
    return f"no ({result.incomplete_reason})" if result.incomplete_reason else "no"


def rows(stack: str, base: Path | None = None, unreadable: list[ConfigError] | None = None) -> list[tuple[str, ...]]:
    """One row per run (an unreadable run's directory and problem made `printable`); the runs that cannot be read
    are also added to `unreadable`."""
    out = []
    for run_dir in list_runs(stack, base):
        try:
            result = load_result(run_dir)
        except ConfigError as exc:
            out.append(tuple(printable(c, limit=120) for c in (run_dir.name, "?", "?", "?", "-", "-",
                                                                f"unreadable: {exc.problem}")))
            if unreadable is not None:
                unreadable.append(exc)
            continue
        levels = ",".join(str(lv.concurrency) for lv in result.levels) or "-"
        label = level_label(result)
        if levels != "-" and label in ("rate", "trace"):
            levels = "trace" if label == "trace" else f"{levels} req/s"
        complete = _state(result)
        outcome = result.verdict.outcome if result.verdict is not None else "-"
        cells = (result.run_id, result.kind, complete, result.target.kind, levels, _gains(result), outcome)
        out.append(tuple(str(c)[:120] for c in cells))  # a loaded result holds no control character
    return out


def _say(text: str) -> None:
    """A line that quotes names from the command line, the disk or the cluster (a run id, a path): `printable`."""
    print(printable(text, limit=1000))


def run(args: argparse.Namespace) -> int:
    base = Path(args.out) if args.out else None
    if args.action == "pull":
        return _pull(args, base)
    if args.action == "prune":
        return _prune_disk(args, base)
    unreadable: list[ConfigError] = []
    table = rows(args.stack, base, unreadable)
    if not table:
        _say(f"no runs for stack '{args.stack}' under {(base or results_root()) / args.stack}")
        _say(f"run one: sglab bench --stack {args.stack}")
        return 0
    header = ("run id", "kind", "complete", "target", "levels", "decode gain", "verdict")
    widths = [max(len(str(r[i])) for r in [header, *table]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *table]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())
    if unreadable:  # listed above; the exit code says a file needs attention
        first = unreadable[0]
        more = f" (and {len(unreadable) - 1} more run(s) marked unreadable above)" if len(unreadable) > 1 else ""
        raise ConfigError(first.file, first.key, first.problem + more,
                          f"{first.fix or 'move or delete that run directory'}; a damaged run can be moved out of "
                          f"{(base or results_root()) / args.stack}")
    return 0


def _prune(args: argparse.Namespace, base: Path | None, report, prune_results) -> None:
    """The cluster keeps the newest runs (benchmark-job.keep-results); older ones that are home are moved out."""
    from sglab.cli import UsageError
    from sglab.config.loader import load_stack

    stack = load_stack(args.stack).config
    keep = args.keep if args.keep is not None else stack.benchmark_job.keep_results
    if keep < 1:
        raise UsageError("--keep must be at least 1 (the stack's outputs read the newest run back)")
    calibration = stack.sweep.calibration_run if stack.sweep is not None else None  # its waves' Jobs read it
    pruned = prune_results(args.stack, keep, report=report, namespace=args.namespace, context=args.context,
                           kubeconfig=args.kubeconfig, base=base, spare={calibration} if calibration else set())
    for run_id, path in pruned.deleted:
        _say(f"moved out of the cluster: {run_id} (kept at {path})")
    for run_id in pruned.not_home:
        _say(f"left in the cluster: {run_id} (not on disk as pulled; see above)")


def _pull(args: argparse.Namespace, base: Path | None) -> int:
    from sglab.deploy.pull import prune_results, pull_report

    report = pull_report(args.stack, namespace=args.namespace, context=args.context, kubeconfig=args.kubeconfig,
                         base=base)
    pulled = sorted(report.written)
    for path in pulled:
        _say(f"pulled: {path}")
    if args.keep != KEEP_ALL:
        _prune(args, base, report, prune_results)
    from sglab.probe.store import pull_probe_results

    probes = pull_probe_results(args.stack, namespace=args.namespace, context=args.context,
                                kubeconfig=args.kubeconfig, base=base)
    for path in probes.written:
        _say(f"pulled probe: {path}")
    for problem in probes.rejected:
        _say(f"skipped probe ConfigMap {problem}")
    for path in probes.conflicts:
        _say(f"kept probe: {path} (the cluster's differs; the file on disk is never overwritten)")
    if not pulled and not probes.written:
        _say(f"nothing new to pull for stack '{args.stack}'")
    return 0


def _references(result: RunResult) -> set[str]:
    """The runs a run's evidence stands on: the earlier runs of the sequence it continues, the period 1 it joined,
    the sweep it confirms."""
    from sglab.analysis.accumulate import recorded

    sequence = recorded(result)
    found = {entry.run_id for entry in sequence.runs} if sequence is not None else set()
    if result.design is not None and result.design.joined_run:
        found.add(result.design.joined_run)
    if result.sweep is not None:
        found.add(result.sweep.sweep_run_id)
    return found


def _promoted_runs(stack: str) -> set[str]:
    """Runs of this stack that stacks/promotions.jsonl records: a rollback and the canary's break-even read them."""
    from sglab.core.paths import stacks_dir
    from sglab.promotion.log import LOG_NAME, read_log

    return {entry.run_id for entry in read_log(stacks_dir() / LOG_NAME) if entry.record.get("source_stack") == stack}


def _still_needed(result: RunResult) -> str | None:
    """Why a run must stay whatever its age: it is measuring now, or it is a sweep that can still be resumed."""
    from sglab.load.owner import owner_alive

    if result.complete:
        return None
    if result.kind == "sweep":
        return "an unfinished sweep (sglab sweep --resume reads it)"
    if result.incomplete_reason == "running" and owner_alive(result.loadgen) is not False:
        return "still measuring"
    return None


def prune_plan(stack: str, keep: int, base: Path | None) -> tuple[list[Path], dict[str, str]]:
    """(the run directories to delete, run id -> why it stays): the newest `keep` runs, every run they stand on
    (transitively), every promoted run, every run still measuring and every unfinished sweep. A run that cannot
    be read is an error: what it stands on is unknown, so nothing can be deleted safely."""
    runs = list_runs(stack, base)
    why: dict[str, str] = {d.name: f"among the newest {keep}" for d in runs[-keep:]}
    references: dict[str, set[str]] = {}
    for run_dir in runs:
        try:
            result = load_result(run_dir)
        except ConfigError as exc:
            raise ConfigError(exc.file, exc.key, f"{exc.problem}; nothing was deleted (what this run stands on is "
                              "unknown)", f"{exc.fix or 'repair it'}, or move {run_dir} out of the results") from None
        references[run_dir.name] = _references(result)
        needed = _still_needed(result)
        if needed:
            why.setdefault(run_dir.name, needed)
    for run_id in _promoted_runs(stack):
        why.setdefault(run_id, "a promotion recorded it (stacks/promotions.jsonl)")
    todo = list(why)
    while todo:
        for ref in references.get(todo.pop(), set()):
            if ref not in why:
                why[ref] = "a kept run's evidence stands on it"
                todo.append(ref)
    return [d for d in runs if d.name not in why], why


def _size_bytes(run_dir: Path) -> int:
    if run_dir.is_symlink():
        return 0
    return sum(f.lstat().st_size for f in run_dir.rglob("*") if f.is_file() and not f.is_symlink())


def _prune_disk(args: argparse.Namespace, base: Path | None) -> int:
    from sglab.cli import UsageError

    if args.keep == KEEP_ALL:
        print("--keep all: nothing to prune")
        return 0
    if args.keep is None or args.keep < 1:
        raise UsageError("results prune needs --keep N, N at least 1: the newest N runs stay (with every run they, a "
                         "promotion or a running bench need)")
    doomed, why = prune_plan(args.stack, args.keep, base)
    present = {d.name for d in list_runs(args.stack, base)}
    for run_id in sorted(set(why) & present):
        _say(f"keep {run_id}: {why[run_id]}")
    freed_bytes = 0
    for run_dir in doomed:
        size = _size_bytes(run_dir)
        freed_bytes += size
        if not args.yes:
            _say(f"would delete {run_dir.name} ({size / 1e6:.1f} MB)")
            continue
        if run_dir.is_symlink():
            run_dir.unlink()  # the link goes; what it points at is not ours to delete
        else:
            shutil.rmtree(run_dir)
        _say(f"deleted {run_dir.name} ({size / 1e6:.1f} MB)")
    if not doomed:
        _say(f"nothing to prune: stack '{args.stack}' has {len(present)} run(s), all kept")
    elif args.yes:
        print(f"{len(doomed)} run(s) deleted, {freed_bytes / 1e6:.1f} MB freed")
    else:
        print(f"{len(doomed)} run(s), {freed_bytes / 1e6:.1f} MB: run again with --yes to delete them")
    return 0
