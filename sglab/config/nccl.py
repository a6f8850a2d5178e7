"""NCCL environment: the documented knobs typed, anything else passed through with a warning.

Values follow NCCL's environment-variable documentation (docs.nvidia.com/deeplearning/nccl,
"Environment Variables"). NCCL itself ignores or mis-parses bad values silently, which is how a
typo ends up as an unmeasured confound; we refuse them instead.
"""

from __future__ import annotations

import re
import warnings
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

NcclProto = Literal["LL", "LL128", "Simple", "^LL", "^LL128", "^Simple"]
NcclAlgo = Literal["Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"]
NcclP2PLevel = Literal["LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5"]
NcclDebug = Literal["VERSION", "WARN", "INFO", "TRACE"]

_BOOL_01 = Literal["0", "1"]

# Typed keys: env name -> allowed values (None = free string). The model below mirrors this table.
KNOWN_NCCL_KEYS = (
    "NCCL_PROTO",
    "NCCL_ALGO",
    "NCCL_P2P_LEVEL",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_TC",
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT",
    "NCCL_SOCKET_IFNAME",
    "NCCL_NVLS_ENABLE",
    "NCCL_CUMEM_ENABLE",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_BUFFSIZE",
    "NCCL_DEBUG",
    "NCCL_DEBUG_SUBSYS",
    "NCCL_TUNER_PLUGIN",
)

_ENV_NAME = re.compile(r"^NCCL_[A-Z0-9_]+$")


class UnknownNcclKeyWarning(UserWarning):
    """An NCCL_* key we do not type-check; it is passed through unchanged."""


def _split_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


class NcclEnv(BaseModel):
    """The NCCL_* environment of an arm. Keys are the literal variable names."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    NCCL_PROTO: str | None = None
    NCCL_ALGO: str | None = None
    NCCL_P2P_LEVEL: NcclP2PLevel | None = None
    NCCL_P2P_DISABLE: _BOOL_01 | None = None
    NCCL_SHM_DISABLE: _BOOL_01 | None = None
    NCCL_IB_DISABLE: _BOOL_01 | None = None
    NCCL_IB_HCA: str | None = None
    NCCL_IB_GID_INDEX: int | None = None
    NCCL_IB_TC: int | None = None
    NCCL_IB_TIMEOUT: int | None = None
    NCCL_IB_RETRY_CNT: int | None = None
    NCCL_SOCKET_IFNAME: str | None = None
    NCCL_NVLS_ENABLE: _BOOL_01 | None = None
    NCCL_CUMEM_ENABLE: _BOOL_01 | None = None
    NCCL_MIN_NCHANNELS: int | None = None
    NCCL_MAX_NCHANNELS: int | None = None
    NCCL_BUFFSIZE: int | None = None
    NCCL_DEBUG: NcclDebug | None = None
    NCCL_DEBUG_SUBSYS: str | None = None
    NCCL_TUNER_PLUGIN: str | None = None

    @field_validator("NCCL_PROTO")
    @classmethod
    def _proto(cls, value: str | None) -> str | None:
        return _check_list(value, ("LL", "LL128", "Simple"), "NCCL_PROTO")

    @field_validator("NCCL_ALGO")
    @classmethod
    def _algo(cls, value: str | None) -> str | None:
        return _check_list(
            value, ("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"), "NCCL_ALGO"
        )

    @field_validator("NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT")
    @classmethod
    def _non_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError("must be >= 0")
        return value

    @field_validator("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE")
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError("must be > 0")
        return value

    @model_validator(mode="after")
    def _extra_keys(self) -> "NcclEnv":
        for key, value in (self.model_extra or {}).items():
            if not _ENV_NAME.match(key):
                raise ValueError(
                    f"'{key}' is not an NCCL variable; only NCCL_* keys belong under nccl "
                    "(put other variables under env)"
                )
            if not isinstance(value, (str, int, float, bool)):
                raise ValueError(f"{key} must be a scalar value, got {type(value).__name__}")
            warnings.warn(
                f"{key} is not one of the NCCL variables sglab checks; passing it through unchecked",
                UnknownNcclKeyWarning,
                stacklevel=2,
            )
        return self

    def as_env(self) -> dict[str, str]:
        """The variables that are set, as strings, sorted by name."""
        out: dict[str, str] = {}
        for key, value in self.model_dump(exclude_none=True).items():
            out[key] = _env_str(value)
        return dict(sorted(out.items()))


def _env_str(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _check_list(value: str | None, allowed: tuple[str, ...], name: str) -> str | None:
    """NCCL_PROTO/NCCL_ALGO take a comma list, optionally negated with a leading '^'."""
    if value is None:
        return None
    body = value[1:] if value.startswith("^") else value
    items = _split_list(body)
    if not items:
        raise ValueError(f"{name} is empty")
    bad = [item for item in items if item not in allowed]
    if bad:
        raise ValueError(f"{name}={value!r}: {', '.join(bad)} not one of {', '.join(allowed)} (case-sensitive)")
    return value
