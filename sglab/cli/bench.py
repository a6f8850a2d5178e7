"""`sglab bench --stack NAME`: the same-run, interleaved A/B benchmark, ending with the verdict.

    sglab bench --stack eagle-nccl-ll                       # two simulators from the stack's arms
    sglab bench --stack eagle-nccl-ll --quick               # CI-sized (about two minutes)
    sglab bench --stack X --baseline-url U --candidate-url U  # an existing deployment
    sglab bench --stack X --aa | --attribute                # A/A check | four-arm attribution
    sglab bench --stack X --profile rate --rates 2,8        # open loop: Poisson arrivals at 2 and 8 req/s
    sglab bench --stack X --profile trace --trace T.jsonl   # replay a JSONL trace at its arrival times
    sglab bench --stack X --prompts suite --natural-stop    # the bundled suite (chat), replies stop by themselves
    sglab bench --stack X --prompts sharegpt:S.json --categories field:topic --prompt-limit 200
    sglab bench --stack X --prompts openai:logs.jsonl --endpoint generate   # an import, sent as raw text
"""

from __future__ import annotations

import argparse
import sys

from sglab.cli import UsageError
from sglab.cli.bounds import check_streams, fastest_time_scale, model_choices, model_option, time_scale_option
from sglab.config.lints import raise_blocking, stack_lints
from sglab.config.loader import load_stack
from sglab.config.loadplan import LoadPlan, PromptSpec, RateSpec, TraceSpec
from sglab.config.policy import PromotionPolicy
from sglab.core.children import MAX_LOCUST_WORKERS, worker_count_problem
from sglab.core.errors import INTERRUPTED, UNDECIDED, USAGE, guess
from sglab.core.untrusted import is_control, printable
from sglab.load.schedule import QUICK_PLAN, QUICK_SIM_TIME_SCALE
from sglab.sglang.sim_knobs import SIM_KNOBS, is_sim_env

EXAMPLES = """examples:
  sglab bench --stack eagle-nccl-ll                        # both arms on simulators, judged
  sglab bench --stack ./my-stack.yaml --baseline-url http://B:30000 --candidate-url http://C:30000
  sglab bench --stack eagle-nccl-ll --concurrency 1,4,16 --prompts openai:logs.jsonl   # your traffic, your levels
"""



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run the interleaved A/B benchmark and judge it",
                       description="Benchmark a stack's baseline and candidate in the same run, interleaved, with\n"
                       "the same prompts, and print the verdict (what `sglab compare` prints).",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("what is compared",
                             "the stack's arms on simulators (default), or servers already running")
    g.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml) or the path of a stack file")
    g.add_argument("--target", choices=["sim", "urls", "in-cluster"], default=None,
                   help="sim (default): start one `sglab sim` per arm; urls: use --baseline-url/--candidate-url; "
                   "in-cluster: the benchmark Job, against the arms' Services (it may move them, --deployment, "
                   "and store its result, --result-configmap)")
    g.add_argument("--baseline-url", help="URL of a running baseline server")
    g.add_argument("--candidate-url", help="URL of a running candidate server")
    g.add_argument("--skip-live-check", action="store_true",
                   help="servers that do not serve SGLang's /get_server_info: measure without comparing their live "
                   "flags with the stack; such a run never promotes (its verdict names the blocker)")
    kind = g.add_mutually_exclusive_group()
    kind.add_argument("--aa", action="store_true", help="A/A check: two identical baseline servers")
    kind.add_argument("--attribute", action="store_true",
                      help="four arms: baseline, +confounds, candidate without them, candidate")
    g = p.add_argument_group("how long",
                             "rounds per level and the sequential stop (policy.method sequential, the default)")
    g.add_argument("--quick", action="store_true",
                   help=f"CI preset: levels {','.join(map(str, QUICK_PLAN['concurrency']))} (and the policy's), up "
                   f"to {QUICK_PLAN['rounds']} looks of {QUICK_PLAN['round_duration_s']:g} s rounds at the gated "
                   f"levels (a crossover's look is a pair of rounds), {QUICK_PLAN['ungated_rounds']} at the others; "
                   f"simulators at {QUICK_SIM_TIME_SCALE:g}x speed (slower where a higher --concurrency needs it "
                   "for the load generator to keep up). About two minutes on 2 cores; it decides a "
                   "+3%% gain in about 5 runs of 8, and an undecided run says how many more rounds to add")
    g.add_argument("--rounds", type=model_option(LoadPlan, "rounds", "load.rounds"),
                   help="rounds at the levels the policy gates on: under policy.method sequential (the default) the "
                   "most each may run before it ends inconclusive (it stops earlier once its confidence sequence "
                   "decides; default 2 x load.rounds; fewer than policy.min-rounds can only end inconclusive), "
                   "under a fixed-round method exactly that many (default: load.rounds)")
    g.add_argument("--own-gate-only", action="store_true",
                   help="policy.method sequential: run only this stack's gated levels to a decision, not those of "
                   "its promotion target (sglab:promote-to); shorter, but not evidence that target's gate can pass")
    g.add_argument("--fresh-sequence", action="store_true",
                   help="policy.method sequential: start a new sequence for this pair instead of continuing the "
                   "earlier runs' (recorded in the result; a re-run otherwise continues them, so re-running keeps "
                   "the error rate)")
    g.add_argument("--ungated-rounds", type=model_option(LoadPlan, "ungated_rounds", "load.ungated-rounds"),
                   help="rounds at the other levels, which only show the crossover (default: load.ungated-rounds)")
    g.add_argument("--round-s", type=model_option(LoadPlan, "round_duration_s", "load.round-duration-s"),
                   help="seconds per arm per round")
    g.add_argument("--round-requests", type=model_option(LoadPlan, "round_requests", "load.round-requests"),
                   help="requests per arm per round (instead of --round-s)")
    g.add_argument("--warmup-requests", type=model_option(LoadPlan, "warmup_requests", "load.warmup-requests"),
                   help="discarded warm-up requests per arm and level")
    g = p.add_argument_group("where the arms run", "the design (default: policy.design); only servers sglab starts "
                             "(--target sim) or the benchmark Job's (--deployment) can be moved")
    g.add_argument("--design", choices=model_choices(PromotionPolicy, "design"),
                   help="crossover swaps their nodes every --period-rounds rounds, switchback serves one arm at a "
                   "time on one node (ABBA), parallel keeps each on its own node")
    g.add_argument("--period-rounds", type=model_option(LoadPlan, "period_rounds", "load.period-rounds"),
                   help="rounds per period of crossover and switchback (default: load.period-rounds)")
    g.add_argument("--crossover-of", metavar="RUN_ID",
                   help="servers given by URL: this run is period 2 of a crossover whose period 1 is RUN_ID, run "
                   "with the machines swapped (the baseline now where RUN_ID's candidate ran); the two join into "
                   "one estimate, the machines' difference reported apart")
    g.add_argument("--deployment", action="append", default=[], metavar="ARM=NAME",
                   help="in-cluster: the arm's Deployment, which the Job may pin to a node or stop to carry out "
                   "policy.design (crossover, switchback); give one per arm (the benchmark Job does)")
    g = p.add_argument_group("load", "the levels and how requests arrive (default: the stack's load section)")
    g.add_argument("--concurrency", type=model_option(LoadPlan, "concurrency", "load.concurrency"),
                   help="comma-separated levels, e.g. 1,4 (default: the stack's)")
    g.add_argument("--profile", help="load profile: concurrency (closed loop, default), rate (open loop), "
                   "trace (replay); default: the stack's load.profile")
    g.add_argument("--rates", type=model_option(RateSpec, "levels", "load.rate.levels"),
                   help="rate profile: comma-separated requests/s, e.g. 1,4,16 (default: load.rate.levels)")
    g.add_argument("--arrival", choices=model_choices(RateSpec, "arrival"), help="rate profile: arrival process")
    g.add_argument("--max-in-flight", type=model_option(RateSpec, "max_in_flight", "load.rate.max-in-flight"),
                   help="rate/trace profile: cap on requests in flight")
    g.add_argument("--trace", help="trace profile: JSONL trace file (timestamp_s, prompt|messages, output_tokens)")
    g.add_argument("--trace-time-scale", type=model_option(TraceSpec, "time_scale", "load.trace.time-scale"),
                   help="trace profile: replay speed-up (2 = twice as fast)")
    g.add_argument("--workers", type=int, default=0, help="Locust worker processes (distributed mode): at most one "
                   f"per usable core here and {MAX_LOCUST_WORKERS} in all")
    g = p.add_argument_group("requests",
                             "what both arms are sent (default: the stack's load.prompts, else the bundled suite)")
    g.add_argument("--prompts", metavar="SOURCE",
                   help="prompt set: random | suite | file:PATH | sharegpt:PATH | openai:PATH (paths from the "
                   "current directory; default: load.prompts.source)")
    g.add_argument("--categories", help="suite: comma-separated subset of its categories; sharegpt/openai: "
                   "field:NAME (a field of each row) or one fixed label")
    g.add_argument("--prompt-limit", type=model_option(PromptSpec, "limit", "load.prompts.limit"), metavar="N",
                   help="suite/sharegpt/openai: at most N prompts (load.prompts.limit)")
    g.add_argument("--endpoint", choices=model_choices(LoadPlan, "endpoint"),
                   help="chat (the model's chat template) or generate (raw text); default: load.endpoint, which "
                   "follows the prompt source (chat for suite, sharegpt, openai)")
    g.add_argument("--natural-stop", action=argparse.BooleanOptionalAction, default=None,
                   help="let a reply stop by itself: ignore_eos false and the prompt's max_tokens cap "
                   "(default: load.natural-stop)")
    g.add_argument("--max-new-tokens", type=model_option(LoadPlan, "max_new_tokens", "load.max-new-tokens"),
                   help="tokens per request for prompts without their own output length (random, file); the "
                   "suite, imports and traces send each record's own")
    g.add_argument("--request-timeout-s", type=model_option(LoadPlan, "request_timeout_s", "load.request-timeout-s"),
                   help="per-request timeout (default: the stack's)")
    g.add_argument("--seed", type=model_option(LoadPlan, "seed", "load.seed"),
                   help="seed of the round order and prompt offsets")
    g = p.add_argument_group("simulators", "--target sim only")
    g.add_argument("--sim-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra SGLAB_SIM_* knob for the simulators (recorded in the result)")
    g.add_argument("--time-scale", type=time_scale_option,
                   help="simulator time scale (tok/s measured are scaled; recorded in the result)")
    g = p.add_argument_group("output")
    g.add_argument("--out", help="results root (default: results/ in the checkout, or $SGLAB_RESULTS_DIR)")
    g.add_argument("--result-configmap", metavar="NAME",
                   help="in-cluster: also store the result in this pre-created ConfigMap (the benchmark Job)")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def _profile_overrides(args: argparse.Namespace) -> dict:
    from pathlib import Path

    in_flight = args.max_in_flight
    profile = args.profile or ("trace" if args.trace else "rate" if args.rates else None)
    return {"profile": profile, "rate.levels": args.rates, "rate.arrival": args.arrival,
            "rate.max_in_flight": in_flight if profile == "rate" else None,
            "trace.max_in_flight": in_flight if profile == "trace" else None,
            "trace.file": str(Path(args.trace).resolve()) if args.trace else None,
            "trace.time_scale": args.trace_time_scale}


def _needs_file(source: str) -> bool:
    """Whether the model wants a file with this prompt source (PromptSpec's own rule)."""
    from pydantic import ValidationError

    from sglab.config.loadplan import PromptSpec

    try:
        PromptSpec(source=source)
    except ValidationError:
        return True
    return False


def _prompt_overrides(args: argparse.Namespace, stack_prompts) -> dict:
    """--prompts/--categories/--prompt-limit/--endpoint/--natural-stop as plan_for overrides (None: the stack's)."""
    from pathlib import Path
    from typing import get_args

    from sglab.config.loadplan import PromptSpec
    from sglab.load.datasets import SUITE_CATEGORIES

    overrides: dict = {"endpoint": args.endpoint, "natural_stop": args.natural_stop,
                       "prompts.categories": args.categories, "prompts.limit": args.prompt_limit}
    source = stack_prompts.source
    if args.prompts is not None:
        sources = get_args(PromptSpec.model_fields["source"].annotation)
        usage = ", ".join(s + (":PATH" if _needs_file(s) else "") for s in sources)
        name, _, path = args.prompts.partition(":")
        if name not in sources:
            raise UsageError(f"--prompts {args.prompts!r}: unknown prompt source; use one of {usage}")
        if _needs_file(name) and not path:
            raise UsageError(f"--prompts {args.prompts!r}: give the file, as {name}:PATH")
        if path and not _needs_file(name):
            raise UsageError(f"--prompts {args.prompts!r}: the {name} source reads no file; write --prompts {name}")
        file = str(Path(path).resolve()) if path else None
        if file is not None and not Path(file).exists():  # a directory or FIFO: the reader says what it is
            raise UsageError(f"--prompts {args.prompts!r}: {file} not found; give an existing file (a relative "
                             "path is read from the current directory)")
        source = name
        overrides.update({"prompts.source": name, "prompts.file": file})
    chat_shaped = PromptSpec.model_construct(source=source).chat_shaped
    for flag, value in (("--categories", args.categories), ("--prompt-limit", args.prompt_limit)):
        if value is not None and not chat_shaped:
            raise UsageError(f"{flag} applies to the suite, sharegpt and openai prompt sources, not {source}: "
                             "add --prompts suite (or sharegpt:PATH, openai:PATH), or leave it out")
    if args.categories is not None and source == "suite":
        names = [n.strip() for n in args.categories.split(",") if n.strip()]
        unknown = [n for n in names if n not in SUITE_CATEGORIES]
        if unknown or not names:
            raise UsageError(f"--categories {args.categories!r}: the suite has no category "
                             f"{', '.join(unknown) or 'named'}; give a comma-separated subset of "
                             f"{', '.join(SUITE_CATEGORIES)}")
    return overrides


def _check_profile(loaded, plan, workers: int, *, max_new_tokens_given: bool = False) -> None:
    """The profile exists, its requests (a trace, the prompt set) read and it can run as asked (else exit 2)."""
    from sglab.core.errors import ConfigError
    from sglab.load.profiles import profile_for, profile_names

    try:
        profile = profile_for(plan)
    except ValueError:
        raise ConfigError(loaded.path, "load.profile", f"unknown load profile {plan.profile!r}",
                          f"use one of: {', '.join(profile_names())}") from None
    from sglab.load.prompts import build_prompts

    base_dir = loaded.path.parent.parent  # as the runner reads them
    prompts = profile.prompts(base_dir) or build_prompts(plan.prompts, base_dir)  # a bad dataset fails here
    own = sum(1 for p in prompts if p.output_tokens)
    if max_new_tokens_given and own:
        raise UsageError(f"--max-new-tokens: {own} of this run's {len(prompts)} requests carry their own output "
                         f"length ({plan.prompts.source if profile.name != 'trace' else 'the trace'}), which is "
                         "what they send; leave --max-new-tokens out, or send fixed-length requests with "
                         "--prompts random (or file:PATH)")
    if workers and not profile.distributable:
        raise UsageError(f"--workers: the {profile.name} profile's arrival schedule runs in one process; "
                         "leave --workers out (one process sends thousands of requests per second)")


def _sim_env(pairs: list[str], time_scale: float | None) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not is_sim_env(key):
            raise UsageError(f"--sim-env {pair!r}: write SGLAB_SIM_<KNOB>=VALUE (see `sglab sim --help`)")
        known = sorted(k.env for k in SIM_KNOBS)
        if key not in known:
            near = guess(key, known)
            raise UsageError(f"--sim-env {key}: the simulator has no such knob"
                             + (f" (did you mean {near}?)" if near else f"; knobs: {', '.join(known)}"))
        if any(is_control(ch) for ch in value):  # it is recorded in the result, which holds no such character
            raise UsageError(f"--sim-env {key}: the value {value!r} holds a control or invisible character; give "
                             "plain text")
        env[key] = value
    if "SGLAB_SIM_TIME_SCALE" in env:  # the same bound as --time-scale's
        try:
            time_scale_option(env["SGLAB_SIM_TIME_SCALE"])
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"--sim-env SGLAB_SIM_TIME_SCALE: {exc}") from None
    if time_scale is not None:  # checked by its option's type
        env["SGLAB_SIM_TIME_SCALE"] = f"{time_scale:g}"
    return env


def _refuse_ungated_run(loaded, plan) -> None:
    """A run that skips a level the policy gates could only end inconclusive: refuse it before measuring."""
    from sglab.load.profiles import profile_for

    profile = profile_for(plan)
    measured = profile.levels()
    unmeasured = [level for level in loaded.config.policy.levels if level not in measured]
    if unmeasured:
        raise UsageError(f"policy.levels gates {unmeasured}, which this {profile.name} run would not measure "
                         f"(levels {measured}), so it could never promote; fix: keep {unmeasured} in "
                         f"--concurrency (or --rates), or change policy.levels in {loaded.path}")


def build_request(args: argparse.Namespace):
    from pathlib import Path

    from pydantic import ValidationError

    from sglab.core.errors import ConfigError
    from sglab.load.request import BenchRequest
    from sglab.load.schedule import plan_for

    loaded = load_stack(args.stack)
    raise_blocking(stack_lints(loaded.config), loaded.path)  # as validate, render and pulumi up do
    if args.design is not None:  # recorded with the policy, as asked
        from dataclasses import replace

        policy = loaded.config.policy.model_copy(update={"design": args.design})
        loaded = replace(loaded, config=loaded.config.model_copy(update={"policy": policy}))
    kind = "aa" if args.aa else "attribute" if args.attribute else "ab"
    urls_given = bool(args.baseline_url or args.candidate_url)
    target = args.target or ("urls" if urls_given else "sim")
    urls: dict[str, str] = {}
    if target in ("urls", "in-cluster"):
        if kind == "attribute":
            raise UsageError("--attribute needs four servers: run it with --target sim")
        if not args.baseline_url or (kind == "ab" and not args.candidate_url):
            raise UsageError(f"--target {target} needs --baseline-url and --candidate-url")
        # A/A against a deployment: the second arm is a second baseline server when given, else the same one
        urls = {"baseline": args.baseline_url, "candidate": args.candidate_url or args.baseline_url}
    elif urls_given:
        raise UsageError("--baseline-url/--candidate-url go with --target urls (or leave --target out)")
    workers_problem = worker_count_problem(args.workers)
    if workers_problem:
        raise UsageError(workers_problem)
    overrides = {"concurrency": args.concurrency, "rounds": args.rounds, "period_rounds": args.period_rounds,
                 "ungated_rounds": args.ungated_rounds, "seed": args.seed,
                 "warmup_requests": args.warmup_requests, "max_new_tokens": args.max_new_tokens,
                 "request_timeout_s": args.request_timeout_s, **_profile_overrides(args),
                 **_prompt_overrides(args, loaded.config.load.prompts)}
    if args.round_s is not None and args.round_requests is not None:
        raise UsageError("give --round-s or --round-requests, not both")
    if args.round_s is not None:
        overrides["round_duration_s"] = args.round_s
    if args.round_requests is not None:
        overrides["round_requests"] = args.round_requests
    try:
        plan = plan_for(loaded, quick=args.quick, overrides=overrides)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise ConfigError(loaded.path, "load." + ".".join(str(p) for p in err["loc"]),
                          f"{err['msg']} (after command-line overrides)",
                          "check --rounds/--concurrency/--round-*") from None
    _check_profile(loaded, plan, args.workers, max_new_tokens_given=args.max_new_tokens is not None)
    _refuse_ungated_run(loaded, plan)
    sim_env = _sim_env(args.sim_env, args.time_scale) if target == "sim" else {}
    if args.quick and target == "sim" and "SGLAB_SIM_TIME_SCALE" not in sim_env:
        sim_env["SGLAB_SIM_TIME_SCALE"] = f"{fastest_time_scale(QUICK_SIM_TIME_SCALE, plan, args.workers):g}"
    if target == "sim":
        check_streams(loaded, plan, sim_env, args.workers)
    if args.result_configmap and target != "in-cluster":
        raise UsageError("--result-configmap stores the benchmark Job's result for the Pulumi program: it goes with "
                         "--target in-cluster")
    deployments = _deployments(args.deployment, target, list(urls))
    if args.crossover_of and (target != "urls" or kind != "ab"):
        raise UsageError("--crossover-of joins two A/B runs of servers given by URL (--baseline-url and "
                         "--candidate-url); servers sglab starts or the benchmark Job moves carry out "
                         "policy.design themselves")
    return BenchRequest(loaded=loaded, plan=plan, kind=kind, target_kind=target, urls=urls, deployments=deployments,
                        sim_env=sim_env,
                        workers=args.workers, out=Path(args.out) if args.out else None,
                        progress=not args.no_progress and sys.stderr.isatty(),
                        check_live_flags=not args.skip_live_check)


def _deployments(given: list[str], target: str, arms: list[str]) -> dict[str, str]:
    """--deployment ARM=NAME, one per arm, in the cluster only."""
    if not given:
        return {}
    if target != "in-cluster":
        raise UsageError("--deployment moves the arms of the benchmark Job: it goes with --target in-cluster and "
                         "the arms' --baseline-url/--candidate-url")
    found: dict[str, str] = {}
    for item in given:
        arm, sep, name = item.partition("=")
        if not sep or arm not in arms or not name or arm in found:
            raise UsageError(f"--deployment {item!r}: give ARM=NAME once per arm, ARM one of {', '.join(arms)}")
        found[arm] = name
    if set(found) != set(arms):
        raise UsageError(f"--deployment: give one per arm ({', '.join(arms)}), not only {', '.join(found)}")
    return found


def _joined_request(request, period_one):
    """The request of a joined crossover's period 2: as many rounds again as period 1 at every level."""
    from dataclasses import replace

    totals = period_one.totals()
    gated = set(request.loaded.config.policy.levels)
    gated_total = max((n for lv, n in totals.items() if lv in gated), default=max(totals.values()))
    ungated = [n for lv, n in totals.items() if lv not in gated]
    plan = request.plan.model_copy(update={"rounds": gated_total,
                                           "ungated_rounds": max(ungated) if ungated else request.plan.ungated_rounds})
    return replace(request, plan=plan, joined=period_one.joined)


def _levels_phrase(totals: dict[int, int]) -> str:
    return ", ".join(f"{n} rounds at {lv}" for lv, n in sorted(totals.items()))


def _prompts_phrase(plan) -> str:
    """What is sent, for the start line: `prompts suite (code,chat) to chat, natural stop`."""
    spec = plan.prompts
    detail = ", ".join(str(x) for x in (spec.file, spec.categories, spec.limit and f"at most {spec.limit}") if x)
    stop = "natural stop" if plan.natural_stop else "fixed lengths (ignore_eos)"
    return f"prompts {spec.source}{f' ({detail})' if detail else ''} to {plan.endpoint}, {stop}"


def run(args: argparse.Namespace) -> int:
    request = build_request(args)  # config errors before anything starts
    import locust  # noqa: F401  (gevent monkey-patching must precede the runner's imports)

    from sglab.load.profiles import profile_for
    from sglab.load.runner import RefusedError, run_bench
    from sglab.load.targets import TargetError

    arms = ", ".join(a.name for a in request.arms)
    profile = profile_for(request.plan)
    sequential = request.loaded.config.policy.method == "sequential"
    notes: list[str] = []
    if sequential:  # stop each gated level (and the promotion target's) at its decision
        from sglab.analysis.stops import stop_lines
        from sglab.bench.sequential import prepare, run_sequential

        try:
            fresh = f"period 2 of a crossover with run {args.crossover_of}" if args.crossover_of else \
                args.fresh_sequence  # a joined run's period 1 is inside it: never counted again
            request, plan = prepare(request, quick=args.quick, own_gate_only=args.own_gate_only,
                                    rounds_given=args.rounds is not None, fresh=fresh)
        except RefusedError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return USAGE
        profile, notes, gated_rounds = profile_for(request.plan), plan.notes, plan.sentence
    else:
        gated_rounds = (f"{request.plan.rounds} rounds ({request.loaded.config.policy.method}) at gated levels "
                        f"{request.loaded.config.policy.levels}")
    period_one = None
    if args.crossover_of:
        from sglab.bench.crossover import period_one as find_period_one

        try:
            period_one = find_period_one(request, args.crossover_of)
        except RefusedError as exc:
            print(f"error: {printable(exc, limit=None)}", file=sys.stderr)
            return USAGE
        request = _joined_request(request, period_one)
        joined = period_one.joined
        notes.append(f"crossover: period 1 is run {joined.run_id} (baseline on {joined.first['baseline']}, "
                     f"candidate on {joined.first['candidate']}); this run measures period 2 on the swapped "
                     f"machines, as many rounds again ({_levels_phrase(period_one.totals())} in all)")
    print(f"sglab bench {request.loaded.name}: {request.kind} run, arms {arms}, target {request.target_kind}, "
          f"{profile.name} profile, levels {profile.levels()} ({profile.level_label}), {gated_rounds}, "
          f"{request.plan.ungated_rounds or request.plan.rounds} rounds elsewhere; {_prompts_phrase(request.plan)}",
          file=sys.stderr)
    scale = request.sim_env.get("SGLAB_SIM_TIME_SCALE")
    if args.quick and scale and float(scale) < QUICK_SIM_TIME_SCALE and args.time_scale is None:
        notes.append(f"--quick runs the simulators at {scale}x, not {QUICK_SIM_TIME_SCALE:g}x: at concurrency "
                     f"{max(profile.levels())} a faster scale would outrun the load generator")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    try:
        if sequential:
            # a joined run's plan holds its rounds: as many again as period 1
            result, run_dir = run_sequential(request, rounds_given=args.rounds is not None or period_one is not None,
                                             target_policy=plan.target_policy, earlier=plan.earlier,
                                             sequence=plan.sequence,
                                             earlier_levels=period_one.levels if period_one else None)
        elif period_one is not None:
            from sglab.bench.crossover import FixedRounds
            from sglab.load.rounds import run_controlled

            plan_rounds = request.plan
            gated = set(request.loaded.config.policy.levels)
            totals = {lv: plan_rounds.rounds if lv in gated else plan_rounds.ungated_rounds or plan_rounds.rounds
                      for lv in period_one.rounds}  # what the recorded plan says, as the runner applies it
            result, run_dir = run_controlled(request, FixedRounds(totals, [a.name for a in request.arms]),
                                             earlier=period_one.levels)
        else:
            result, run_dir = run_bench(request)
    except (RefusedError, TargetError) as exc:  # a server's log tail or error body may be in it
        print(f"error: {printable(exc, newlines=True, limit=None)}", file=sys.stderr)
        return USAGE
    print(f"result: {run_dir / 'result.json'}")
    if sequential:
        for line in stop_lines(result, "c" if profile.name == "concurrency" else "level"):
            print(f"sequential {line}")
    from sglab.bench.sequential import judge_and_report

    judge_and_report(result, run_dir)
    if args.result_configmap:
        from sglab.results.sink import write_result_configmap

        text = (run_dir / "result.json").read_text(encoding="utf-8")
        try:
            namespace = write_result_configmap(text, args.result_configmap)
        except Exception as exc:  # API unreachable or forbidden: the Job fails with one clear line
            print(f"error: cannot store the result in ConfigMap {args.result_configmap}: {type(exc).__name__}: "
                  f"{printable(exc)}", file=sys.stderr)
            return USAGE
        print(f"result stored in ConfigMap {namespace}/{args.result_configmap}")
    if result.invalid_reason:
        print(f"run invalid: {result.invalid_reason}; it cannot be judged. What was measured before is kept "
              f"in {run_dir}; fix or restart that server and run the bench again", file=sys.stderr)
        return UNDECIDED  # an arm died or froze mid-run: result.invalid_reason
    if not result.complete:
        print(f"run incomplete ({result.incomplete_reason}); what was measured is kept in {run_dir}",
              file=sys.stderr)
        return INTERRUPTED
    return 0
