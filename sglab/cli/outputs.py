"""The `--output`/`--out` options shared by `sglab compare` and `sglab report` (sglab/report/outputs.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglab.core.untrusted import printable


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
