"""`python -m sglab.probe.nccl`: measure all-reduce at decode sizes for each NCCL variant, write JSON + table.

  python -m sglab.probe.nccl --stack eagle-nccl-ll              # sizes and variants from a stack
  python -m sglab.probe.nccl --spec spec.json --out probe.json   # what the cluster Job runs
  python -m sglab.probe.nccl --stack S --backend gloo --world-size 2   # CPU smoke test (eager, no graphs)

With --stack the result goes to results/<stack>/probe-<id>/probe.json unless --out says otherwise.
Exit codes: 0 all variants measured, 1 some failed (the result says which), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from sglab.probe.result import PROBE_FILE, ProbeResult, new_probe_id, to_json
from sglab.probe.runner import run_probe
from sglab.probe.spec import ProbeRunSpec
from sglab.probe.table import render_table


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sglab.probe.nccl", description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--stack", help="stack name: sizes and variants from stacks/Pulumi.<stack>.yaml")
    src.add_argument("--spec", type=Path, help="a probe run spec (JSON, as the cluster Job gets it)")
    p.add_argument("--out", type=Path, help="result file (default with --stack: results/<stack>/probe-<id>/probe.json)")
    p.add_argument("--backend", choices=["nccl", "gloo"], help="nccl (GPUs, CUDA graphs) or gloo (CPU, eager)")
    p.add_argument("--world-size", type=int, help="processes (GPUs); default: the stack's gpus-per-node")
    p.add_argument("--samples", type=int, help="timed samples per size (overrides the spec)")
    p.add_argument("--eager", action="store_true",
                   help="no CUDA graph: time eager launches (to see what graphs remove; not what decode runs)")
    p.add_argument("--allow-nvls", action="store_true",
                   help="let a variant set NCCL_NVLS_ENABLE=1 (never on a machine whose GPUs others share)")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 once the result is written, even if a variant failed (the result says which)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def _spec(args: argparse.Namespace) -> ProbeRunSpec:
    if args.spec is not None:
        spec = ProbeRunSpec.model_validate_json(args.spec.read_text(encoding="utf-8"))
    else:
        from sglab.config.loader import load_stack
        from sglab.probe.plan import probe_spec

        stack = load_stack(args.stack).config
        spec = probe_spec(stack, args.stack, world_size=args.world_size, backend=args.backend,
                          allow_nvls=args.allow_nvls)
    updates = {}
    if args.backend:
        updates["backend"] = args.backend
    if args.world_size:
        updates["world_size"] = args.world_size
    if args.samples:
        updates["samples"] = args.samples
    if args.allow_nvls:
        updates["allow_nvls"] = True
    if args.eager:
        updates["capture"] = "eager"
    if updates:
        spec = ProbeRunSpec.model_validate({**spec.model_dump(), **updates})
    return spec


def _out_path(args: argparse.Namespace, run_id: str) -> Path:
    if args.out is not None:
        return args.out
    from sglab.results.store import results_root

    return results_root() / args.stack / run_id / PROBE_FILE


def write_result(result: ProbeResult, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(to_json(result), encoding="utf-8")
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        spec = _spec(args)
    except (ValidationError, ValueError, OSError) as exc:
        print(f"error: bad probe input: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # ConfigError from the stack loader: its message names file, key and fix
        if type(exc).__name__ != "ConfigError":
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run_id = new_probe_id()
    out = _out_path(args, run_id)
    say = (lambda _: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    say(f"probe {run_id}: {len(spec.variants)} variants x {len(spec.sizes)} sizes, world size {spec.world_size}, "
        f"backend {spec.backend}, {spec.mode}")
    result = run_probe(spec, run_id=run_id, progress=say)
    write_result(result, out)
    sys.stdout.write(render_table(result))
    print(f"wrote {out}", file=sys.stderr)
    return 0 if result.complete or args.exit_zero else 1


if __name__ == "__main__":
    sys.exit(main())
