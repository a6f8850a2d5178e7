"""`sglab results --stack NAME`: the runs of a stack as a table; `sglab results pull --stack NAME` copies
the in-cluster benchmark and NCCL probe results into results/."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglab.analysis.operating_point import level_label
from sglab.cli.bounds import model_option
from sglab.config.jobs import BenchmarkJob
from sglab.core.errors import ConfigError
from sglab.schema.result import RunResult
from sglab.results.store import list_runs, load_result, results_root
from sglab.core.untrusted import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("results", help="list a stack's benchmark runs (or pull in-cluster results)")
    p.add_argument("action", nargs="?", choices=["list", "pull"], default="list")
    p.add_argument("--stack", required=True, help="stack name")
    p.add_argument("--out", help="results root (default: results/ in the checkout, or $SGLAB_RESULTS_DIR)")
    p.add_argument("--namespace", help="pull: namespace of the result ConfigMaps (default: the stack's)")
    p.add_argument("--context", help="pull: kubeconfig context")
    p.add_argument("--kubeconfig", help="pull: kubeconfig file")
    p.add_argument("--keep", type=model_option(BenchmarkJob, "keep_results", "benchmark-job.keep-results"),
                   metavar="N", help="pull: runs left in the cluster; older ones that are now "
                   "on disk are deleted from it (default: the stack's benchmark-job.keep-results)")
    p.add_argument("--keep-all", action="store_true", help="pull: delete nothing from the cluster")
    p.set_defaults(func=run)


def _level_name(label: str, level: int) -> str:
    """A level as the run's profile measured it: c4 (concurrency), 4 req/s (rate), trace."""
    return {"rate": f"{level} req/s", "trace": "trace"}.get(label, f"c{level}")


def _gains(result: RunResult) -> str:
    """The gains of the verdict snapshot the run stored (a snapshot: any shape is shown, never trusted)."""
    verdict = result.verdict or {}
    label = level_label(result)
    parts = []
    levels = verdict.get("levels")
    for level in levels if isinstance(levels, list) else []:
        decode = level.get("decode") if isinstance(level, dict) else None
        estimate = decode.get("estimate") if isinstance(decode, dict) else None
        if isinstance(estimate, (int, float)) and not isinstance(estimate, bool):
            parts.append(f"{_level_name(label, level.get('concurrency', '?'))} {estimate:+.1%}")
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
            return f"abandoned (its bench process {result.loadgen.get('pid')} is gone)"
        if alive is None and result.loadgen.get("host"):
            return f"no (running on {result.loadgen['host']}?)"
        return "no (running)"
    return f"no ({result.incomplete_reason})" if result.incomplete_reason else "no"


def rows(stack: str, base: Path | None = None, unreadable: list[ConfigError] | None = None) -> list[tuple[str, ...]]:
    """One row per run (cells made `printable`); the runs that cannot be read are also added to `unreadable`."""
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
        outcome = (result.verdict or {}).get("outcome", "-")
        cells = (result.run_id, result.kind, complete, result.target.kind, levels, _gains(result), outcome)
        out.append(tuple(printable(c, limit=120) for c in cells))
    return out


def run(args: argparse.Namespace) -> int:
    base = Path(args.out) if args.out else None
    if args.action == "pull":
        return _pull(args, base)
    unreadable: list[ConfigError] = []
    table = rows(args.stack, base, unreadable)
    if not table:
        print(f"no runs for stack '{printable(args.stack)}' under {printable((base or results_root()) / args.stack)}")
        print(f"run one: sglab bench --stack {printable(args.stack)}")
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

    keep = args.keep if args.keep is not None else load_stack(args.stack).config.benchmark_job.keep_results
    if keep < 1:
        raise UsageError("--keep must be at least 1 (the stack's outputs read the newest run back)")
    pruned = prune_results(args.stack, keep, report=report, namespace=args.namespace, context=args.context,
                           kubeconfig=args.kubeconfig, base=base)
    for run_id, path in pruned.deleted:
        print(f"moved out of the cluster: {printable(run_id)} (kept at {printable(path)})")
    for run_id in pruned.not_home:
        print(f"left in the cluster: {printable(run_id)} (not on disk as pulled; see above)")


def _pull(args: argparse.Namespace, base: Path | None) -> int:
    from sglab.deploy.pull import prune_results, pull_report

    report = pull_report(args.stack, namespace=args.namespace, context=args.context, kubeconfig=args.kubeconfig,
                         base=base)
    pulled = sorted(report.written)
    for path in pulled:
        print(f"pulled: {printable(path)}")
    if not args.keep_all:
        _prune(args, base, report, prune_results)
    from sglab.probe.store import pull_probe_results

    probes = pull_probe_results(args.stack, namespace=args.namespace, context=args.context,
                                kubeconfig=args.kubeconfig, base=base)
    for path in probes.written:
        print(f"pulled probe: {printable(path)}")
    for problem in probes.rejected:
        print(f"skipped probe ConfigMap {printable(problem)}")
    for path in probes.conflicts:
        print(f"kept probe: {printable(path)} (the cluster's differs; the file on disk is never overwritten)")
    if not pulled and not probes.written:
        print(f"nothing new to pull for stack '{args.stack}'")
    return 0
