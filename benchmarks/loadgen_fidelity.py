"""How faithfully the Locust runner measures: client-side figures against the simulator's own record.

Runs the real bench runner (real Locust, two `sglab sim` servers of a stack, real time) at
concurrency 1, 16 and 64 (then, as a yardstick, a minimal asyncio client at the same concurrency),
and scrapes each server's Prometheus histograms around every level. The
server observes every token exactly as the client counts it (a chunk of k tokens = k gaps of Δt/k),
so per arm and level it prints:

  decode tok/s   measured/true = server mean inter-token gap / client mean inter-token gap
  TTFT           measured/true = client mean TTFT / server mean TTFT (server: arrival -> first token)

plus, for reference, the timing model's steady-state decode rate (exact at concurrency 1, where no
other request's prefill interrupts decoding). Goal: within 1% at concurrency 1 and 16.

    .venv/bin/python benchmarks/loadgen_fidelity.py [--stack eagle-nccl-ll] [--rounds 2] [--round-s 4]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import locust  # noqa: F401  (gevent monkey-patching first)
import httpx
import raw_client

from sglab.config.arms import parse_launch_args
from sglab.config.loader import load_stack
from sglab.load.runner import BenchRequest, BenchRun, arm_infos
from sglab.load.schedule import plan_for
from sglab.load.targets import start_sims
from sglab.results.store import create_run_dir

HISTOGRAMS = ("time_to_first_token_seconds", "inter_token_latency_seconds")


def scrape(url: str) -> dict[str, tuple[float, float]]:
    """histogram name -> (sum, count) from the server's /metrics."""
    text = httpx.get(url + "/metrics", timeout=10).text
    out = {}
    for name in HISTOGRAMS:
        total = re.search(rf"^sglang:{name}_sum(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M)
        count = re.search(rf"^sglang:{name}_count(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M)
        out[name] = (float(total.group(1)), float(count.group(1))) if total and count else (0.0, 0.0)
    return out


def mean_between(before, after, name) -> float | None:
    s0, c0 = before[name]
    s1, c1 = after[name]
    return (s1 - s0) / (c1 - c0) if c1 > c0 else None


def model_rate(arm, level: int) -> float | None:
    """The simulator timing model's steady-state per-request decode tok/s for this arm at this batch."""
    from sglab.sim.cli_args import parse_or_exit
    from sglab.sim.testing import strip_host_port
    from sglab.sim.timing import steady_decode_tok_per_s

    config = parse_or_exit(["--host", "127.0.0.1", *strip_host_port(list(arm.args))], env=dict(arm.env))
    batch = min(level, int(parse_launch_args(arm.args).get("--max-running-requests", level)))
    return steady_decode_tok_per_s(config.profile, batch, config.spec, config.comm_factor)


class ScrapingRun(BenchRun):
    """The ordinary runner, with the servers' histograms read before and after every level."""

    rows: list[tuple] = []

    def run_level(self, level, progress, result):
        before = {arm: scrape(url) for arm, url in self.targets.urls.items()}
        start = len(self.levels)
        super().run_level(level, progress, result)
        after = {arm: scrape(url) for arm, url in self.targets.urls.items()}
        # warm-up requests are in the server's histograms too, so compare against all client requests
        lv = self.levels[start]
        for arm_spec in self.request.arms:
            arm = arm_spec.name
            samples = [s for s in lv.requests if s.arm == arm and s.error is None]
            gaps = [g for s in samples for g in s.itl_ms]
            client_itl = sum(gaps) / len(gaps)
            client_ttft = sum(s.ttft_ms for s in samples) / len(samples)
            server_itl = mean_between(before[arm], after[arm], "inter_token_latency_seconds") * 1000
            server_ttft = mean_between(before[arm], after[arm], "time_to_first_token_seconds") * 1000
            self.rows.append((level, "locust", arm, len(samples), 1000 / client_itl, 1000 / server_itl,
                              server_itl / client_itl, client_ttft, server_ttft, client_ttft / server_ttft,
                              model_rate(arm_spec, level)))
        # the yardstick: a minimal asyncio client, same prompts and load, right after
        for arm_spec in self.request.arms:
            url = self.targets.urls[arm_spec.name]
            before = scrape(url)
            raw = raw_client.run_subprocess(url, users=level, max_new_tokens=self.plan.max_new_tokens,
                                            requests_per_user=max(2, 16 // level))
            after = scrape(url)
            client_itl = sum(raw["itl_ms"]) / len(raw["itl_ms"])
            client_ttft = sum(raw["ttft_ms"]) / len(raw["ttft_ms"])
            server_itl = mean_between(before, after, "inter_token_latency_seconds") * 1000
            server_ttft = mean_between(before, after, "time_to_first_token_seconds") * 1000
            self.rows.append((level, "raw", arm_spec.name, raw["requests"], 1000 / client_itl, 1000 / server_itl,
                              server_itl / client_itl, client_ttft, server_ttft, client_ttft / server_ttft,
                              model_rate(arm_spec, level)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="eagle-nccl-ll")
    parser.add_argument("--levels", default="1,16,64")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--round-s", type=float, default=4.0)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args()
    loaded = load_stack(args.stack)
    plan = plan_for(loaded, overrides={"concurrency": [int(x) for x in args.levels.split(",")], "rounds": args.rounds,
                                       "round_duration_s": args.round_s, "max_new_tokens": args.max_new_tokens,
                                       "warmup_requests": 2})
    out = Path(tempfile.mkdtemp(prefix="sglab-fidelity-"))
    request = BenchRequest(loaded=loaded, plan=plan, out=out, progress=False)
    run_dir = create_run_dir(loaded.name, "fidelity", base=out)
    with start_sims(request.arms, log_dir=run_dir) as targets:
        run = ScrapingRun(request, targets, run_id="fidelity")
        infos = arm_infos(request, targets.urls)
        result = run.build_result(infos, [])
        run.execute(result, run_dir)
    print(f"loadgen fidelity: stack {loaded.name}, real time, {plan.rounds} rounds x {plan.round_duration_s:g} s "
          f"per arm per level, max_new_tokens {plan.max_new_tokens}, 1 Locust process (FastHttpUser)")
    print(f"{'conc':>4} {'client':<7} {'arm':<10} {'reqs':>5} | {'decode tok/s':>12} {'server':>8} {'meas/true':>9} | "
          f"{'TTFT ms':>8} {'server':>8} {'meas/true':>9} | {'model steady tok/s':>18}")
    for level, client, arm, n, dec, dec_true, dec_ratio, ttft, ttft_true, ttft_ratio, model in ScrapingRun.rows:
        print(f"{level:>4} {client:<7} {arm:<10} {n:>5} | {dec:>12.2f} {dec_true:>8.2f} {dec_ratio:>9.4f} | "
              f"{ttft:>8.2f} {ttft_true:>8.2f} {ttft_ratio:>9.4f} | {model:>18.2f}")
    print("decode meas/true = server mean gap / client mean gap; TTFT meas/true = client / server (HTTP + client "
          "overhead included); raw = a minimal asyncio+aiohttp client (benchmarks/raw_client.py), same prompts and "
          "concurrency, right after; model steady = the timing model with every running request decoding "
          "(no prefills)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
