"""The NCCL_* environment of an arm (the variables declared in sglab/sglang/nccl.py, checked and normalised), and
`sglab:probe`, the NCCL all-reduce probe (sglab/probe/) that measures NCCL settings before the arms run.

NCCL itself ignores or mis-reads many bad values silently, which is how a typo becomes an unmeasured
confound; sglab refuses them instead, and renders the normal form NCCL reads (see sglab.sglang.nccl).
Undeclared NCCL_* keys are passed through with a warning.
"""

from __future__ import annotations

import re
import warnings
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from sglab.config.base import KeyedValueError, Model
from sglab.sglang import nccl as contract


KNOWN_NCCL_KEYS = contract.known_names()


class UnknownNcclKeyWarning(UserWarning):
    """An NCCL_* key we do not type-check; it is passed through unchanged."""


def _lax_scalar(key: str, value: Any) -> str | None:
    """NCCL reads text: a YAML boolean or a decimal written for it would be silently turned into 1/0 or 8."""
    var = contract.nccl_var(key)
    if isinstance(value, bool) and (var is None or var.kind != "int"):  # an int's own check says so already
        return (f"{key} is {str(value).lower()}, a boolean, but NCCL reads text; write the value NCCL documents "
                "(for a switch: 1 or 0)")
    if isinstance(value, float) and value.is_integer():
        return f"{key} is {value!r}, a decimal number, but NCCL reads whole numbers here; write {int(value)}"
    return None


class _NcclBase(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            key = str(key)
            if not contract.NCCL_NAME.match(key):
                raise KeyedValueError((key,), f"'{key}' is not an NCCL variable; only NCCL_* keys belong under "
                                              "nccl (put other variables under env)")
            if value is None:
                continue
            lax = _lax_scalar(key, value)
            if lax:
                raise KeyedValueError((key,), lax)
            try:
                out[key] = contract.normalise(key, value)
            except contract.NcclValueError as exc:
                raise KeyedValueError((key,), f"{key}: {exc}") from None
            if contract.nccl_var(key) is None:
                warnings.warn(f"{key} is not one of the NCCL variables sglab checks; passing it through unchecked",
                              UnknownNcclKeyWarning, stacklevel=2)
        return out

    def as_env(self) -> dict[str, str]:
        """The variables that are set, as strings, sorted by name."""
        return dict(sorted((k, str(v)) for k, v in self.model_dump(exclude_none=True).items()))


# One optional string field per declared variable (the key reference lists them); values arrive normalised.
_FIELDS: dict[str, Any] = {name: (str | None, None) for name in KNOWN_NCCL_KEYS}
NcclEnv = create_model("NcclEnv", __base__=_NcclBase, __doc__="The NCCL_* environment of an arm.", **_FIELDS)


_VARIANT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")
RESERVED_VARIANTS = ("nccl-default", "arms", "baseline", "candidate")


class ProbeSpec(Model):
    """What the probe measures and how long it may take (docs/nccl.md)."""

    enabled: bool = False
    # None: from the known-model table in sglab/probe/spec.py (matched against model.path).
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
