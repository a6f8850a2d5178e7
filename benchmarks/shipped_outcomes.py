"""The shipped stacks' outcomes under `sglab bench --quick`, over seeds: the preset's power, measured live.

The simulator's timing model gives eagle-nccl-ll about +3.3% decode tok/s at concurrency 1 and eagle-default
about -15% (tests/promote/test_e2e_outcomes.py checks the model, exactly). Whether a quick run (at most 40 rounds
at time scale 10) decides them is a property of live timing and of the machine's load, so it is measured here,
not asserted by a test: for each case and seed one real `sglab bench --target sim --quick --seed S` run, its
`verdict:` line counted. Cases: eagle-nccl-ll (promote expected), eagle-default (reject expected), and
eagle-nccl-ll `--aa` (the baseline against itself: a promotion is a false one). Run it on an idle machine: on a
busy one the simulators fall behind their time scale and the gains drift (docs/simulator.md, "Time scale").

Run: PYTHONPATH=. .venv/bin/python benchmarks/shipped_outcomes.py --seeds 0-7
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time

from sglab.core.paths import project_root
from sglab.sglang.env import without_server_env

CASES = {"eagle-nccl-ll": ("promote", ["--stack", "eagle-nccl-ll"]),
         "eagle-default": ("reject", ["--stack", "eagle-default"]),
         "aa": ("not promote", ["--stack", "eagle-nccl-ll", "--aa"])}
RUN_TIMEOUT_S = 600


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    found = list(range(int(first), int(last or first) + 1))
    if not 1 <= len(found) <= 64:
        raise argparse.ArgumentTypeError("--seeds: 1 to 64 seeds, e.g. 0-7")
    return found


def outcome(args: list[str], seed: int) -> tuple[str, float]:
    """One quick run's verdict word and its wall time."""
    with tempfile.TemporaryDirectory() as results:
        env = without_server_env(os.environ)
        env["SGLAB_RESULTS_DIR"] = results
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "sglab.cli", "bench", "--target", "sim", "--quick",
                               "--no-progress", "--seed", str(seed), *args],
                              capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, cwd=project_root())
        line = next((x for x in proc.stdout.splitlines() if x.startswith("verdict: ")), None)
        word = line.split()[1] if line else f"exit {proc.returncode}"
        return word, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seeds, default=seeds("0-7"), help="seeds, FIRST-LAST (default 0-7)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    args = parser.parse_args()
    print(f"# sglab bench --quick, seeds {args.seeds[0]}-{args.seeds[-1]}, one run per case and seed")
    print(f"{'case':<14} {'expected':<12} {'outcomes':<44} {'as expected':>11} {'mean s':>7}")
    for name in args.cases.split(","):
        expected, case_args = CASES[name]
        counts: collections.Counter[str] = collections.Counter()
        wall = []
        for seed in args.seeds:
            word, seconds = outcome(case_args, seed)
            counts[word] += 1
            wall.append(seconds)
        good = (sum(n for w, n in counts.items() if w != "promote") if expected == "not promote"
                else counts[expected])
        listed = ", ".join(f"{w} {n}" for w, n in counts.most_common())
        print(f"{name:<14} {expected:<12} {listed:<44} {good:>5}/{len(args.seeds):<5} {sum(wall) / len(wall):7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
