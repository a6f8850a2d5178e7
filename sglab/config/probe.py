"""`sglab:probe`: the NCCL all-reduce probe (sglab/probe/), run as a Job before the arms when enabled."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from sglab.config.base import KeyedValueError, Model
from sglab.config.nccl import NcclEnv

_VARIANT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")
RESERVED_VARIANTS = ("nccl-default", "arms", "baseline", "candidate")


class ProbeSpec(Model):
    """What the probe measures and how long it may take (docs/nccl.md)."""

    enabled: bool = False
    # None: from the known-model table in sglab/probe/sizes.py (matched against model.path).
    hidden_size: Annotated[int, Field(ge=1)] | None = None
    sweep_min_bytes: Annotated[int, Field(ge=2, le=2 ** 33)] = 16 * 1024
    sweep_max_bytes: Annotated[int, Field(ge=2, le=2 ** 33)] = 1024 * 1024  # 8 GiB: a buffer per rank
    samples: Annotated[int, Field(ge=5, le=100_000)] = 200  # the probe run's bounds (sglab/probe/spec.py)
    ops_per_graph: Annotated[int, Field(ge=1, le=10_000)] = 10
    warmup_replays: Annotated[int, Field(ge=1, le=10_000)] = 20
    confidence: Annotated[float, Field(gt=0.5, lt=1)] = 0.95
    # Extra NCCL settings to measure beside NCCL's default and the arms' own (name -> NCCL_* env).
    variants: dict[str, NcclEnv] = Field(default_factory=dict)
    # A sweep skips variants slower than NCCL's default at every decode size by more than this.
    prune_margin: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)] = 0.05
    timeout_min: Annotated[int, Field(ge=1, le=1440)] = 20
    rerun: str = ""

    @field_validator("rerun", mode="before")
    @classmethod
    def _token_as_string(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @field_validator("variants")
    @classmethod
    def _names(cls, variants: dict[str, NcclEnv]) -> dict[str, NcclEnv]:
        for name in variants:
            if not _VARIANT_NAME.match(name):
                raise KeyedValueError((name,), f"variant name {name!r}: use lowercase letters, digits, '-' and '.'")
            if name in RESERVED_VARIANTS:
                raise KeyedValueError((name,), f"variant name {name!r} is reserved for the variants the probe "
                                               "derives itself; pick another name")
        return variants

    @model_validator(mode="after")
    def _sweep(self) -> "ProbeSpec":
        if self.sweep_min_bytes > self.sweep_max_bytes:
            raise KeyedValueError("sweep-min-bytes", f"sweep-min-bytes {self.sweep_min_bytes} is above "
                                  f"sweep-max-bytes {self.sweep_max_bytes}; swap them")
        if self.sweep_min_bytes % 2:
            raise KeyedValueError("sweep-min-bytes", "sweep-min-bytes must be even (whole bf16 elements)")
        return self
