"""Stacks and synthetic probe results for the probe tests."""

from __future__ import annotations

import copy
from typing import Any

from ruamel.yaml import YAML

from sglab.core.paths import stack_path
from sglab.config.stack import StackConfig
from sglab.probe.result import ProbeResult, SizeResult, VariantResult


def raw_stack(stack: str = "eagle-nccl-ll") -> dict[str, Any]:
    config = YAML(typ="safe").load(stack_path(stack).read_text())["config"]
    return {key.partition(":")[2]: value for key, value in config.items() if key.startswith("sglab:")}


def stack_with(changes: dict[str, Any], stack: str = "eagle-nccl-ll") -> StackConfig:
    raw = copy.deepcopy(raw_stack(stack))
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return StackConfig.model_validate(raw)


def size(bytes_: int, median: float, half: float, *, decode: bool = True) -> SizeResult:
    return SizeResult(bytes=bytes_, decode=decode, sources=["baseline decode c=1"] if decode else [],
                      median_us=median, ci_low_us=median - half, ci_high_us=median + half, ci_coverage=0.95,
                      min_us=median - half, samples=100, correct=True, algbw_gb_s=1.0)


def variant(name: str, env: dict[str, str], sizes: list[SizeResult], status: str = "ok") -> VariantResult:
    return VariantResult(name=name, env={"NCCL_NVLS_ENABLE": "0", "NCCL_CUMEM_ENABLE": "0", **env},
                         status=status, sizes=sizes if status == "ok" else [],
                         error=None if status == "ok" else "boom")


def probe_result(variants: list[VariantResult]) -> ProbeResult:
    return ProbeResult(run_id="probe-20261201T000000Z-abcdef", stack="eagle-nccl-ll",
                       created_at="2026-12-01T00:00:00+00:00", complete=True, backend="nccl", mode="cuda-graph",
                       world_size=8, hidden_size=7168, hidden_size_source="test", dtype="bfloat16", ops_per_graph=10,
                       samples=100, warmup_replays=20, confidence=0.95, variants=variants)
