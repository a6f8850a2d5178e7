"""`sglab report RESULT [--out DIR]`: write the HTML report and PNG plots of a run."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglab.analysis.verdict import judge
from sglab.report import write_report
from sglab.results.store import load_result


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write the HTML report and plots of a benchmark result")
    p.add_argument("result", type=Path, help="a result.json or its run directory")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: the run directory)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = load_result(args.result)
    out = args.out or (args.result if args.result.is_dir() else args.result.parent)
    verdict = judge(result)
    path = write_report(result, out, verdict)
    print(verdict.sentence)
    print(f"report: {path}")
    return 0
