"""`sglab probe`: the NCCL all-reduce probe (docs/nccl.md).

    sglab probe nccl --stack S               # print the probe Job (and companions) as YAML, like render
    sglab probe run --stack S [--backend gloo --world-size 2]   # run the probe here (GPUs, or CPU smoke test)
    sglab probe show --stack S | PATH        # the table of the newest (or a given) probe result
    sglab probe store --file F --result-configmap NAME          # the Job's last step: result into ConfigMaps
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglab.cli import UsageError
from sglab.cli.bounds import model_choices, model_option
from sglab.config.loader import load_stack
from sglab.core.untrusted import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="NCCL all-reduce probe at the stack's decode sizes (render the Job, run, show)")
    actions = p.add_subparsers(dest="probe_action", metavar="ACTION")
    actions.required = True

    job = actions.add_parser("nccl", help="print the probe Job for a stack's GPU nodes as YAML")
    job.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml)")
    job.add_argument("--out", type=Path, help="write one YAML file per object into this directory instead")
    job.set_defaults(func=_render)

    run = actions.add_parser("run", help="run the probe on this machine (python -m sglab.probe.nccl)")
    run.add_argument("--stack", required=True)
    from sglab.probe.spec import ProbeRunSpec

    run.add_argument("--backend", choices=model_choices(ProbeRunSpec, "backend"))
    run.add_argument("--world-size", type=model_option(ProbeRunSpec, "world_size", "the probe's world size"))
    run.add_argument("--samples", type=model_option(ProbeRunSpec, "samples", "sglab:probe.samples"))
    run.add_argument("--out", type=Path)
    run.add_argument("--allow-nvls", action="store_true")
    run.set_defaults(func=_run)

    show = actions.add_parser("show", help="print a probe result's table")
    show.add_argument("path", nargs="?", type=Path, help="probe.json or its probe-<id> directory")
    show.add_argument("--stack", help="the newest probe of this stack under results/")
    show.set_defaults(func=_show)

    store = actions.add_parser("store", help="write a probe result into its result ConfigMaps (in the Job)")
    store.add_argument("--file", type=Path, required=True)
    store.add_argument("--result-configmap", required=True)
    store.add_argument("--namespace")
    store.set_defaults(func=_store)


def _render(args: argparse.Namespace) -> int:
    from sglab.config.lints import stack_lints
    from sglab.probe.job import probe_plan
    from sglab.deploy.render import object_filename, to_multidoc, to_yaml
    from sglab.probe.plan import probe_spec
    from sglab.probe.spec import human_bytes

    loaded = load_stack(args.stack)
    stack = loaded.config
    plan = probe_plan(stack, loaded.name)
    spec = probe_spec(stack, loaded.name)
    decode = [s for s in spec.sizes if s.decode]
    lines = [f"# sglab probe nccl --stack {loaded.name}: {len(plan.manifests())} objects; Job {plan.names.job} on one "
             f"{spec.world_size}-GPU node of the stack's placement, image "
             f"{plan.job['spec']['template']['spec']['initContainers'][0]['image']}",
             f"# hidden size {spec.hidden_size} ({spec.hidden_size_source}); decode sizes: "
             + ", ".join(human_bytes(s.bytes) for s in decode) + f"; sweep {human_bytes(stack.probe.sweep_min_bytes)}"
             f"-{human_bytes(stack.probe.sweep_max_bytes)}",
             "# variants: " + "; ".join(f"{v.name} ({' '.join(f'{k}={x}' for k, x in sorted(v.env.items()))})"
                                        for v in spec.variants)]
    lines += [f"# lint {lint.describe()}" for lint in stack_lints(stack)]
    if not stack.probe.enabled:
        lines.append("# sglab:probe.enabled is false: `pulumi up` does not deploy this; kubectl apply -f - does")
    header = printable("\n".join(lines) + "\n", newlines=True, limit=None)
    if args.out is None:
        sys.stdout.write(header + to_multidoc(plan.manifests()))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for index, obj in enumerate(plan.manifests()):
        (args.out / object_filename(index, obj)).write_text(to_yaml(obj))
    sys.stderr.write(header)
    return 0


def _run(args: argparse.Namespace) -> int:
    from sglab.probe.nccl import main

    argv = ["--stack", args.stack]
    for flag, value in (("--backend", args.backend), ("--world-size", args.world_size),
                        ("--samples", args.samples), ("--out", args.out)):
        if value is not None:
            argv += [flag, str(value)]
    if args.allow_nvls:
        argv.append("--allow-nvls")
    return main(argv)


def _show(args: argparse.Namespace) -> int:
    from sglab.probe.result import load_probe, render_table
    from sglab.probe.store import list_probes

    path = args.path
    if path is None:
        if not args.stack:
            raise UsageError("give a probe.json path or --stack NAME")
        found = list_probes(args.stack)
        if not found:
            raise UsageError(f"no probe results for stack {args.stack!r}; run: sglab probe run --stack {args.stack}")
        path = found[-1]
    try:
        result = load_probe(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.write(printable(render_table(result), newlines=True, limit=None))  # names and env from probe.json
    return 0


def _store(args: argparse.Namespace) -> int:
    from sglab.probe.store import store_to_configmap

    try:
        namespace = store_to_configmap(args.file, args.result_configmap, args.namespace)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"stored {args.file} in ConfigMap {namespace}/{args.result_configmap}")
    return 0
