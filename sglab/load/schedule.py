"""The interleaved schedule: which plan a run uses, the per-round arm order and prompt offsets.

Both come from the plan's seed, so a run can be replayed exactly; every arm of a round starts at
the same prompt offset, so the arms see the same prompts in the same order.
"""

from __future__ import annotations

import random
from typing import Any

from sglab.config.loader import LoadedStack
from sglab.config.loadplan import LoadPlan

# --quick: a CI-sized run (about two minutes on 2 cores); every other setting comes from the stack.
# max_new_tokens stays the stack's: shorter requests would change what is measured (the last verify
# cycle of a request is cut at max_new_tokens, which costs a speculating arm more on short outputs).
QUICK_PLAN: dict[str, Any] = {"concurrency": [1, 4], "rounds": 20, "ungated_rounds": 4, "round_duration_s": 0.9,
              "round_requests": None, "warmup_requests": 1}
# ...and simulators run 10x faster (recorded as target.time_scale): in real time, 9 s per arm at
# concurrency 1 holds too few verify cycles to tell a +3% gain from acceptance noise (95% CI about
# +-9%); at 10x the same minute separates eagle-nccl-ll from eagle-default and A/A (20 rounds at the
# gated level: 10 left eagle-nccl-ll's lower bound too close to the minimum to decide every time). At 20x latency tails
# (TTFT p99) turn to jitter. Measurements in docs/load.md. Real servers are
# never scaled.
QUICK_SIM_TIME_SCALE = 10.0


def plan_for(loaded: LoadedStack, *, quick: bool = False, overrides: dict | None = None) -> LoadPlan:
    """The stack's load plan, with the --quick preset and explicit command-line overrides applied.

    Overrides of the profiles' own sections are dotted (`rate.levels`, `trace.file`).
    """
    data = loaded.config.load.model_dump()
    if quick:
        data.update(QUICK_PLAN)
        levels = set(QUICK_PLAN["concurrency"]) | set(loaded.config.policy.levels)
        data["concurrency"] = sorted(levels)
        data["rate"] = {**data["rate"], "levels": sorted(levels)}  # the same levels, read as requests/s
    overrides = dict(overrides or {})
    source = overrides.get("prompts.source")
    if source is not None and source != data["prompts"]["source"]:
        # Another prompt source: the stack's file, categories and limit were for its own, and the endpoint
        # the model derived from it is derived again (an endpoint the stack writes holds, as in the file).
        data["prompts"] = {k: v for k, v in data["prompts"].items() if k not in ("file", "categories", "limit")}
        if "endpoint" not in loaded.raw.get("load", {}):
            data.pop("endpoint")
    for key in [k for k in overrides if "." in k]:
        value = overrides.pop(key)
        section, field = key.split(".", 1)
        if value is not None:
            data[section] = {**data[section], field: value}
    for key, value in overrides.items():
        if value is not None or key in ("round_duration_s", "round_requests"):
            data[key] = value
    if overrides and overrides.get("round_requests") is not None and "round_duration_s" not in overrides:
        data["round_duration_s"] = None
    if overrides and overrides.get("round_duration_s") is not None and "round_requests" not in overrides:
        data["round_requests"] = None
    return LoadPlan.model_validate(data)


def round_orders(arms: list[str], seed: int, level: int, rounds: int) -> list[list[str]]:
    """Arm order per round: seeded, and balanced so no arm keeps the same slot for a streak of rounds.

    Rounds come in blocks of len(arms); a block holds every rotation of a seeded permutation once, in
    a seeded order, so each arm runs in each position equally often (a drift in the servers or the
    machine over time cannot favour one arm).
    """
    rng = random.Random(f"order:{seed}:{level}")
    base = list(arms)
    rng.shuffle(base)
    rotations = [base[i:] + base[:i] for i in range(len(base))]
    orders: list[list[str]] = []
    while len(orders) < rounds:
        block = [list(r) for r in rotations]
        rng.shuffle(block)
        orders += block
    return orders[:rounds]


def prompt_offset(seed: int, level: int, round_index: int, count: int) -> int:
    return random.Random(f"prompts:{seed}:{level}:{round_index}").randrange(max(1, count))
