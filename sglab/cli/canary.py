"""`sglab canary`: the live judge of a rollout (docs/production.md).

    sglab canary --stack production --target sim [--stable REF] [--canary REF]   # the local rehearsal
    sglab canary --stack production --stable-hash H --canary-hash H [--prometheus-url URL]
    sglab canary --from-env --stable-hash H --canary-hash H                     # the AnalysisTemplate's Job

Prints a line per window and `canary: promote|abort|continue` last; exits 0 (promote), 1 (abort) or
3 (continue: undecided when it had to stop), the codes Argo's Job provider reads as Successful / Failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sglab.cli import UsageError
from sglab.cli.bounds import bound, model_option, time_scale_option
from sglab.config.loadplan import LoadPlan
from sglab.config.serving import CanaryJudge
from sglab.core.errors import USAGE


def _positive(kind, most: float):
    """A rehearsal's number with no stack key of its own: finite, above 0 and at most `most`."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not 0 < value <= most:  # nan and inf fail this too
            raise argparse.ArgumentTypeError(f"{text} must be > 0 and at most {most:g}")
        return value
    return parse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("canary", help="judge a canary live from Prometheus (or rehearse one on simulators)",
                       description="Reads both revisions' SGLang metrics from Prometheus's HTTP API every window, "
                                   "pairs them (same wall-clock window), decides with the confidence sequence of "
                                   "`sglab bench` plus SLO, accept-length and per-category guards, and logs each "
                                   "decision with its evidence. Exit 0 promote, 1 abort, 3 continue, 2 bad input.")
    p.add_argument("--stack", help="the serving stack (stacks/Pulumi.<stack>.yaml with sglab:serving)")
    p.add_argument("--from-env", action="store_true", help="read the judge's spec from SGLAB_CANARY_SPEC (in-cluster)")
    p.add_argument("--target", choices=("prometheus", "sim"), default="prometheus",
                   help="prometheus: judge a live rollout (default); sim: rehearse it here with simulators, a real "
                        "Prometheus and Locust")
    p.add_argument("--prometheus-url", help="default: sglab:serving.monitoring.prometheus-url")
    p.add_argument("--stable-hash", help="the stable revision's pod-template hash (default: label sglab/revision)")
    p.add_argument("--canary-hash", help="the canary revision's pod-template hash")
    p.add_argument("--once", action="store_true", help="one look at the windows so far, then stop")
    rehearsal = p.add_argument_group("rehearsal (--target sim)")
    rehearsal.add_argument("--stable", help="STACK[:candidate|:baseline] the stable runs (default: the stack's "
                                            "config before its newest promotion, else its baseline)")
    rehearsal.add_argument("--canary", help="STACK[:candidate|:baseline] the canary runs (default: the stack's "
                                            "candidate as the file holds it now)")
    rehearsal.add_argument("--weight", type=_positive(float, 100), default=50.0,
                           help="percent of requests to the canary (default 50: one canary pod beside one stable "
                                "pod, each at the same load)")
    rehearsal.add_argument("--users", type=model_option(LoadPlan, "concurrency", "load.concurrency", item=True),
                           default=8, help="concurrent Locust users in all")
    rehearsal.add_argument("--time-scale", type=time_scale_option, default=4.0,
                           help="simulator speed-up, 0.25 to 10 and at most 48 users x scale (within them gains "
                                "and accept lengths do not depend on it)")
    rehearsal.add_argument("--window-s", type=_positive(float, bound(CanaryJudge, "window_s")), default=5.0,
                           help="window length (default 5 s)")
    rehearsal.add_argument("--max-windows", type=model_option(CanaryJudge, "max_windows", "serving.canary.max-windows"),
                           default=30)
    rehearsal.add_argument("--scrape-interval-s", type=_positive(float, 60), default=1.0)
    rehearsal.add_argument("--max-new-tokens", type=model_option(LoadPlan, "max_new_tokens", "load.max-new-tokens"),
                           default=128, help="reply length cap per request, as bench's --max-new-tokens")
    p.add_argument("--log", type=Path, help="the decision log (JSONL; default results/canary/<stack>/<time>.jsonl)")
    p.set_defaults(func=run)


def _spec_and_stack(args: argparse.Namespace):
    from sglab.config.loader import load_stack
    from sglab.serving.spec import spec_from_env, stack_judge_spec

    if args.from_env:
        return spec_from_env(), None
    if not args.stack:
        raise UsageError("give --stack NAME (a serving stack), or --from-env in the cluster")
    loaded = load_stack(args.stack)
    return stack_judge_spec(loaded, prometheus_url=args.prometheus_url), loaded


def _log_path(args: argparse.Namespace, stack: str) -> Path | None:
    if args.from_env:
        return args.log
    if args.log is not None:
        return args.log
    from sglab.results.store import results_root

    return results_root() / "canary" / stack / (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + ".jsonl")


def run(args: argparse.Namespace) -> int:
    from sglab.core.untrusted import printable
    from sglab.serving.judge import DecisionLog, decide, judge_live
    from sglab.serving.prometheus import PrometheusError, PrometheusUnavailable
    from sglab.serving.windows import fetch_windows

    spec, loaded = _spec_and_stack(args)
    log = DecisionLog(path=_log_path(args, spec.stack), stream=sys.stdout if args.from_env else None)
    try:
        if args.target == "sim":
            if args.from_env:
                raise UsageError("--target sim rehearses a stack file: give --stack, not --from-env")
            decision, windows, used, spec = _rehearse(args, spec, loaded, log)
        else:
            arms = {"canary": spec.revision("canary", args.canary_hash),
                    "stable": spec.revision("stable", args.stable_hash)}
            with spec.prometheus() as prom:
                if args.once:
                    windows = fetch_windows(prom, arms, start=time.time() - spec.max_windows * spec.window_s,
                                            now=time.time(), window_s=spec.window_s, settle_s=spec.settle_s,
                                            category_label=spec.category_label)
                    decision = decide(windows, spec)
                    log.look("canary-once", decision, windows, spec)
                else:
                    decision, windows = judge_live(prom, spec, arms, start=time.time(), log=log)
            used = ""
    except PrometheusError as exc:
        print(f"error: {printable(exc, limit=1500)}\n  fix: {exc.fix}", file=sys.stderr)
        return USAGE
    except PrometheusUnavailable as exc:
        print(f"error: {printable(exc, newlines=True, limit=2000)}\n  fix: {exc.fix}", file=sys.stderr)
        return USAGE
    if log.path is not None:
        print(f"decisions logged in {log.path}")
    print(used or f"windows: {decision.windows_used} paired, {decision.windows_skipped} skipped, {spec.window_s:g} s "
                  f"each ({spec.confidence:.0%} confidence sequence, min-gain {spec.min_gain:+.1%})")
    print(f"canary: {decision.outcome} ({decision.windows_used} windows of {spec.window_s:g} s; "
          f"{printable(decision.reason, limit=400)})")
    return decision.exit_code


def _rehearse(args: argparse.Namespace, spec, loaded, log):
    from sglab.serving.judge import judge_live
    from sglab.serving.prometheus import Prometheus
    from sglab.serving.rehearsal import Rehearsal, default_revisions, rehearsal_spec, resolve

    if args.weight >= 100:
        raise UsageError("--weight must be below 100 (the stable serves the rest)")
    from sglab.sglang.sim_knobs import time_scale_problem  # bounded like every entry (docs/simulator.md)

    if (problem := time_scale_problem(args.time_scale, args.users)) is not None:
        raise UsageError(f"--time-scale: {problem}")
    stable, canary = default_revisions(loaded, None)
    if args.stable:
        stable = resolve(args.stable, "stable", None)
    if args.canary:
        canary = resolve(args.canary, "canary", None)
    spec, http_line = rehearsal_spec(spec, window_s=args.window_s, max_windows=args.max_windows,
                                     scrape_interval_s=args.scrape_interval_s,
                                     min_windows=min(spec.min_windows, args.max_windows))
    print(f"rehearsal: stable = {stable.source}, canary = {canary.source}; {args.weight:g}% of requests to the "
          f"canary, {args.users} users, simulators at {args.time_scale:g}x; windows of {spec.window_s:g} s "
          f"(Prometheus scraping every {spec.scrape_interval_s:g} s)")
    print(http_line)
    with Rehearsal(spec, [stable, canary], {"stable": 100 - args.weight, "canary": args.weight}, args.users,
                   args.time_scale, max_tokens=args.max_new_tokens) as rehearsal:
        print(f"prometheus: {rehearsal.prometheus_url} (real, scraping both simulators)")
        with Prometheus(rehearsal.prometheus_url) as prom:
            decision, windows = judge_live(prom, spec, rehearsal.selectors, start=rehearsal.started_at + 1.0, log=log)
        plan = rehearsal.traffic.plan
        sent = ", ".join(f"{name} {plan.sent.get(name, 0)}" for name in ("stable", "canary"))
    used = (f"windows: {decision.windows_used} paired, {decision.windows_skipped} skipped, {spec.window_s:g} s each "
            f"from {time.strftime('%H:%M:%S', time.localtime(windows[0].start)) if windows else '-'}; "
            f"requests sent: {sent}")
    return decision, windows, used, spec
