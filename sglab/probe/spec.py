"""What one probe run measures: sizes, NCCL variants and timing, as a JSON document the workers read.

`sglab.probe.plan` builds it from a stack; the cluster Job gets it as a file; `python -m sglab.probe.nccl
--spec FILE` runs it anywhere. Every variant states NCCL_NVLS_ENABLE explicitly, and a variant that turns
NVLink multicast on is refused unless the run allows it (`allow_nvls`): on a shared host it can put the
GPUs out of service.
"""

from __future__ import annotations

import re
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
