"""`python -m sglab.probe.nccl`: measure all-reduce at decode sizes for each NCCL variant, write JSON + table.

  python -m sglab.probe.nccl --stack eagle-nccl-ll              # sizes and variants from a stack
  python -m sglab.probe.nccl --spec spec.json --out probe.json   # what the cluster Job runs
  python -m sglab.probe.nccl --stack S --backend gloo --world-size 2   # CPU smoke test (eager, no graphs)

With --stack the result goes to results/<stack>/probe-<id>/probe.json unless --out says otherwise.
Exit codes: 0 all variants measured, 1 some failed (the result says which), 2 bad input.

The runner (`run_probe`) is here because this command is its one caller: each variant runs in fresh worker
processes (`python -m sglab.probe.worker`, one per GPU) with exactly its env. NCCL reads its environment when a
communicator is created and caches some of it per process, so a variant can only be measured in processes
started with its env: each variant gets its own processes, rendezvous port and process group. Inherited NCCL_*
variables are dropped first, so nothing but the variant's own settings (NCCL_NVLS_ENABLE always among them)
reaches NCCL.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from sglab.probe.result import (PROBE_FILE, ProbeResult, VariantResult, build_result, new_probe_id, render_table,
                                to_json, variant_result)
from sglab.probe.spec import ProbeRunSpec, Variant


# ---- the runner: each variant in its own fresh processes ---------------------------------------------------

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding sglab/
ERROR_TAIL_CHARS = 2000
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with(parent_pid: int):
    """preexec_fn: the rank gets SIGKILL when the probe dies however it dies (Linux PR_SET_PDEATHSIG; SIGKILL, as
    a stopped rank never handles SIGTERM), or exits if that already happened. sglab.core.children does this for the
    rest of sglab; the probe ships into the server image alone (sglab/probe/job.py), so it has its own."""

    def preexec() -> None:
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def worker_env(variant: Variant, rank: int, world_size: int, port: int,
               base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of one worker: the parent's minus every NCCL_*, plus the variant and the rendezvous."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("NCCL_")}
    env.update(variant.env)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(PACKAGE_ROOT) + (os.pathsep + path if path else "")
    env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1"})
    return env


def _tail(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-ERROR_TAIL_CHARS:]
    except OSError:
        return ""


def run_variant(spec: ProbeRunSpec, variant: Variant, workdir: Path) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Start world_size workers for one variant and wait (bounded); the ranks' reports, or why there are none."""
    spec_path = workdir / "spec.json"
    spec_path.write_text(spec.model_dump_json(), encoding="utf-8")
    port = _free_port()
    procs: list[tuple[subprocess.Popen, Path, Path]] = []
    for rank in range(spec.world_size):
        out = workdir / f"{variant.name}.rank{rank}.json"
        log = workdir / f"{variant.name}.rank{rank}.log"
        with open(log, "w", encoding="utf-8") as log_fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sglab.probe.worker", "--spec", str(spec_path), "--out", str(out)],
                env=worker_env(variant, rank, spec.world_size, port), stdout=log_fh, stderr=subprocess.STDOUT,
                cwd=str(workdir), start_new_session=True, preexec_fn=_die_with(os.getpid()))
        procs.append((proc, out, log))
    deadline = time.monotonic() + spec.variant_timeout_s
    timed_out = False
    for proc, _, _ in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    if timed_out:
        for proc, _, _ in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the rank and anything it started (its own group)
                except ProcessLookupError:
                    pass
                proc.wait()
        return None, f"timed out after {spec.variant_timeout_s:g} s; rank 0 log: {_tail(procs[0][2])}"
    reports, errors = [], []
    for rank, (proc, out, log) in enumerate(procs):
        report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else None
        if proc.returncode != 0 or report is None or "error" in report:
            reason = (report or {}).get("error") or f"exit code {proc.returncode}"
            errors.append(f"rank {rank}: {reason}; log: {_tail(log)}")
        else:
            reports.append(report)
    if errors:
        return None, errors[0]
    return reports, None


def run_probe(spec: ProbeRunSpec, *, run_id: str | None = None,
              progress: Callable[[str], None] | None = None) -> ProbeResult:
    """Every variant of `spec`, one after another, each in its own processes."""
    say = progress or (lambda _: None)
    variants: list[VariantResult] = []
    environment: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="sglab-probe-") as tmp:
        for variant in spec.variants:
            say(f"variant {variant.name}: {' '.join(f'{k}={v}' for k, v in sorted(variant.env.items()))}")
            started = time.monotonic()
            reports, error = run_variant(spec, variant, Path(tmp))
            if reports and not environment:
                environment = dict(reports[0].get("environment") or {})
            result = variant_result(spec, variant, reports, error)
            variants.append(result)
            say(f"variant {variant.name}: {result.status} in {time.monotonic() - started:.1f} s"
                + (f" ({error.splitlines()[0]})" if error else ""))
    return build_result(spec, variants, run_id=run_id or new_probe_id(), environment=environment)


# ---- the command line --------------------------------------------------------------------------------------

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
        return 2  # sglab/core/errors.py USAGE (this module ships alone into the server image: no import of it)
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
