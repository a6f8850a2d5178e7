"""`sglab compare RESULT`: recompute and print the verdict (default: the table; `--output` picks a format)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglab.cli.outputs import add_output_arguments, print_outputs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="print the verdict of a benchmark result",
                       description="Recompute the verdict from the result's samples with the policy recorded in "
                                   "it; the last line is `verdict: promote|reject|inconclusive`.")
    p.add_argument("result", type=Path, help="a result.json or its run directory")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON (same as --output json)")
    add_output_arguments(p, default="console")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return print_outputs(args, "json" if args.json else args.output)
