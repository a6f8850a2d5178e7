"""How many streamed tokens per second one Locust process can consume, next to a minimal asyncio client.

One simulator with a zero-latency profile (every modelled duration 0: tokens come as fast as the server
can produce them) serves, in alternating turns within one run:

  raw      a minimal asyncio + aiohttp client: C concurrent streams, same SSE parsing (sglab's StreamParser)
  locust   `locust -f loadtests/locustfile.py --headless -u C` : one Locust process, FastHttpUser
  locust2  the same with `--processes 2` (Locust's master + 2 workers, the mechanism behind `--workers N`)

and prints tokens/s consumed, the CPU each load generator used (cores busy = CPU seconds / wall seconds)
and the simulator's CPU, so the limiting side is visible. Goal: locust >= 0.5 x raw.

    .venv/bin/python benchmarks/loadgen_capacity.py [--users 16] [--seconds 8] [--max-new-tokens 256] [--turns 2]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import raw_client

from sglab.sglang.env import without_server_env

ROOT = Path(__file__).resolve().parents[1]
ZERO_PROFILE = ",".join(f"{k}=0" for k in (
    "scheduler_overhead_ms", "target_fixed_compute_ms", "target_per_token_compute_ms", "target_fixed_comm_ms",
    "target_per_token_comm_ms", "verify_fixed_compute_ms", "verify_per_draft_token_compute_ms",
    "verify_fixed_comm_ms", "verify_per_draft_token_comm_ms", "draft_fixed_ms", "draft_per_token_ms",
    "prefill_fixed_ms", "prefill_per_token_ms", "draft_prefill_per_token_ms"))


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def turn(kind: str, url: str, users: int, seconds: float, max_new: int, sim_pid: int) -> dict:
    env = without_server_env(os.environ)
    cpu0, sim0, t0 = _children_cpu(), _cpu_of(sim_pid), time.perf_counter()
    if kind == "raw":
        summary = raw_client.run_subprocess(url, users=users, seconds=seconds, max_new_tokens=max_new)
        tokens, requests = summary["tokens"], summary["requests"]
        span = seconds
    else:
        prefix = Path(tempfile.mkdtemp(prefix="sglab-capacity-")) / "run"
        cmd = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "-u", str(users),
               "-r", str(users * 10), "-t", f"{seconds:g}s", "--csv", str(prefix), "--only-summary",
               "--baseline-url", url, "--max-new-tokens", str(max_new), "--loglevel", "WARNING", "BaselineUser"]
        if kind == "locust2":
            cmd[5:5] = ["--processes", "2"]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if not Path(f"{prefix}_stats.csv").exists():
            raise RuntimeError(f"locust wrote no stats ({proc.returncode}):\n{proc.stderr[-2000:]}")
        rows = {r["Name"]: r for r in csv.DictReader(open(f"{prefix}_stats.csv"))}
        ok = int(rows["baseline /generate"]["Request Count"]) - int(rows["baseline /generate"]["Failure Count"])
        tokens, requests = ok * max_new, ok
        span = seconds
    wall = time.perf_counter() - t0
    return {"kind": kind, "tok_per_s": tokens / span, "requests": requests,
            "client_cores": (_children_cpu() - cpu0) / wall, "sim_cores": (_cpu_of(sim_pid) - sim0) / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--turns", type=int, default=2)
    args = parser.parse_args()

    from sglab.config.arms import baseline_arm
    from sglab.config.loader import load_stack
    from sglab.load.targets import start_sim, wait_healthy

    arm = baseline_arm(load_stack("eagle-nccl-ll").config)
    sim = start_sim(arm, extra_env={"SGLAB_SIM_SET": ZERO_PROFILE, "SGLAB_SIM_SPIN_MS": "0"})
    try:
        wait_healthy(sim.url, process=sim.process)
        results = []
        for _ in range(args.turns):
            for kind in ("raw", "locust", "locust2"):
                results.append(turn(kind, sim.url, args.users, args.seconds, args.max_new_tokens, sim.process.pid))
    finally:
        sim.process.terminate()
        sim.process.wait(timeout=10)
    print(f"loadgen capacity: zero-latency sim, {args.users} concurrent streams, {args.max_new_tokens} tokens/request, "
          f"{args.seconds:g} s per turn, {args.turns} alternating turns, {os.cpu_count()} CPUs")
    print(f"{'client':<8} {'tok/s':>9} {'requests':>9} {'client cores':>13} {'sim cores':>10}")
    for r in results:
        print(f"{r['kind']:<8} {r['tok_per_s']:>9.0f} {r['requests']:>9} {r['client_cores']:>13.2f} "
              f"{r['sim_cores']:>10.2f}")
    mean = {k: sum(r["tok_per_s"] for r in results if r["kind"] == k) / args.turns
            for k in ("raw", "locust", "locust2")}
    print(f"mean tok/s: raw {mean['raw']:.0f}, locust {mean['locust']:.0f} ({mean['locust'] / mean['raw']:.2f} x raw), "
          f"locust --processes 2 {mean['locust2']:.0f} ({mean['locust2'] / mean['raw']:.2f} x raw)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
