"""`sglab compare RESULT`: recompute and print the verdict table (levels x gain, CI, economics, guards)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sglab.analysis.verdict import judge
from sglab.report.console import render_console
from sglab.results.store import load_result


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="print the verdict of a benchmark result",
                       description="Recompute the verdict from the result's samples with the policy recorded in "
                                   "it; the last line is `verdict: promote|reject|inconclusive`.")
    p.add_argument("result", type=Path, help="a result.json or its run directory")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON instead of the table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = load_result(args.result)
    verdict = judge(result)
    if args.json:
        print(json.dumps(verdict.model_dump(mode="json"), indent=1))
        return 0
    report = args.result / "report.html" if args.result.is_dir() else args.result.with_name("report.html")
    print(render_console(verdict, report if report.exists() else None))
    return 0
