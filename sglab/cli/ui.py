"""`sglab ui --stack NAME [--target sim | --baseline-url U --candidate-url U] [--profile P] [--trace FILE]`: Locust's
web UI with the A/B tab."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglab.cli import UsageError
from sglab.cli.bounds import model_option
from sglab.config.loadplan import MAX_CONCURRENCY, LoadPlan


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give a TCP port from 1 to 65535")
    return port


def _spawn_rate(text: str) -> float:
    """Users started per second: more than the most users an arm may have is a typo."""
    try:
        rate = float(text)
    except ValueError:
        rate = float("nan")
    if not 0 < rate <= MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give a number of users per second above 0 and at most "
                                         f"{MAX_CONCURRENCY} (the most users of load.concurrency)")
    return rate


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="drive the A/B from Locust's web UI (live A/B tab, result download)")
    p.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--target", choices=["sim"], default=None,
                   help="start the two simulators with the stack's launch args (default without URLs)")
    p.add_argument("--baseline-url", help="an existing baseline server (with --candidate-url)")
    p.add_argument("--candidate-url", help="an existing candidate server (with --baseline-url)")
    p.add_argument("--web-host", default="127.0.0.1",
                   help="interface the UI listens on (default 127.0.0.1; anything but loopback needs --web-login)")
    p.add_argument("--web-port", type=_port, default=8089, help="UI port (default 8089)")
    p.add_argument("--web-login", action=argparse.BooleanOptionalAction, default=False,
                   help="require a login (password from SGLAB_UI_PASSWORD, user SGLAB_UI_USERNAME, default "
                        "'sglab'); off by default locally, on by default in the cluster chart")
    p.add_argument("--users", type=model_option(LoadPlan, "concurrency", "load.concurrency", item=True),
                   help="closed loop: users prefilled in the form (default: 2 x the policy's "
                   "first level); open-loop profiles refuse it (their users are the in-flight cap)")
    p.add_argument("--spawn-rate", type=_spawn_rate,
                   help="closed loop: spawn rate prefilled in the form (default: users "
                   "per second)")
    p.add_argument("--profile", help="load profile: concurrency (closed loop: the form's user count, both arms side "
                   "by side) or rate / trace (open loop: START runs the stack's interleaved schedule of rate levels "
                   "or the trace, users = load.<profile>.max-in-flight); default: the stack's load.profile")
    p.add_argument("--trace", help="trace profile: the JSONL trace to replay (timestamp_s, prompt|messages, "
                   "output_tokens); replaces load.trace.file and implies --profile trace")
    p.add_argument("--save", action=argparse.BooleanOptionalAction, default=True,
                   help="save every stopped test under results/<stack>/ (default on)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sglab.ui.launcher import LaunchError, TargetError, UiOptions, run as launch

    urls = (args.baseline_url, args.candidate_url)
    if any(urls) and args.target == "sim":
        raise UsageError("--target sim starts its own simulators; drop it or drop --baseline-url/--candidate-url")
    if any(urls) and not all(urls):
        raise UsageError("give both --baseline-url and --candidate-url (or neither, for --target sim)")
    profile = args.profile or ("trace" if args.trace else None)
    if args.trace and profile != "trace":
        raise UsageError(f"--trace replays a trace: it goes with --profile trace, not --profile {profile}")
    options = UiOptions(
        stack=args.stack,
        target="urls" if all(urls) else "sim",
        baseline_url=args.baseline_url,
        candidate_url=args.candidate_url,
        web_host=args.web_host,
        web_port=args.web_port,
        web_login=args.web_login,
        users=args.users,
        spawn_rate=args.spawn_rate,
        save_results=args.save,
        profile=profile,
        trace=Path(args.trace).resolve() if args.trace else None,
    )
    try:
        return launch(options)
    except (LaunchError, TargetError) as exc:
        raise UsageError(str(exc)) from None
