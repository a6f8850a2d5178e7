"""One rank of the probe: all-reduce each size, captured in a CUDA graph (NCCL) or eagerly (gloo), and time it.

Started by the runner (sglab/probe/nccl.py) as `python -m sglab.probe.worker --spec SPEC --out FILE` with RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and the variant's NCCL_* env already set, so NCCL sees the
variant from its first call. SGLang replays decode as CUDA graphs: timing eager launches would measure the
Python and launch overhead (several microseconds per call), not the collective, which at 14 KB takes
about as long. A sample is one graph replay of `ops_per_graph` back-to-back all-reduces, timed with CUDA
events; its time per all-reduce is the sample. Imports torch and the standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any

import torch
import torch.distributed as dist


def _rank_env() -> tuple[int, int, int]:
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0"))


def _check_sum(x: torch.Tensor, world_size: int) -> bool:
    """One eager all-reduce of ones must give world_size everywhere (bf16 holds small integers exactly)."""
    x.fill_(1)
    dist.all_reduce(x)
    ok = bool(torch.all(x == world_size).item())
    x.zero_()
    return ok


def _time_graph(x: torch.Tensor, spec: dict[str, Any]) -> list[float]:
    """Per-all-reduce microseconds of each timed replay of a graph holding ops_per_graph all-reduces."""
    ops = spec["ops_per_graph"]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm the communicator on the capture stream's side, as capture requires
        for _ in range(3):
            dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(ops):
            dist.all_reduce(x)
    for _ in range(spec["warmup_replays"]):
        graph.replay()
    torch.cuda.synchronize()
    n = spec["samples"]
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    times = [start.elapsed_time(end) * 1000.0 / ops for start, end in events]
    del graph
    return times


def _time_eager(x: torch.Tensor, spec: dict[str, Any]) -> list[float]:
    """No graph: a sample is ops_per_graph eager all-reduces, wall clock until the device is idle (gloo: CPU)."""
    ops = spec["ops_per_graph"]
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    for _ in range(spec["warmup_replays"]):
        dist.all_reduce(x)
    sync()
    times = []
    for _ in range(spec["samples"]):
        start = time.perf_counter()
        for _ in range(ops):
            dist.all_reduce(x)
        sync()
        times.append((time.perf_counter() - start) * 1e6 / ops)
    return times


def _environment(backend: str) -> dict[str, Any]:
    info: dict[str, Any] = {"torch": torch.__version__, "hostname": os.uname().nodename}
    if backend == "nccl":
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
        version = torch.cuda.nccl.version()
        info["nccl"] = ".".join(str(p) for p in version) if isinstance(version, tuple) else str(version)
    return info


def run(spec: dict[str, Any]) -> dict[str, Any]:
    rank, world_size, local_rank = _rank_env()
    backend = spec["backend"]
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", rank=rank, world_size=world_size, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
    graphs = backend == "nccl" and spec.get("capture", "graph") == "graph"
    out: dict[str, Any] = {"rank": rank, "world_size": world_size, "environment": _environment(backend),
                           "mode": "cuda-graph" if graphs else "eager", "sizes": []}
    try:
        for size in spec["sizes"]:
            x = torch.zeros(size["bytes"] // 2, dtype=torch.bfloat16, device=device)
            correct = _check_sum(x, world_size)
            dist.barrier()
            times = _time_graph(x, spec) if graphs else _time_eager(x, spec)
            out["sizes"].append({"bytes": size["bytes"], "correct": correct, "times_us": times})
            del x
            dist.barrier()
    finally:
        dist.destroy_process_group()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sglab.probe.worker")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    with open(args.spec, encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        result = run(spec)
    except Exception as exc:  # reported by the runner as this variant's failure
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=6)}
        status = 1
    else:
        status = 0
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    os.replace(tmp, args.out)
    return status


if __name__ == "__main__":
    sys.exit(main())
