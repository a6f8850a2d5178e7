"""How long `sglab render` takes for every shipped stack (target: well under 2 s each).

Measures, side by side in one run:
- in-process: load + values + Helm v4 engine + YAML, as a long-lived process sees it;
- CLI: `sglab render --stack NAME` in a fresh process, interpreter start-up included (the dispatcher
  imports every subcommand module, so other commands' imports count here);
- render-only process: a fresh process that registers only the render subcommand (what the CLI would
  cost with lazily imported subcommands).
Prints median and max over --repeat runs.

    .venv/bin/python benchmarks/render_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

from sglab.cli import main as cli_main
from sglab.core.paths import list_stacks

TARGET_S = 2.0


def time_in_process(stack: str) -> float:
    start = time.perf_counter()
    with redirect_stdout(io.StringIO()):
        code = cli_main(["render", "--stack", stack])
    elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"render --stack {stack} failed with exit code {code}")
    return elapsed


def time_subprocess(stack: str) -> float:
    sglab = Path(sys.executable).with_name("sglab")
    cmd = [str(sglab)] if sglab.exists() else [sys.executable, "-m", "sglab.cli"]
    start = time.perf_counter()
    proc = subprocess.run([*cmd, "render", "--stack", stack], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} render --stack {stack} failed:\n{proc.stderr}")
    return elapsed


RENDER_ONLY = (
    "import argparse, sys\n"
    "from sglab.cli import validate\n"
    "parser = argparse.ArgumentParser(); validate.register(parser.add_subparsers())\n"
    "args = parser.parse_args(sys.argv[1:]); sys.exit(args.func(args))\n"
)


def time_render_only(stack: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", RENDER_ONLY, "render", "--stack", stack], capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"render-only process failed for {stack}:\n{proc.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    stacks = list_stacks()
    time_in_process(stacks[0])  # warm imports and the Helm library once, as a long-lived process would
    print(f"sglab render, {args.repeat} runs per stack (seconds; target < {TARGET_S:g} s)")
    print(f"{'stack':<16} {'in-process med':>14} {'max':>7} {'CLI med':>9} {'max':>7} {'render-only med':>16} "
          f"{'max':>7}")
    worst = 0.0
    for stack in stacks:
        inproc = [time_in_process(stack) for _ in range(args.repeat)]
        cli = [time_subprocess(stack) for _ in range(args.repeat)]
        alone = [time_render_only(stack) for _ in range(args.repeat)]
        worst = max(worst, max(cli), max(inproc))
        print(f"{stack:<16} {statistics.median(inproc):>14.3f} {max(inproc):>7.3f} "
              f"{statistics.median(cli):>9.3f} {max(cli):>7.3f} {statistics.median(alone):>16.3f} {max(alone):>7.3f}")
    print(f"worst single in-process/CLI run: {worst:.3f} s "
          f"({'within' if worst < TARGET_S else 'OVER'} the {TARGET_S:g} s target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
