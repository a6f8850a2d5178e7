"""`sglab sim --model-path ... [launch_server flags] [--sim-* knobs]`: run the SGLang simulator.

`sglab sim --stack NAME --arm baseline|candidate [--port P]`: the simulator as that arm of the stack, with the
arm's exact flags and the stack's `sim:` knobs, on 127.0.0.1. Two of them stand in for your own servers, so
the URL path (`sglab bench --baseline-url ... --candidate-url ...`, its live-flag check, `--crossover-of`)
can be tried before a GPU is involved; every output labels their numbers as the simulator's.
"""

from __future__ import annotations

import argparse
import os
import sys

ARMS = ("baseline", "candidate")


def register(sub: argparse._SubParsersAction) -> None:
    # Everything after `sim` goes to the simulator's own SGLang-compatible parser (it accepts unknown flags).
    p = sub.add_parser("sim", help="run the SGLang-compatible simulator (same flags as sglang.launch_server, or "
                       "--stack NAME --arm baseline|candidate)", add_help=False, prefix_chars="\x00")
    p.add_argument("sim_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def _arm_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglab sim --stack", description="the simulator as one arm of a stack")
    p.add_argument("--stack", required=True, help="a stack name under stacks/ or a path to a stack file")
    p.add_argument("--arm", required=True, choices=ARMS, help="which arm it serves")
    p.add_argument("--port", type=int, default=30000, help="port on 127.0.0.1 (default 30000)")
    p.add_argument("--node", help="the node of the stack's sim.nodes it runs on (default: where the bench places "
                   "it: the baseline on the first, the candidate on the second); swap them for the second run of a "
                   "crossover across two runs (`sglab bench --crossover-of`)")
    return p


def arm_command(stack_name: str, arm_name: str, port: int, node: str | None = None
                ) -> tuple[list[str], dict[str, str], str]:
    """(the simulator's argv, the arm's env (NCCL and the rest, as the server sees it; the stack's SGLAB_SIM_*
    knobs; its node of sim.nodes), the stack's name) for one arm of a stack."""
    from sglab.cli import UsageError
    from sglab.config import baseline_arm, candidate_arm
    from sglab.config.loader import load_stack
    from sglab.config.server import node_env
    from sglab.core.paths import use_stack_file
    from sglab.load.targets import local_args

    loaded = load_stack(use_stack_file(stack_name))  # a name, or a stack file's path as `--stack` takes everywhere
    stack = loaded.config.model_copy(update={"backend": "sim"})  # its knobs as env, whatever the stack serves
    arm = baseline_arm(stack) if arm_name == "baseline" else candidate_arm(stack)
    nodes = dict(stack.sim.nodes)  # type: ignore[attr-defined]  # SimSpec is built by create_model
    names = list(nodes)
    node = node or names[ARMS.index(arm_name) % len(names)]  # the bench's parallel placement
    if node not in nodes:
        raise UsageError(f"--node {node} is not a node of stack '{loaded.name}''s sim.nodes: choose from "
                         f"{', '.join(names)}")
    return local_args(arm.args, port), {**arm.env, **node_env(node, nodes[node])}, loaded.name


def run(args: argparse.Namespace) -> int:
    from sglab.sim.cli_args import parse_or_exit
    from sglab.sim.server import serve

    argv = list(args.sim_args)
    if "--stack" in argv or any(a.startswith("--stack=") for a in argv):
        from sglab.core.untrusted import printable

        chosen = _arm_parser().parse_args(argv)
        sim_argv, env, name = arm_command(chosen.stack, chosen.arm, chosen.port, chosen.node)
        print(printable(f"sglab sim: stack {name}'s {chosen.arm} on http://127.0.0.1:{chosen.port}, node "
                        f"{env['SGLAB_SIM_NODE']} (the "
                        f"simulator; its numbers are labelled so): {' '.join(sim_argv)}", limit=None),
              file=sys.stderr, flush=True)
        os.environ.update(env)  # the arm's env, as the bench starts its simulators
        return serve(parse_or_exit(sim_argv))
    return serve(parse_or_exit(argv))
