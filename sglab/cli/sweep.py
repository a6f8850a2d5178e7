"""`sglab sweep --stack S`: find the best candidate of the stack's `sglab:sweep` grid, then confirm it.

    sglab sweep --stack eagle-sweep --quick            # the quick-arms subset on simulators (2 cores)
    sglab sweep --stack eagle-sweep --list             # the grid: arms and skipped combinations
    sglab sweep --stack eagle-sweep --resume RUN       # continue an interrupted sweep
    sglab sweep --stack eagle-sweep --probe PROBE_RUN  # leave out NCCL variants the probe shows slower
    sglab sweep --stack S --target urls --baseline-url U --arm-url NAME=URL ...   # deployed arms (a wave)
    sglab sweep --stack S --target in-cluster ... --result-configmap NAME        # the same, as a wave's Job
    sglab sweep --stack S --next                       # on a cluster: the next wave, the confirmation, or a resume
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from sglab.cli import UsageError
from sglab.cli.bounds import check_streams, model_option, time_scale_option
from sglab.config.loader import load_stack
from sglab.config.loadplan import LoadPlan
from sglab.config.placement import Placement
from sglab.config.sweep import SweepSpec
from sglab.core.errors import INTERRUPTED, USAGE
from sglab.core.untrusted import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="sweep the stack's sglab:sweep grid against one baseline, confirm the winner")
    p.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml) with sglab:sweep")
    p.add_argument("--quick", action="store_true",
                   help="CI preset on simulators: sweep.quick-arms only, the bench's --quick plan (10x speed)")
    p.add_argument("--list", action="store_true",
                   help="print the expanded grid (arms, skipped with reasons); run nothing")
    p.add_argument("--resume", metavar="RUN", help="continue the interrupted sweep RUN (its run id or directory)")
    p.add_argument("--rounds", type=model_option(SweepSpec, "max_rounds", "sweep.max-rounds"),
                   help="rounds at most per gated level, as bench's --rounds (default: sweep.max-rounds)")
    p.add_argument("--round-s", type=model_option(LoadPlan, "round_duration_s", "load.round-duration-s"),
                   help="seconds per arm per round")
    p.add_argument("--probe", metavar="RUN", help="an NCCL probe run: skip variants it shows slower than the default")
    p.add_argument("--no-confirm", action="store_true", help="stop after the sweep (no confirmation A/B)")
    p.add_argument("--time-scale", type=time_scale_option,
                   help="simulator time scale (default: the stack's; --quick: 10)")
    p.add_argument("--out", help="results root (default: results/ or $SGLAB_RESULTS_DIR)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--target", choices=["sim", "urls", "in-cluster"], default=None,
                   help="sim (default): one `sglab sim` per arm; urls: deployed servers (--baseline-url, --arm-url); "
                        "in-cluster: a wave's benchmark Job against its slots (with --result-configmap)")
    p.add_argument("--next", action="store_true", help="a sweep on a cluster, run from here: print and run its next "
                   "step (pulumi config + pulumi up: wave 1, the next wave, the confirmation, or a resume)"),
    p.add_argument("--dry-run", action="store_true", help="with --next: print the commands, run none")
    p.add_argument("--yes", action="store_true", help="with --next: pulumi up --yes (no interactive confirmation)")
    p.add_argument("--rerun", action="store_true", help="with --next: a new benchmark Job for a step being resumed")
    p.add_argument("--max-nodes", type=model_option(Placement, "max_nodes", "placement.max-nodes"),
                   help="with --next: the GPU nodes the sweep may hold (default: "
                   "placement.max-nodes); a step that would not fit is refused")
    p.add_argument("--baseline-url", help="with --target urls: the baseline server")
    p.add_argument("--arm-url", action="append", default=[], metavar="NAME=URL",
                   help="with --target urls: a grid arm's server (repeat; only these arms are swept)")
    p.add_argument("--result-configmap", metavar="NAME",
                   help="in the benchmark Job: also store the sweep's result in this pre-created ConfigMap")
    p.set_defaults(func=run)


URL_REASON = "not among the deployed arms (--arm-url)"


from sglab.sweep.grid import QUICK_REASON  # noqa: E402


def _skip_variants(loaded, args) -> dict[str, str]:
    if not args.probe:  # without a probe run, every NCCL variant is swept
        return {}
    from sglab.probe.result import load_probe, prune_variants

    try:
        probe = load_probe(args.probe)
    except ValueError as exc:
        raise UsageError(f"--probe {args.probe}: {exc}") from None
    decision = prune_variants(probe, loaded.config.sweep.variants())
    for note in decision.notes:
        print(f"probe: {printable(note, limit=None)}", file=sys.stderr)
    return {s.name: printable(s.reason, limit=None) for s in decision.skipped}  # the probe file's words, recorded


def _grid(loaded, args):
    from sglab.sweep.grid import expand, quick_subset

    grid = expand(loaded, skip_variants=_skip_variants(loaded, args))
    if args.quick:
        try:
            grid = quick_subset(grid, loaded.config.sweep)
        except ValueError as exc:
            raise UsageError(f"{loaded.path}: sweep.quick-arms: {exc}") from None
    return _deployed(grid, _urls(args))


def _urls(args) -> dict[str, str]:
    """arm name -> URL for --target urls ("baseline" included); empty for simulators."""
    given = bool(args.baseline_url or args.arm_url)
    target = args.target or ("urls" if given else "sim")
    if args.result_configmap and target != "in-cluster":
        raise UsageError("--result-configmap stores a wave's result for the Pulumi program: it goes with --target "
                         "in-cluster (the wave's benchmark Job, against its slots)")
    if target == "sim":
        if given:
            raise UsageError("--baseline-url/--arm-url go with --target urls (or leave --target out)")
        return {}
    if not args.baseline_url or not args.arm_url:
        raise UsageError(f"--target {target} needs --baseline-url and at least one --arm-url NAME=URL")
    if args.time_scale is not None:
        raise UsageError("--time-scale sets the simulators' speed; with --target urls the servers run as deployed")
    urls = {"baseline": args.baseline_url}
    for item in args.arm_url:
        name, sep, url = item.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise UsageError(f"--arm-url {item!r}: give NAME=URL, e.g. s3-k1-d4=http://sglang-slot-1:30000")
        if name in urls:
            raise UsageError(f"--arm-url names {name!r} twice" if name != "baseline" else
                             "--arm-url baseline: the baseline is --baseline-url")
        urls[name] = url
    return urls


def _deployed(grid, urls: dict[str, str]):
    """The grid's arms that --arm-url names (in the grid's order); every name must be an arm of the grid."""
    if not urls:
        return grid
    from sglab.sweep.grid import Grid, SkippedArm

    from sglab.sweep.race import PREFIX

    named = set(urls) - {"baseline"}
    calibrating = {name for name in named if name.startswith(PREFIX)}
    if calibrating and calibrating != named:
        raise UsageError(f"--arm-url names calibration servers ({', '.join(sorted(calibrating))}) beside arms of the "
                         "grid; a cluster sweep's calibration step runs only the baseline's config in every slot")
    named -= calibrating
    unknown = sorted(named - {a.name for a in grid.arms})
    if unknown:
        raise UsageError(f"--arm-url names {unknown}, which are not arms of this stack's grid (see --list)")
    kept = [a for a in grid.arms if a.name in named]
    left = [SkippedArm(a.name, URL_REASON) for a in grid.arms if a.name not in named]
    return Grid(baseline=grid.baseline, arms=kept, skipped=grid.skipped + left, notes=list(grid.notes))


def _run_dir(loaded, args) -> Path:
    from sglab.results.store import results_root

    given = Path(args.resume)
    if given.is_dir():
        return given
    path = (Path(args.out) if args.out else results_root()) / loaded.name / args.resume
    if not path.is_dir():
        raise UsageError(f"--resume {args.resume}: no sweep run at {path}")
    return path


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    if loaded.config.sweep is None:
        raise UsageError(f"{loaded.path}: stack '{loaded.name}' has no sglab:sweep section; declare the grid "
                         "(see stacks/Pulumi.eagle-sweep.yaml and docs/sweep.md)")
    if args.next:  # on a cluster: sglab/sweep/next_wave.py
        if args.target is not None:
            raise UsageError(f"--next advances the sweep on the cluster from here (its waves run as benchmark Jobs); "
                             f"give it no --target (--target {args.target} runs a sweep here)")
        if args.max_nodes is not None and args.max_nodes < 1:
            raise UsageError("--max-nodes must be at least 1")
        from sglab.sweep.next_wave import run_next

        return run_next(loaded, dry_run=args.dry_run, yes=args.yes, max_nodes=args.max_nodes, rerun=args.rerun)
    grid = _grid(loaded, args)
    print(f"sglab sweep {loaded.name}: {len(grid.arms)} arms, {len(grid.skipped)} skipped", file=sys.stderr)
    quick_left = [s for s in grid.skipped if s.reason == QUICK_REASON]
    for s in grid.skipped:
        if s.reason != QUICK_REASON:
            print(f"  skipped {s.name}: {s.reason}", file=sys.stderr)
    if quick_left:
        print(f"  left out by --quick (not in sweep.quick-arms): {len(quick_left)}", file=sys.stderr)
    if args.list:
        from sglab.sweep.arms import arm_waves

        waves = arm_waves(loaded.config, loaded.name)  # on a cluster (sglab:sweep.wave, docs/sweep.md)
        for a in grid.arms:
            print(f"{a.name}  {a.config_hash[:12]}" + (f"  wave {waves[a.name]}" if a.name in waves else ""))
        return 0
    if not grid.arms and not any(name.startswith("baseline@") for name in _urls(args)):  # not a calibration step
        raise UsageError(f"{loaded.path}: sweep: every combination of the grid was skipped (see above)")
    import locust  # noqa: F401  (gevent monkey-patching before the runner's imports)

    from sglab.load.request import RefusedError
    from sglab.load.targets import TargetError
    from sglab.results.store import write_result
    from sglab.sweep.confirm import run_confirmation
    from sglab.schema.verdict import SweepVerdict
    from sglab.sweep.outputs import chance_phrase, pick_record, ranking_table, sweep_verdict, write_outputs
    from sglab.sweep.run import load_resume, load_state, resume_sweep, run_sweep

    progress = not args.no_progress and sys.stderr.isatty()
    out = Path(args.out) if args.out else None
    urls = _urls(args)
    target = (args.target or "urls") if urls else "sim"
    try:
        if args.resume:
            run_dir = _run_dir(loaded, args)
            state = load_state(run_dir)
            grid = grid if not state.quick else _quick(loaded, args)
            state, result = load_resume(loaded, grid, run_dir, state)  # verified; nothing unsealed decides
            if not result.complete:
                state, result, run_dir = resume_sweep(loaded, grid, run_dir, result, state, urls=urls,
                                                      progress=progress)
        else:
            loaded = _with_rounds(loaded, args.rounds)
            plan, sim_env = _plan(loaded, args)
            if target == "sim":
                check_streams(loaded, plan, sim_env)
            state, result, run_dir = run_sweep(loaded, grid, plan, quick=args.quick, target=target, urls=urls,
                                               sim_env={} if urls else sim_env, out=out, progress=progress)
    except (TargetError, ValueError, RefusedError) as exc:
        print(f"error: {printable(exc, newlines=True, limit=None)}", file=sys.stderr)
        return USAGE
    if state.status == "interrupted":
        return INTERRUPTED
    if state.winner and state.confirmation is None and not args.no_confirm:
        print(f"sweep pick {state.winner}, {chance_phrase(pick_record(state))}: confirmation A/B on "
              "fresh rounds",
              file=sys.stderr)
        state.status = "confirming"
        state.save(run_dir)
        confirmation, confirm_dir = run_confirmation(loaded, state, grid, out=out, progress=progress)
        state.save(run_dir)
        print(f"confirmation: {confirm_dir / 'result.json'}")
    write_outputs(state, result, run_dir, gpus_per_arm=_gpus(loaded))
    # the pick and its P(correct selection) in result.json (never A/B evidence)
    result.verdict = SweepVerdict.model_validate(sweep_verdict(state))
    write_result(result, run_dir, overwrite=True)
    print(ranking_table(state))  # sweep.json's names and reasons: plain text by its schema
    print(f"sweep: {run_dir}")
    print(result.verdict.sentence)
    if args.result_configmap and _store(result, run_dir, args.result_configmap) != 0:
        return USAGE
    if state.status == "confirmed":
        print(f"promote the winner: sglab promote --stack {loaded.name} --result "
              f"{printable(state.confirmation['path'])}")
    return 0


def _store(result, run_dir: Path, configmap: str) -> int:
    """The benchmark Job's hand-over: the result (its verdict = the sweep's ranking and pick) in the ConfigMap."""
    from sglab.results.sink import write_result_configmap

    try:
        namespace = write_result_configmap((run_dir / "result.json").read_text(encoding="utf-8"), configmap)
    except Exception as exc:  # API unreachable or forbidden: the Job fails with one clear line
        print(f"error: cannot store the result in ConfigMap {configmap}: {type(exc).__name__}: {printable(exc)}",
              file=sys.stderr)
        return USAGE
    print(f"result stored in ConfigMap {namespace}/{configmap}")
    return 0


def _quick(loaded, args):
    args.quick = True
    return _grid(loaded, args)


def _gpus(loaded) -> int | None:
    p = loaded.config.placement
    return p.gpus_per_node * p.nodes or None


def _with_rounds(loaded, rounds: int | None):
    """The stack as this run judges it: --rounds (bounded like sweep.max-rounds by its option) replaces it."""
    if rounds is None:
        return loaded
    sweep = loaded.config.sweep.model_copy(update={"max_rounds": rounds})
    return dataclasses.replace(loaded, config=loaded.config.model_copy(update={"sweep": sweep}))


def _plan(loaded, args):
    from pydantic import ValidationError

    from sglab.core.errors import ConfigError
    from sglab.load.schedule import QUICK_SIM_TIME_SCALE, plan_for

    overrides = {}
    if args.round_s is not None:
        overrides["round_duration_s"] = args.round_s
    try:
        plan = plan_for(loaded, quick=args.quick, overrides=overrides)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise ConfigError(loaded.path, "load." + ".".join(str(p) for p in err["loc"]), err["msg"]) from None
    sim_env = {}
    if args.time_scale is not None:  # bounded by its option's type
        sim_env["SGLAB_SIM_TIME_SCALE"] = f"{args.time_scale:g}"
    elif args.quick:
        sim_env["SGLAB_SIM_TIME_SCALE"] = f"{QUICK_SIM_TIME_SCALE:g}"
    return plan, sim_env
