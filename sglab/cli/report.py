"""`sglab report RESULT [--out DIR]`: write the HTML report and PNG plots of a run (`--output` picks others)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglab.cli.outputs import add_output_arguments, print_outputs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write the HTML report and plots of a benchmark result")
    p.add_argument("result", type=Path, help="a result.json or its run directory")
    add_output_arguments(p, default="html")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return print_outputs(args, args.output)
