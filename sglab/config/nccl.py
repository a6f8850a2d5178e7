"""The NCCL_* environment of an arm: the variables declared in sglab/sglang/nccl.py checked and normalised.

NCCL itself ignores or mis-reads many bad values silently, which is how a typo becomes an unmeasured
confound; sglab refuses them instead, and renders the normal form NCCL reads (see sglab.sglang.nccl).
Undeclared NCCL_* keys are passed through with a warning.
"""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model, model_validator

from sglab.config.base import KeyedValueError
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
