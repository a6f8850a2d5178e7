"""How faithfully each load profile realises its arrival process, and what the client's decode tok/s is worth.

Runs the real bench runner (real Locust, in one process) against two `sglab sim` servers of a stack at
a time scale, for each profile at three loads (default c = 1, 16, 64):

  concurrency  closed loop, c users; check: time-averaged requests in flight inside each round's
               window vs the target c.
  rate         open loop at lambda_c = round(c / E[e2e_c]) req/s (Little's law, E[e2e_c] = the mean
               wall e2e the concurrency run just measured at c, both arms pooled), so about c requests
               are in flight; Poisson, and constant. Checks: requests sent per second of window vs the
               requested rate (includes the schedule's own sampling noise), the realised mean gap vs
               the seeded schedule's mean gap (the client's own error), KS distance of the realised inter-arrival gaps
               from Exp(lambda) (next to the schedule's own distance and the 5% critical value 1.36/sqrt(n)),
               or for constant arrivals the mean |gap - 1/lambda|; start-time lateness vs the schedule.
  trace        a generated trace of Poisson arrivals at lambda_c (another seed), max_new_tokens each,
               written to a temp file, replayed with trace.time-scale = the sims' time scale;
               check: start-time lateness vs the trace's schedule; in flight averaged from the
               round's start to the trace's last arrival.

Lateness = actual start - scheduled start, both relative to the segment's opening, samples and
schedule both sorted (warm-ups excluded). For every point, decode tok/s measured by the client
(1000 / its mean inter-token gap, all the level's requests) vs the simulator's truth (its own
`inter_token_latency_seconds` histogram scraped around the level: it observes every token as the
client counts it). tok/s are wall-clock, i.e. at the sims' time scale. The open-loop profiles get
max-in-flight 256 so the cap never shapes the arrivals.

    .venv/bin/python benchmarks/profile_fidelity.py [--stack eagle-nccl-ll] [--levels 1,16,64]
        [--rounds 2] [--round-s 2.5] [--time-scale 5] [--max-new-tokens 128]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import locust  # noqa: F401  (gevent monkey-patching first)
from loadgen_fidelity import mean_between, scrape

from sglab.config.loader import load_stack
from sglab.load.runner import BenchRequest, BenchRun, arm_infos
from sglab.load.schedule import plan_for
from sglab.load.targets import start_sims
from sglab.results.store import create_run_dir

MAX_IN_FLIGHT = 256
WORDS = ("alpha beta gamma delta river stone cloud paper engine garden window number letter bridge "
         "summer winter signal copper orange silver market planet season button").split()


class ProfileRun(BenchRun):
    """The ordinary runner; records the server's ITL mean around every level next to the level's samples."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.truth: dict[tuple[int, str], float] = {}  # (level, arm) -> server mean gap, ms

    def run_level(self, level, progress, result):
        before = {arm: scrape(url) for arm, url in self.targets.urls.items()}
        super().run_level(level, progress, result)
        after = {arm: scrape(url) for arm, url in self.targets.urls.items()}
        for arm in self.targets.urls:
            self.truth[(level, arm)] = mean_between(before[arm], after[arm], "inter_token_latency_seconds") * 1000


def run_profile(loaded, targets, out: Path, name: str, overrides: dict) -> ProfileRun:
    plan = plan_for(loaded, overrides=overrides)
    request = BenchRequest(loaded=loaded, plan=plan, out=out, progress=False)
    run_dir = create_run_dir(loaded.name, name, base=out)
    run = ProfileRun(request, targets, run_id=name)
    result = run.build_result(arm_infos(request, targets.urls), [])
    run.execute(result, run_dir)
    if not result.complete:
        raise SystemExit(f"{name}: run incomplete: {result.incomplete_reason}")
    return run


def segments(level_result):
    """(round, sorted non-warm-up samples) per measured segment."""
    for rnd in level_result.rounds:
        if rnd.warmup:
            continue
        samples = sorted((s for s in level_result.requests if s.arm == rnd.arm and s.round_index == rnd.round_index
                          and not s.warmup), key=lambda s: s.start_s)
        yield rnd, samples


def in_flight_mean(rnd, samples, window_s: float | None = None) -> float | None:
    """Time-averaged requests in flight over the round's window (start -> gate closed, or `window_s`)."""
    window = window_s or rnd.window_s
    if not window:
        return None
    lo, hi = rnd.started_at_s, rnd.started_at_s + window
    busy = sum(max(0.0, min(hi, s.start_s + (s.e2e_ms or 0) / 1000) - max(lo, s.start_s)) for s in samples)
    return busy / (hi - lo)


def decode(run: ProfileRun, level: int, level_result) -> tuple[float, float]:
    """(client tok/s, server tok/s), both arms pooled by token count."""
    gaps = [g for s in level_result.requests if s.error is None for g in s.itl_ms]
    client_gap = sum(gaps) / len(gaps)
    counts = {arm: sum(len(s.itl_ms) for s in level_result.requests if s.arm == arm and s.error is None)
              for arm in run.targets.urls}
    server_gap = sum(run.truth[(level, arm)] * n for arm, n in counts.items()) / sum(counts.values())
    return 1000 / client_gap, 1000 / server_gap


def ks_exponential(gaps: list[float], rate: float) -> float:
    """Kolmogorov-Smirnov distance of the gaps' empirical CDF from Exp(rate)."""
    xs = sorted(gaps)
    n = len(xs)
    return max(max((i + 1) / n - (1 - math.exp(-rate * x)), (1 - math.exp(-rate * x)) - i / n)
               for i, x in enumerate(xs))


def lateness_and_gaps(run: ProfileRun, level: int, level_result):
    """Lateness (ms) of every start vs its schedule; realised and scheduled inter-arrival gaps (s); spans."""
    late, real_gaps, sched_gaps, spans = [], [], [], [0.0, 0.0, 0]
    for rnd, samples in segments(level_result):
        pacing = run.profile.pacing(level, rnd.round_index)
        offsets = [pacing.start_offset_s(i) for i in range(len(samples))]
        starts = [s.start_s - rnd.started_at_s for s in samples]
        late += [1000 * (a - b) for a, b in zip(starts, offsets)]
        real_gaps += [b - a for a, b in zip(starts, starts[1:])]
        sched_gaps += [b - a for a, b in zip(offsets, offsets[1:])]
        if len(samples) > 1:
            spans[0] += starts[-1] - starts[0]
            spans[1] += offsets[-1] - offsets[0]
            spans[2] += len(samples) - 1
    return late, real_gaps, sched_gaps, spans


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def open_loop_check(run, level, level_result, rate, arrival) -> tuple[str, float]:
    late, real, sched, (real_span, sched_span, n_gaps) = lateness_and_gaps(run, level, level_result)
    rounds = [(r, s) for r, s in segments(level_result)]
    counted = sum(len(s) for _, s in rounds) / sum(r.window_s for r, _ in rounds)
    text = (f"sent/window {counted:.2f}/s = {counted / rate:.3f} x requested; gap-mean realised/schedule "
            f"{sched_span / real_span:.4f}; ")
    if arrival == "poisson":
        text += (f"KS {ks_exponential(real, rate):.3f} (schedule {ks_exponential(sched, rate):.3f}, "
                 f"5% crit {1.36 / math.sqrt(len(real)):.3f}); ")
    else:
        text += f"mean |gap-1/rate| {1000 * statistics.mean(abs(g - 1 / rate) for g in real):.2f} ms; "
    text += f"late ms p50 {pct(late, .5):.1f} p90 {pct(late, .9):.1f} max {max(late):.1f} min {min(late):.1f}"
    return text, statistics.mean(x for x in (in_flight_mean(r, s) for r, s in segments(level_result)) if x is not None)


def write_trace(path: Path, rate: float, duration_s: float, tokens: int, seed: str) -> int:
    """Poisson arrivals at `rate` per (simulated) second over `duration_s`; returns the number of requests."""
    rng = random.Random(seed)
    stamp, lines = 0.0, []
    while stamp < duration_s:
        prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(16, 48)))
        lines.append(json.dumps({"timestamp_s": round(stamp, 6), "prompt": prompt, "output_tokens": tokens}))
        stamp += rng.expovariate(rate)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="eagle-nccl-ll")
    parser.add_argument("--levels", default="1,16,64")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--round-s", type=float, default=2.5)
    parser.add_argument("--time-scale", type=float, default=5.0)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    loaded = load_stack(args.stack)
    common = {"rounds": args.rounds, "ungated_rounds": args.rounds, "round_duration_s": args.round_s,
              "max_new_tokens": args.max_new_tokens, "warmup_requests": 2}
    out = Path(tempfile.mkdtemp(prefix="sglab-profile-fidelity-"))
    rows: list[tuple] = []
    t_start = time.monotonic()
    with start_sims(BenchRequest(loaded=loaded, plan=plan_for(loaded)).arms,
                    extra_env={"SGLAB_SIM_TIME_SCALE": f"{args.time_scale:g}"}, log_dir=out) as targets:
        run = run_profile(loaded, targets, out, "concurrency", {**common, "profile": "concurrency",
                                                                "concurrency": levels})
        rates = {}
        for level, lv in zip(levels, run.levels):
            e2e_s = statistics.mean(s.e2e_ms / 1000 for s in lv.requests if s.error is None and not s.warmup)
            rates[level] = max(1, round(level / e2e_s))
            flights = [x for x in (in_flight_mean(r, s) for r, s in segments(lv)) if x is not None]
            client, server = decode(run, level, lv)
            rows.append(("concurrency", level, f"c={level}", sum(1 for s in lv.requests if not s.warmup),
                         statistics.mean(flights), client, server,
                         f"in flight {statistics.mean(flights):.2f} / {level} (min round {min(flights):.2f}); "
                         f"E[e2e] {1000 * e2e_s:.0f} ms -> rate {rates[level]}/s"))
        for arrival in ("poisson", "constant"):
            run = run_profile(loaded, targets, out, f"rate-{arrival}",
                              {**common, "profile": "rate", "rate.levels": [rates[c] for c in levels],
                               "rate.arrival": arrival, "rate.max_in_flight": MAX_IN_FLIGHT})
            for level, lv in zip(levels, run.levels):
                rate = rates[level]
                text, flight = open_loop_check(run, rate, lv, rate, arrival)
                client, server = decode(run, rate, lv)
                rows.append((f"rate {arrival}", level, f"{rate}/s", sum(1 for s in lv.requests if not s.warmup),
                             flight, client, server, text))
        for level in levels:
            trace = out / f"trace-c{level}.jsonl"
            sim_rate = rates[level] / args.time_scale  # the trace is in the sims' own (unscaled) seconds
            n = write_trace(trace, sim_rate, 0.9 * args.round_s * args.time_scale, args.max_new_tokens,
                            f"trace:{level}")
            run = run_profile(loaded, targets, out, f"trace-c{level}",
                              {**common, "profile": "trace", "trace.file": str(trace),
                               "trace.time_scale": args.time_scale, "trace.max_in_flight": MAX_IN_FLIGHT})
            (lv,) = run.levels
            late, *_ = lateness_and_gaps(run, 1, lv)
            last_s = run.profile.pacing(1, 0).offsets_s[-1]  # in flight while the trace sends (not its drain)
            flight = statistics.mean(in_flight_mean(r, s, last_s) for r, s in segments(lv))
            client, server = decode(run, 1, lv)
            rows.append(("trace", level, f"{n} req", sum(1 for s in lv.requests if not s.warmup), flight,
                         client, server, f"late ms p50 {pct(late, .5):.1f} p90 {pct(late, .9):.1f} "
                         f"max {max(late):.1f} min {min(late):.1f}"))
    wall = time.monotonic() - t_start
    print(f"profile fidelity: stack {loaded.name}, sims at time scale {args.time_scale:g}, {args.rounds} rounds x "
          f"{args.round_s:g} s per arm per point, max_new_tokens {args.max_new_tokens}, 2 warm-ups, "
          f"1 Locust process; {wall:.0f} s wall")
    print(f"{'profile':<13} {'c':>3} {'level':>8} {'reqs':>5} {'in-flight':>9} | {'decode tok/s':>12} "
          f"{'sim truth':>9} {'err':>7} | arrival process")
    for profile, level, label, n, flight, client, server, text in rows:
        print(f"{profile:<13} {level:>3} {label:>8} {n:>5} {flight:>9.2f} | {client:>12.2f} {server:>9.2f} "
              f"{100 * (client / server - 1):>+6.2f}% | {text}")
    print("decode: 1000 / mean inter-token gap over the level's requests (both arms, warm-ups included), client vs "
          "the sims' inter_token_latency_seconds histogram; in-flight: time-averaged over the rounds' windows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
