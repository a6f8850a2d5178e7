"""`sglab compare RESULT [RESULT ...]` and `sglab report RESULT [--out DIR]`: a run's verdict, printed (compare:
the table by default) or written as files (report: the HTML report and PNG plots by default), with the
`--output`/`--out` options both share (the formats are sglab/report/outputs.py's). Several results compare as
one table, with what differs between their conditions.

Before judging, compare says whether the result's integrity record holds (sglab/results/integrity.py; an old
file without one is still compared, and says so) and takes the confounds from the stack's arms when the
stack still hashes to what was benchmarked; the verdict adds those it recomputes from the launch
commands the result recorded. Notes go to stderr, so `--json` stays JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglab.core.untrusted import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="print the verdict of a benchmark result",
                       description="Recompute the verdict from the result's samples with the policy recorded in "
                                   "it; the last line is `verdict: promote|reject|inconclusive`.")
    p.add_argument("result", type=Path, nargs="+", help="a result.json or its run directory; several: one table of "
                   "their gains per level and what differs between their conditions")
    add_output_arguments(p, default="console")
    p.set_defaults(func=run_compare)

    p = sub.add_parser("report", help="write the HTML report and plots of a benchmark result")
    p.add_argument("result", type=Path, help="a result.json or its run directory")
    add_output_arguments(p, default="html")
    p.set_defaults(func=run_report)


def add_output_arguments(p: argparse.ArgumentParser, *, default: str) -> None:
    p.add_argument("--output", default=default, metavar="FORMAT[,FORMAT]",
                   help=f"output format(s): console, json, html, plots, csv, or any registered one "
                        f"(default: {default})")
    p.add_argument("--out", type=Path, default=None, help="directory for file outputs (default: the run directory)")


def print_outputs(args: argparse.Namespace, formats: str, prepare=None) -> int:
    """`prepare(result) -> result`, if given, runs on the loaded result before it is judged (compare's checks)."""
    from sglab.analysis.verdict import judge
    from sglab.cli import UsageError
    from sglab.report import outputs
    from sglab.results.store import load_result

    try:
        chosen = [outputs.get(n.strip()) for n in formats.split(",") if n.strip()]
    except KeyError as exc:
        raise UsageError(f"--output: {exc.args[0]}") from None
    if not chosen:
        raise UsageError(f"--output: give a format ({', '.join(outputs.names())})")
    result = load_result(args.result)
    if prepare is not None:
        result = prepare(result)
    run_dir = args.result if args.result.is_dir() else args.result.parent
    ctx = outputs.OutputContext(result=result, verdict=judge(result), run_dir=run_dir, out_dir=args.out or run_dir)
    for output in chosen:
        text = output.render(ctx)
        if text:  # JSON escapes every control itself (printable's escapes would not be JSON)
            print(text if output.name == "json" else printable(text, newlines=True, limit=None))
    return 0


def run_report(args: argparse.Namespace) -> int:
    return print_outputs(args, args.output)


def note(text: str) -> None:
    print(f"note: {printable(text, limit=None)}", file=sys.stderr)


def with_recomputed_confounds(result):
    """The result with its confounds taken from the stack's arms, when the stack still describes this run."""
    from sglab.config.arms import baseline_arm, candidate_arm, confounds
    from sglab.core.errors import ConfigError
    from sglab.config.loader import load_stack

    try:
        stack = load_stack(result.stack)
    except ConfigError:
        note(f"stack '{result.stack}' is not here; confounds are recomputed from the recorded launch commands")
        return result
    arms = {"baseline": baseline_arm(stack.config), "candidate": candidate_arm(stack.config)}
    if result.kind not in ("ab", "interactive") or any(result.config_hash.get(n) != a.config_hash
                                                        for n, a in arms.items()):
        note(f"stack '{result.stack}' changed since this run (or it is not a plain A/B run); confounds are "
             "recomputed from the recorded launch commands")
        return result
    from sglab.schema.records import Confound

    return result.model_copy(update={"confounds": [Confound(**c.as_dict()) for c in confounds(stack.config)]})


def prepare(result):
    from sglab.results.integrity import verify

    problem = verify(result)
    if problem is not None:
        note(f"{problem}; the verdict below is computed anyway, but `sglab promote` refuses this result "
             f"(re-run the benchmark to get a sealed one)")
    return with_recomputed_confounds(result)


def run_compare(args: argparse.Namespace) -> int:
    from sglab.cli import UsageError

    formats = args.output
    if len(args.result) == 1:
        args.result = args.result[0]
        return print_outputs(args, formats, prepare=prepare)
    if formats != "console":
        raise UsageError(f"--output {formats}: several runs compare as one console table; give one run for "
                         "another format")
    print(printable(runs_table(args.result), newlines=True, limit=None))
    return 0


# What makes two runs' conditions differ, besides what they measured: (label, how to read it from a result).
CONDITIONS = (
    ("stack", lambda r: r.stack),
    ("kind", lambda r: r.kind),
    ("baseline config", lambda r: r.config_hash.get("baseline", "")[:12]),
    ("candidate config", lambda r: r.config_hash.get("candidate", "")[:12]),
    ("design", lambda r: _design(r)),
    ("machines", lambda r: ", ".join(f"{arm} {'/'.join(n or '?' for n in nodes)}"
                                     for arm, nodes in sorted((r.design.nodes if r.design else {}).items()))),
    ("produced by", lambda r: _producer(r)),
    ("levels", lambda r: ",".join(str(lv.concurrency) for lv in r.levels)),
)


def _design(result) -> str:
    """As the rounds are laid out (what the verdict reads), not as asked."""
    from sglab.analysis.nodes import design_of

    return ",".join(sorted({design_of(level) for level in result.levels}))


def _producer(result) -> str:
    from sglab.analysis.provenance import producer_of

    return producer_of(result).describe()


def _plan(result) -> dict[str, str]:
    """What the requests were, key by key (the seed aside: every run draws its own)."""
    plan = result.load_plan.model_dump(mode="json")
    return {f"plan.{k}": str(v) for k, v in plan.items() if k not in ("seed", "concurrency")}


def runs_table(paths) -> str:
    """Every run's gain per level on its gate metric, with its interval and outcome, then what differs."""
    from sglab.analysis.verdict import judge
    from sglab.results.store import load_result

    results = [prepare(load_result(path)) for path in paths]
    verdicts = [judge(result) for result in results]
    head = f"{'run':<26} {'stack':<18} {'c':>5} {'gate':>4} {'gain':>8} {'95% interval':>20}  outcome"
    lines = [f"gain: {verdicts[0].metric} of the candidate over the baseline, each run judged on its own", head]
    for result, verdict in zip(results, verdicts):
        for level in verdict.levels:
            gain = level.gain(verdict.metric)
            shown = "-" if gain.estimate is None else f"{gain.estimate:+.1%}"
            band = "-" if gain.low is None or gain.high is None else f"[{gain.low:+.1%}, {gain.high:+.1%}]"
            lines.append(f"{result.run_id:<26} {result.stack:<18} {level.concurrency:>5} "
                         f"{'yes' if level.gating else 'no':>4} {shown:>8} {band:>20}  {level.outcome}")
    lines.append("")
    lines += [f"{result.run_id}: {verdict.outcome}" for result, verdict in zip(results, verdicts)]
    differ, same = [], []
    readers = [(label, [str(read(result)) for result in results]) for label, read in CONDITIONS]
    plans = [_plan(result) for result in results]
    readers += [(key, [plan.get(key, "-") for plan in plans]) for key in sorted(set().union(*plans))]
    for label, values in readers:
        if len(set(values)) == 1:
            same.append(label)
        else:
            differ.append(f"{label} ({' | '.join(v[:60] for v in values)})")
    same = [label for label in same if not label.startswith("plan.")] + (
        ["the load plan"] if not any(d.startswith("plan.") for d in differ) else [])
    if differ:
        lines.append("differ: " + "; ".join(differ) + " -- gains measured under other conditions are not one series")
    lines.append("same conditions: " + (", ".join(same) or "none"))
    return "\n".join(lines)
