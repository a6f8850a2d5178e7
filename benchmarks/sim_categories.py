"""Per-category acceptance of `sglab sim`, measured by a real client against the simulator's truth.

Sends the bundled prompt suite (chat endpoint, fixed length with ignore_eos) to an EAGLE-3 simulator and
measures each category's accept length two ways: from the requests' own `sglext.spec_tokens_details`
(1 + Σ correct drafts / Σ verify passes, the per-cycle mean) and from the /metrics window
(Δ generation_tokens_total / Δ spec_verify_calls_total, SGLang's definition, which also counts the
prefill's token). Truth: the category's E[a] from sglab.sim.acceptance. Also: the share of suite prompts
the simulator classifies as their label, and the natural-stop lengths per category.

Usage: .venv/bin/python benchmarks/sim_categories.py [--steps 5] [--per-category 40] [--tokens 256]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections import Counter, defaultdict

import aiohttp

from sglab.load.datasets import SUITE_CATEGORIES, load_suite
from sglab.sim.acceptance import ContentAcceptance
from sglab.sim.tokens import classify
from sglab.sim.profile import SimProfile
from sglab.sim.testing import running_sim

COMMON = ["--model-path", "/shared/kimi-k2.5-int4", "--tp-size", "8", "--disable-custom-all-reduce",
          "--max-running-requests", "48", "--enable-metrics", "--speculative-algorithm", "EAGLE3",
          "--speculative-draft-model-path", "/shared/kimi-k2.5-eagle3", "--speculative-eagle-topk", "1"]
CONCURRENCY = 8


def counter(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def run_category(session: aiohttp.ClientSession, url: str, records, tokens: int) -> dict:
    before = await (await session.get(url + "/metrics")).text()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(record) -> dict:
        body = {"model": "m", **record.chat_body(), "max_tokens": tokens, "return_spec_tokens_details": True}
        async with gate, session.post(url + "/v1/chat/completions", json=body) as response:
            return (await response.json())["sglext"]["spec_tokens_details"]

    details = await asyncio.gather(*(one(r) for r in records))
    after = await (await session.get(url + "/metrics")).text()
    verify = sum(d["spec_verify_ct"] for d in details)
    window = (counter(after, "sglang:generation_tokens_total") - counter(before, "sglang:generation_tokens_total")) / (
        counter(after, "sglang:spec_verify_calls_total") - counter(before, "sglang:spec_verify_calls_total"))
    return {"cycles": verify, "client": 1 + sum(d["spec_num_correct_drafts"] for d in details) / verify,
            "window": window}


async def natural_lengths(session: aiohttp.ClientSession, url: str, records) -> list[int]:
    out = []
    for record in records:
        body = {"model": "m", **record.chat_body(natural_stop=True)}
        async with session.post(url + "/v1/chat/completions", json=body) as response:
            out.append((await response.json())["usage"]["completion_tokens"])
    return out


async def main_async(args: argparse.Namespace) -> int:
    suite = load_suite()
    hits = Counter(classify(r.text) == r.category for r in suite)
    print(f"classifier: {hits[True]}/{len(suite)} suite prompts classified as their label "
          f"({hits[True] / len(suite):.1%})")
    profile = SimProfile()
    truth = ContentAcceptance(profile.accept_prob_by_position, profile.accept_prob_tail, depth=args.steps)
    shape = ["--speculative-num-steps", str(args.steps), "--speculative-num-draft-tokens", str(args.steps + 1)]
    by_category = defaultdict(list)
    for record in suite:
        by_category[record.category].append(record)
    print(f"\nEAGLE-3 {args.steps}/1/{args.steps + 1}, chat endpoint, {args.tokens} tokens (ignore_eos), "
          f"{args.per_category} prompts per category, concurrency {CONCURRENCY}, time scale {args.time_scale}")
    print(f"   {'category':14s} {'truth E[a]':>10s} {'client':>8s} {'err':>7s} {'/metrics':>9s} {'cycles':>7s}"
          f"   natural stop tokens (min/mean/max of {args.natural})")
    worst = 0.0
    with running_sim(COMMON + shape, {"SGLAB_SIM_TIME_SCALE": str(args.time_scale)}) as url:
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for category in SUITE_CATEGORIES:
                records = by_category[category][:args.per_category]
                measured = await run_category(session, url, records, args.tokens)
                expected = truth.model(category, True).expected_accept_length()
                error = measured["client"] / expected - 1
                worst = max(worst, abs(error))
                lengths = await natural_lengths(session, url, by_category[category][:args.natural])
                print(f"   {category:14s} {expected:10.3f} {measured['client']:8.3f} {error:+7.2%} "
                      f"{measured['window']:9.3f} {measured['cycles']:7d}   "
                      f"{min(lengths)} / {sum(lengths) / len(lengths):.0f} / {max(lengths)}")
    print(f"\nworst |client / truth - 1| = {worst:.2%}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--per-category", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--natural", type=int, default=10)
    parser.add_argument("--time-scale", type=float, default=20.0)
    started = time.time()
    code = asyncio.run(main_async(parser.parse_args()))
    print(f"({time.time() - started:.0f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
