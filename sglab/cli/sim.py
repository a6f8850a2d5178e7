"""`sglab sim --model-path ... [launch_server flags] [--sim-* knobs]`: run the SGLang simulator."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    # Everything after `sim` goes to the simulator's own SGLang-compatible parser (it accepts unknown flags).
    p = sub.add_parser("sim", help="run the SGLang-compatible simulator (same flags as sglang.launch_server)",
                       add_help=False, prefix_chars="\x00")
    p.add_argument("sim_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sglab.sim.cli_args import parse_or_exit
    from sglab.sim.server import serve

    return serve(parse_or_exit(list(args.sim_args)))
