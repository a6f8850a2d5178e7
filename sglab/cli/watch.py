"""`sglab watch`: the live gain of production's promoted config over its standing control (docs/production.md).

    sglab watch --stack production [--prometheus-url URL] [--horizon-windows N]      # one look, now
    sglab watch --from-env                                                           # the watch CronJob
    sglab watch --stack production --target sim --shift-to translation             # rehearsed on simulators

Exit 0 holding, 1 dropped below zero (with the rollback command), 3 not enough data, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
import time

from sglab.cli import UsageError
from sglab.cli.bounds import bound, model_option, time_scale_option
from sglab.cli.canary import _positive
from sglab.config.loadplan import LoadPlan
from sglab.config.serving import CanaryJudge, Watch
from sglab.core.errors import USAGE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("watch", help="report production's live gain over its standing control",
                       description="Pairs the promoted config's pods with the standing control (the same server "
                                   "without speculation) window by window from Prometheus, and says whether the gain "
                                   "still holds or has dropped below zero (the traffic no longer suits the draft), "
                                   "with the command that rolls back. Exit 0 holding or no data (a quiet night pages "
                                   "no one), "
                                   "1 below zero.")
    p.add_argument("--stack", help="the serving stack")
    p.add_argument("--from-env", action="store_true", help="read the spec from SGLAB_CANARY_SPEC (in-cluster)")
    p.add_argument("--target", choices=("prometheus", "sim"), default="prometheus")
    p.add_argument("--prometheus-url", help="default: sglab:serving.monitoring.prometheus-url")
    p.add_argument("--horizon-windows", type=model_option(Watch, "horizon_windows", "serving.watch.horizon-windows"),
                   help="windows looked back over (default: "
                                                                  "sglab:serving.watch.horizon-windows)")
    sim = p.add_argument_group("rehearsal (--target sim)")
    sim.add_argument("--users", type=model_option(LoadPlan, "concurrency", "load.concurrency", item=True), default=2,
                     help="Locust users in all (half per server)")
    sim.add_argument("--windows", type=_positive(int, bound(CanaryJudge, "max_windows")), default=20,
                     help="how many windows the rehearsal runs")
    sim.add_argument("--shift-to", help="after --shift-after windows, send mostly this suite category")
    sim.add_argument("--shift-after", type=_positive(int, bound(CanaryJudge, "max_windows")), default=10)
    sim.add_argument("--shift-share", type=float, default=1.0, help="its share of requests after the shift")
    sim.add_argument("--time-scale", type=time_scale_option, default=4.0)
    sim.add_argument("--window-s", type=_positive(float, bound(CanaryJudge, "window_s")), default=5.0)
    sim.add_argument("--scrape-interval-s", type=_positive(float, 60), default=1.0)
    p.set_defaults(func=run)


def _print_report(report, prefix: str = "watch") -> None:
    from sglab.core.untrusted import printable

    for c in report.categories:
        mark = "  below zero" if c.below_zero else ""
        print(f"  {printable(c.category, limit=60)}: {c.estimate:+.1%} ({c.share:.0%} of tokens){mark}")
    print(printable(report.sentence(), limit=1000))
    print(f"{prefix}: {report.status}")


def run(args: argparse.Namespace) -> int:
    from sglab.config.loader import load_stack
    from sglab.core.untrusted import printable
    from sglab.serving.prometheus import PrometheusError, PrometheusUnavailable
    from sglab.serving.spec import spec_from_env, stack_judge_spec
    from sglab.serving.watch import watch_once

    if args.from_env:
        spec, loaded = spec_from_env(), None
    elif args.stack:
        loaded = load_stack(args.stack)
        spec = stack_judge_spec(loaded, prometheus_url=args.prometheus_url)
    else:
        raise UsageError("give --stack NAME (a serving stack), or --from-env in the cluster")
    if not spec.control:
        raise UsageError(f"stack {spec.stack} has no standing control (sglab:serving.control.replicas is 0)")
    try:
        if args.target == "sim":
            if loaded is None:
                raise UsageError("--target sim rehearses a stack file: give --stack")
            report = _rehearse(args, spec, loaded)
        else:
            with spec.prometheus() as prom:
                report, _ = watch_once(prom, spec, horizon_windows=args.horizon_windows)
    except (PrometheusError, PrometheusUnavailable) as exc:
        print(f"error: {printable(exc, newlines=True, limit=1500)}\n  fix: {exc.fix}", file=sys.stderr)
        return USAGE
    _print_report(report)
    return report.exit_code


def _rehearse(args: argparse.Namespace, spec, loaded):
    from sglab.serving.prometheus import Prometheus
    from sglab.serving.rehearsal import Rehearsal, rehearsal_spec, resolve
    from sglab.serving.watch import watch_once
    from sglab.sglang.sim_knobs import time_scale_problem  # bounded like every entry (docs/simulator.md)

    if (problem := time_scale_problem(args.time_scale, args.users)) is not None:
        raise UsageError(f"--time-scale: {problem}")
    if not 0 < args.shift_share <= 1:
        raise UsageError(f"--shift-share {args.shift_share:g} is not a share of requests; give one in (0, 1]")
    spec, http_line = rehearsal_spec(spec, window_s=args.window_s, scrape_interval_s=args.scrape_interval_s)
    horizon = args.horizon_windows or spec.horizon_windows
    serving = resolve(f"{loaded.name}:candidate", "stable", None, loaded={loaded.name: loaded})
    control = resolve(f"{loaded.name}:baseline", "control", None, loaded={loaded.name: loaded})
    print(f"rehearsal: serving = {serving.source}, standing control = {control.source}; {args.users} users, "
          f"simulators at {args.time_scale:g}x, windows of {spec.window_s:g} s, horizon {horizon} windows"
          + (f"; after {args.shift_after} windows {args.shift_share:.0%} of requests are {args.shift_to}"
             if args.shift_to else ""))
    print(http_line)
    report = flagged = None
    with Rehearsal(spec, [serving, control], {"stable": 50.0, "control": 50.0}, args.users, args.time_scale) as r:
        plan = r.traffic.plan
        if args.shift_to and args.shift_to not in plan.records:
            raise UsageError(f"--shift-to {args.shift_to!r} is not a suite category ({', '.join(plan.records)})")
        start = r.started_at + 1.0
        with Prometheus(r.prometheus_url) as prom:
            for k in range(1, args.windows + 1):
                if args.shift_to and k == args.shift_after + 1:
                    plan.shift_to(args.shift_to, args.shift_share)
                end = start + k * spec.window_s
                time.sleep(max(0.0, end + spec.settle_s - time.time()))
                report, _ = watch_once(prom, spec, now=time.time(), horizon_windows=min(horizon, k))
                phase = "" if not args.shift_to else (" (before the shift)" if k <= args.shift_after
                                                      else " (after the shift)")
                print(f"window {k}{phase}: {report.sentence()}")
                if report.status == "below-zero" and flagged is None:
                    flagged = report
    if flagged is not None:  # the run's finding: when the watch (as the CronJob would) first saw it
        print(f"first flagged at the look after {flagged.windows} windows of the horizon")
    return flagged or report
