"""--speculative-adaptive vs static 1 / 3 / 7 steps on `sglab sim`: per-request decode tok/s by content.

One fresh simulator per (arm, content); the adaptive arms keep SGLang's default config (candidate steps
[1, 3, 7], EMA 0.2, warm-up 10, interval 5) and start at 3 or 7 steps. Per concurrency, one unmeasured round
lets the EMA settle (the tier then carries on, as on a server that has seen this traffic), then `rounds`
rounds of c parallel streamed chat requests (ignore_eos) are measured: decode tok/s = (tokens - 1) /
(last - first content chunk), divided by the time scale. "tier" is sglang:spec_num_steps after the run
(a snapshot), "sw" the adaptive arm's tier switches so far (/server_info); "model" is the timing model's steady
rate at that tier (sglab.sim.timing, the content's E[a]).
Contents: the calibrated random text, suite prompts of two categories, and two synthetic extremes (random
text with every p_i set by --sim-set) that show where the tier goes.

Usage: .venv/bin/python benchmarks/adaptive_sim.py [--tokens 256] [--rounds 4] [--time-scale 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time

import aiohttp

from sglab.load.datasets import load_suite
from sglab.sim.acceptance import ContentAcceptance
from sglab.sim.profile import load_profile, parse_overrides
from sglab.sim.testing import running_sim
from sglab.sim.timing import SpecSetup, iteration_ms
from sglab.sim.tokens import make_prompt

COMMON = ["--model-path", "/shared/kimi-k2.5-int4", "--tp-size", "8", "--disable-custom-all-reduce",
          "--max-running-requests", "48", "--enable-metrics", "--speculative-algorithm", "EAGLE3",
          "--speculative-draft-model-path", "/shared/kimi-k2.5-eagle3", "--speculative-eagle-topk", "1"]
ARMS = {"static 1": (1, False), "static 3": (3, False), "static 7": (7, False),
        "adaptive from 3": (3, True), "adaptive from 7": (7, True)}
CONTENTS = {  # name -> (suite category or None for random text, --sim-set overrides)
    "random (calibrated)": (None, ""),
    "code (suite)": ("code", ""),
    "translation (suite)": ("translation", ""),
    "high p_i = 0.95": (None, "accept_prob_by_position=[0.95,0.95,0.95,0.95,0.95],accept_prob_tail=0.95"),
    "low p_i = 0.1": (None, "accept_prob_by_position=[0.1,0.1,0.1,0.1,0.1],accept_prob_tail=0.1"),
}


def gauge(text: str, name: str) -> float:
    match = re.search(rf"^sglang:{name}{{[^}}]*}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else float("nan")


async def one(session: aiohttp.ClientSession, url: str, messages: list[dict], tokens: int, scale: float) -> float:
    body = {"model": "m", "messages": messages, "max_tokens": tokens, "ignore_eos": True, "stream": True}
    stamps = []
    async with session.post(url + "/v1/chat/completions", json=body) as response:
        async for raw in response.content:
            line = raw.decode().strip()
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                stamps.append(time.perf_counter())
    return (tokens - 1) / (stamps[-1] - stamps[0]) / scale


async def measure(url: str, prompts: list[list[dict]], concurrency: int, rounds: int, tokens: int,
                  scale: float) -> list[float]:
    rates: list[float] = []
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for round_no in range(rounds + 1):  # round 0 settles the EMA and is not counted
            batch = [prompts[(round_no * concurrency + i) % len(prompts)] for i in range(concurrency)]
            got = await asyncio.gather(*(one(session, url, m, tokens, scale) for m in batch))
            if round_no:
                rates += got
    return rates


def model_rate(overrides: str, category: str | None, steps: int, concurrency: int) -> float:
    profile = load_profile("default", parse_overrides(overrides))
    spec = SpecSetup(steps, 1, steps + 1)
    acceptance = ContentAcceptance(profile.accept_prob_by_position, profile.accept_prob_tail, depth=spec.depth)
    e_a = acceptance.model(category or "random", True).expected_accept_length()
    return e_a * 1000.0 / iteration_ms(profile, concurrency, spec, 1.0)


def prompts_for(category: str | None) -> list[list[dict]]:
    if category is None:
        return [[{"role": "user", "content": make_prompt(64 + i)}] for i in range(16)]
    return [[{"role": "user", "content": r.text}] for r in load_suite() if r.category == category][:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=4, help="measured rounds at c=1 (c=16: half, at least 1)")
    parser.add_argument("--time-scale", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    env = {"SGLAB_SIM_TIME_SCALE": str(args.time_scale)}
    print(f"sglab sim --speculative-adaptive benchmark, {time.strftime('%Y-%m-%d %H:%M:%S')}, python "
          f"{sys.version.split()[0]}; EAGLE-3 topk 1, default NCCL, {args.tokens} tokens (ignore_eos), chat route, "
          f"time scale {args.time_scale}; per-request decode tok/s (median), settled tier, model at that tier")
    for content, (category, overrides) in CONTENTS.items():
        prompts = prompts_for(category)
        results: dict[str, dict[int, tuple[float, float, int, float]]] = {}
        for arm, (steps, adaptive) in ARMS.items():
            argv = COMMON + ["--speculative-num-steps", str(steps), "--speculative-num-draft-tokens", str(steps + 1)]
            argv += ["--speculative-adaptive"] if adaptive else []
            argv += ["--sim-set", overrides] if overrides else []
            results[arm] = {}
            with running_sim(argv, env) as url:
                for c in args.concurrency:
                    rounds = args.rounds if c == 1 else max(1, args.rounds // 2)
                    rates = asyncio.run(measure(url, prompts, c, rounds, args.tokens, args.time_scale))
                    metrics = asyncio.run(_get(url + "/metrics"))
                    tier = gauge(metrics, "spec_num_steps")
                    info = json.loads(asyncio.run(_get(url + "/server_info")))
                    switches = (info["sglab_sim"]["speculative"]["adaptive"] or {}).get("switches", 0)
                    results[arm][c] = (statistics.median(rates), tier, switches,
                                       model_rate(overrides, category, int(tier), c))
        print(f"\n{content}")
        print("   arm                " + "".join(f"  c={c:<3} tok/s tier  sw  model" for c in args.concurrency))
        for arm, by_c in results.items():
            cells = "".join(f"  {rate:9.1f} {tier:4.0f} {sw:3d} {model:6.1f}"
                            for rate, tier, sw, model in by_c.values())
            print(f"   {arm:<18}{cells}")
    return 0


async def _get(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.text()


if __name__ == "__main__":
    raise SystemExit(main())
