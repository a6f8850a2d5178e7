"""What one probe run measures: sizes, NCCL variants and timing, as a JSON document the workers read, and the
message sizes of the decode-path all-reduces it probes.

`sglab.probe.plan` builds the run spec from a stack; the cluster Job gets it as a file; `python -m sglab.probe.nccl
--spec FILE` runs it anywhere. Every variant states NCCL_NVLS_ENABLE explicitly, and a variant that turns
NVLink multicast on is refused unless the run allows it (`allow_nvls`): on a shared host it can put the
GPUs out of service.

Message sizes: a tensor-parallel decode step all-reduces each row-parallel layer's output (attention
out-projection, MLP/MoE down-projection): `tokens x hidden_size` elements whatever the TP degree. Tokens per step
are the batch (one token per running request) on a plain server, `batch x num_draft_tokens` in an EAGLE verify
pass and `batch x eagle_topk` in each draft step. Sizes are bf16 (2 bytes per element).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sglab.sglang.collectives import NVLS_ENV as NVLS_KEY, SGLANG_OWNED_NCCL_ENV

# Set by SGLang itself from its flags, so part of every variant (the probe Job ships collectives.py too).
SGLANG_OWNED_KEYS = tuple(SGLANG_OWNED_NCCL_ENV)
DEFAULT_VARIANT = "nccl-default"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Variant(_Strict):
    """One NCCL environment, started in fresh processes (NCCL reads its env once, at communicator init)."""

    name: str
    env: dict[str, str]
    source: str = ""

    @model_validator(mode="after")
    def _explicit(self) -> "Variant":
        if not _NAME.match(self.name):
            raise ValueError(f"variant name {self.name!r}: use lowercase letters, digits, '-' and '.'")
        if NVLS_KEY not in self.env:
            raise ValueError(f"variant {self.name!r} does not set {NVLS_KEY}; every variant must say it explicitly")
        bad = [k for k in self.env if not k.startswith("NCCL_")]
        if bad:
            raise ValueError(f"variant {self.name!r}: only NCCL_* variables belong in a variant, not {bad}")
        return self

    @property
    def tuned_env(self) -> dict[str, str]:
        """The variant's own settings, without the keys SGLang sets from its flags."""
        return {k: v for k, v in sorted(self.env.items()) if k not in SGLANG_OWNED_KEYS}


class SizeSpec(_Strict):
    bytes: int = Field(gt=0)
    sources: list[str] = Field(default_factory=list)

    @property
    def decode(self) -> bool:
        return bool(self.sources)


class ProbeRunSpec(_Strict):
    stack: str | None = None
    backend: Literal["nccl", "gloo"] = "nccl"
    world_size: int = Field(ge=1, le=64)  # ranks on one node (one process each)
    hidden_size: int = Field(ge=1)
    hidden_size_source: str
    dtype: Literal["bfloat16"] = "bfloat16"
    # graph: as SGLang decodes (the measurement); eager: one launch per call (shows what graphs remove).
    capture: Literal["graph", "eager"] = "graph"
    sizes: list[SizeSpec]
    variants: list[Variant]
    warmup_replays: int = Field(20, ge=1, le=10_000)
    ops_per_graph: int = Field(10, ge=1, le=10_000)
    samples: int = Field(200, ge=5, le=100_000)
    confidence: float = Field(0.95, gt=0.5, lt=1)
    variant_timeout_s: float = Field(300.0, gt=0, le=86_400, allow_inf_nan=False)
    allow_nvls: bool = False

    @model_validator(mode="after")
    def _checks(self) -> "ProbeRunSpec":
        if not self.sizes:
            raise ValueError("no message sizes to probe")
        odd = [s.bytes for s in self.sizes if s.bytes % 2]
        if odd:
            raise ValueError(f"sizes {odd} are not whole bf16 elements (2 bytes each)")
        names = [v.name for v in self.variants]
        if not names or names[0] != DEFAULT_VARIANT:
            raise ValueError(f"the first variant must be {DEFAULT_VARIANT!r} "
                             "(the reference every other is compared to)")
        if len(set(names)) != len(names):
            raise ValueError(f"variant names repeat: {names}")
        if not self.allow_nvls:
            on = [v.name for v in self.variants if v.env.get(NVLS_KEY) != "0"]
            if on:
                raise ValueError(f"variants {on} set {NVLS_KEY} to something other than 0 (NVLink multicast); "
                                 "pass --allow-nvls only on a machine whose GPUs nobody else shares")
        return self

    @property
    def mode(self) -> str:
        return "cuda-graph" if self.backend == "nccl" and self.capture == "graph" else "eager"

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)


# Message sizes of the decode-path all-reduces: hidden size x tokens per step, in bf16 bytes.
BF16_BYTES = 2
SWEEP_MIN_BYTES = 16 * 1024
SWEEP_MAX_BYTES = 1024 * 1024

# hidden_size from each model family's config.json, matched against the model path (longest match wins).
# Kimi K2/K2.5 use the DeepSeek-V3 architecture. An EAGLE/NEXTN draft layer has its target's hidden size.
KNOWN_HIDDEN_SIZES: dict[str, int] = {
    "kimi-k2": 7168,
    "deepseek-v3": 7168,
    "deepseek-r1": 7168,
    "llama-3-8b": 4096,
    "llama-3.1-8b": 4096,
    "llama-3-70b": 8192,
    "llama-3.1-70b": 8192,
    "llama-3.3-70b": 8192,
    "llama-3.1-405b": 16384,
    "qwen2.5-7b": 3584,
    "qwen2.5-72b": 8192,
    "qwen3-32b": 5120,
    "qwen3-235b": 4096,
    "mixtral-8x7b": 4096,
    "gpt-oss-120b": 2880,
}


def hidden_size_for(model_path: str) -> int | None:
    """The hidden size of a known model family named in `model_path` (its last path part), else None."""
    name = PurePosixPath(model_path.rstrip("/")).name.lower().replace("_", "-")
    matches = [key for key in KNOWN_HIDDEN_SIZES if key in name]
    return KNOWN_HIDDEN_SIZES[max(matches, key=len)] if matches else None


@dataclass
class MessageSize:
    """One all-reduce size to probe, with the decode steps that produce it (empty: sweep only)."""

    bytes: int
    sources: list[str] = field(default_factory=list)

    @property
    def decode(self) -> bool:
        return bool(self.sources)


@dataclass(frozen=True)
class DecodeStep:
    """A decode-path forward pass of one arm at one load level: `tokens` rows through the TP all-reduces."""

    label: str
    tokens: int


def decode_steps(levels: list[int], *, max_running: int | None, speculative: bool, num_draft_tokens: int | None,
                 eagle_topk: int | None, has_draft_layer: bool, arm: str) -> list[DecodeStep]:
    """The forward passes of one arm at each concurrency level (batch capped by max-running-requests)."""
    steps = []
    for level in levels:
        batch = min(level, max_running) if max_running else level
        if not speculative:
            steps.append(DecodeStep(f"{arm} decode c={level}", batch))
            continue
        if num_draft_tokens:
            steps.append(DecodeStep(f"{arm} verify c={level}", batch * num_draft_tokens))
        if has_draft_layer and eagle_topk:
            steps.append(DecodeStep(f"{arm} draft c={level}", batch * eagle_topk))
    return steps


def sweep_sizes(min_bytes: int = SWEEP_MIN_BYTES, max_bytes: int = SWEEP_MAX_BYTES) -> list[int]:
    """Powers of two from min_bytes to max_bytes (all_reduce_perf -b 16K -e 1M -f 2)."""
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def message_sizes(steps: list[DecodeStep], hidden_size: int, sweep: list[int]) -> list[MessageSize]:
    """Decode sizes (with the steps behind each) merged with the sweep, ascending, each size once."""
    by_bytes: dict[int, MessageSize] = {}
    for step in steps:
        size = step.tokens * hidden_size * BF16_BYTES
        by_bytes.setdefault(size, MessageSize(size)).sources.append(step.label)
    for size in sweep:
        by_bytes.setdefault(size, MessageSize(size))
    return [by_bytes[b] for b in sorted(by_bytes)]


def human_bytes(size: int) -> str:
    """16384 -> '16 KiB', 14336 -> '14 KiB', 1048576 -> '1 MiB'."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{size} B"
