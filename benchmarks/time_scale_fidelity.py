"""Does the simulator's time scale change what a benchmark concludes? Gains and accept lengths per time scale.

Runs the same A/B of one stack (default eagle-nccl-ll) with `sglab bench --target sim --time-scale S` for
each scale, in one run, fixed rounds (paired-t, so every scale gets the same number of rounds), and
prints side by side per concurrency level: the decode and output gains with their 95% intervals, the
candidate's accept length, and the difference to the reference scale (1 unless --scales says otherwise)
with a 95% interval of that difference. "same" means the interval of the difference holds 0: within
the noise of this many rounds; "NOISY" means it holds 0 only because this scale's own interval blew up (more
than 3x the reference's: per-round values that are the load generator's scheduling noise). The allowed
range of `--time-scale` and its limit on streams x scale (sglab/sglang/sim_knobs.py) are where every level
stays "same"; docs/simulator.md, "Time scale", records the runs.

Usage: .venv/bin/python benchmarks/time_scale_fidelity.py [--scales 1,3,10,30] [--levels 1,4,16]
       [--rounds 8] [--round-s 3] [--stack eagle-nccl-ll] [--repeat 1]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sglab.analysis.verdict import judge
from sglab.core.paths import project_root, stack_path
from sglab.results.store import load_result

Z95 = 1.96


@dataclass
class Point:
    scale: float
    level: int
    decode: tuple[float, float, float]  # estimate, low, high
    output: tuple[float, float, float]
    accept_length: float | None
    decode_se: float
    output_se: float


def _se(low: float | None, high: float | None) -> float:
    if low is None or high is None:
        return math.inf
    return (math.log1p(high) - math.log1p(low)) / (2 * Z95)


def _stack_dir(stack: str, tmp: Path, gated: int) -> Path:
    """The stack with fixed rounds (paired-t: a sequential gate would stop each scale at a different round),
    gating the first measured level (bench refuses a run that skips the gated level)."""
    stacks = tmp / "stacks"
    stacks.mkdir()
    text = stack_path(stack, project_root()).read_text(encoding="utf-8")
    policy = f"    method: paired-t\n    levels: [{gated}]\n"
    marker = "  sglab:policy:\n"
    if marker in text:
        text = text.replace(marker, marker + policy, 1)
    else:
        text = text.rstrip("\n") + "\n" + marker + policy
    (stacks / f"Pulumi.{stack}.yaml").write_text(text, encoding="utf-8")
    return stacks


def bench_once(argv: list[str]) -> None:
    """Child process: one `sglab bench` at the time scale given last in argv. Outside the allowed range the
    simulators get the behaviour-test opt-in (the CLI refuses such a scale: this script shows why)."""
    from sglab.cli.bench import build_request, register
    from sglab.sglang.sim_knobs import knob

    scale = argv.pop()
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    request = build_request(parser.parse_args(["bench", *argv]))
    request.sim_env.update({"SGLAB_SIM_TIME_SCALE": scale, knob("allow_unfaithful_time_scale").env: "1"})
    import locust  # noqa: F401  (gevent's patching before the runner)

    from sglab.load.runner import run_bench

    _, run_dir = run_bench(request)
    print(run_dir)


def measure(stack: str, scale: float, args: argparse.Namespace, stacks: Path, out: Path) -> list[Point]:
    env = {**os.environ, "SGLAB_STACKS_DIR": str(stacks)}
    command = [sys.executable, __file__, "--child", "--stack", stack, "--target", "sim",
               "--concurrency", args.levels, "--rounds", str(args.rounds), "--ungated-rounds", str(args.rounds),
               "--round-s", f"{args.round_s:g}", "--out", str(out), "--no-progress", f"{scale:g}"]
    started = time.monotonic()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        sys.exit(f"time scale {scale:g}: the bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    verdict = judge(load_result(run_dir))
    print(f"  time scale {scale:g}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    points = []
    for lv in verdict.levels:
        d, o = lv.decode, lv.output
        points.append(Point(scale, lv.concurrency, (d.estimate, d.low, d.high), (o.estimate, o.low, o.high),
                            lv.economics.accept_length, _se(d.low, d.high), _se(o.low, o.high)))
    shutil.rmtree(run_dir, ignore_errors=True)
    return points


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:+.1%}"


NOISE_GROWTH = 3.0  # an interval this many times the reference's (and over +-2.5%): the client, not the model


def _difference(point: Point, ref: Point, which: str) -> tuple[str, str]:
    """(difference text, verdict): 'yes' (the difference's interval holds 0), 'NO' (it does not), 'NOISY' (it
    does, but only because this scale's interval blew up: its per-round values are scheduling noise)."""
    a, b = getattr(point, which)[0], getattr(ref, which)[0]
    own, theirs = getattr(point, which + "_se"), getattr(ref, which + "_se")
    se = math.hypot(own, theirs)
    if a is None or b is None or not math.isfinite(se):
        return "n/a", "NO"
    delta = math.log1p(a) - math.log1p(b)
    if abs(delta) > Z95 * se:
        verdict = "NO"
    elif own > NOISE_GROWTH * theirs and Z95 * own > 0.025:
        verdict = "NOISY"
    else:
        verdict = "yes"
    return f"{math.expm1(delta):+.1%} ±{math.expm1(Z95 * se):.1%}", verdict


def report(points: list[Point], reference: float) -> None:
    levels = sorted({p.level for p in points})
    head = (f"{'level':>5} {'scale':>6} | {'decode gain':>11} {'95% CI':>17} | {'output gain':>11} {'95% CI':>17} | "
            f"{'accept':>6} | {'decode Δ vs ref':>16} {'output Δ vs ref':>16} | same")
    print(head)
    print("-" * len(head))
    for level in levels:
        ref = next(p for p in points if p.level == level and p.scale == reference)
        for p in sorted((p for p in points if p.level == level), key=lambda p: p.scale):
            dd, dsame = _difference(p, ref, "decode")
            od, osame = _difference(p, ref, "output")
            accept = f"{p.accept_length:.2f}" if p.accept_length is not None else "-"
            worst = "NO" if "NO" in (dsame, osame) else "NOISY" if "NOISY" in (dsame, osame) else "yes"
            same = "ref" if p.scale == reference else worst
            print(f"{level:>5} {p.scale:>6g} | {_pct(p.decode[0]):>11} [{_pct(p.decode[1])}, {_pct(p.decode[2])}] | "
                  f"{_pct(p.output[0]):>11} [{_pct(p.output[1])}, {_pct(p.output[2])}] | {accept:>6} | "
                  f"{dd:>16} {od:>16} | {same}")
        print()


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        bench_once(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="eagle-nccl-ll")
    parser.add_argument("--scales", default="1,0.25,3,10,30",
                        help="comma-separated time scales, the first is the reference (default: the allowed range "
                             "0.25 to 10 and 30, beyond it)")
    parser.add_argument("--levels", default="1,4,16")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--round-s", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=1, help="passes over the scales (interleaved)")
    args = parser.parse_args()
    scales = [float(s) for s in args.scales.split(",")]
    points: list[Point] = []
    with tempfile.TemporaryDirectory() as tmp:
        stacks = _stack_dir(args.stack, Path(tmp), int(args.levels.split(",")[0]))
        for _ in range(args.repeat):
            for scale in scales:
                points += measure(args.stack, scale, args, stacks, Path(tmp) / "results")
    if args.repeat > 1:  # one point per (scale, level): the passes pooled by inverse variance
        pooled = []
        for key in sorted({(p.scale, p.level) for p in points}):
            group = [p for p in points if (p.scale, p.level) == key]
            pooled.append(_pool(group))
        points = pooled
    print(f"{args.stack}: gains and accept lengths per simulator time scale ({args.rounds} rounds of "
          f"{args.round_s:g} s per arm and level, paired-t; reference scale {scales[0]:g})")
    report(points, scales[0])


def _pool(group: list[Point]) -> Point:
    def pooled(which: str) -> tuple[tuple[float, float, float], float]:
        logs = [(math.log1p(getattr(p, which)[0]), getattr(p, which + "_se")) for p in group
                if getattr(p, which)[0] is not None and math.isfinite(getattr(p, which + "_se"))]
        weights = [1 / se ** 2 for _, se in logs]
        mean = sum(w * x for w, (x, _) in zip(weights, logs)) / sum(weights)
        se = 1 / math.sqrt(sum(weights))
        return (math.expm1(mean), math.expm1(mean - Z95 * se), math.expm1(mean + Z95 * se)), se

    decode, dse = pooled("decode")
    output, ose = pooled("output")
    accepts = [p.accept_length for p in group if p.accept_length is not None]
    return Point(group[0].scale, group[0].level, decode, output, sum(accepts) / len(accepts) if accepts else None,
                 dse, ose)


if __name__ == "__main__":
    main()
