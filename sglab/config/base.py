"""What every config model shares: kebab-case keys, unknown keys refused, keyed errors, Kubernetes syntax."""

from __future__ import annotations

import re
from typing import Any

from pydantic import AliasGenerator, BaseModel, ConfigDict


class KeyedValueError(ValueError):
    """A cross-field check failing at a key below the validated model (`loc`, kebab-case, e.g. server.tp-size).

    The loader reports that key path and its line instead of the whole section.
    """

    def __init__(self, loc: str | tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        if isinstance(loc, str):
            loc = tuple(int(p) if p.isdigit() else p for p in loc.split("."))
        self.loc = loc


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class Model(BaseModel):
    """Base: kebab-case keys in YAML, unknown keys refused (a typo must never be silently ignored)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=_kebab, serialization_alias=_kebab),
    )


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(?=.{0,63}$)(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CPU = re.compile(r"^([0-9]+(\.[0-9]+)?|[0-9]+m)$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    """Kubernetes label syntax, so a bad key fails here (with its key path) rather than at apply time."""
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(name):
            raise KeyedValueError((key,), f"{key!r} is not a valid label key; write [prefix/]name with a name of "
                                          "up to 63 letters, digits, '-', '_' or '.'")
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise KeyedValueError((key,), f"{value!r} is not a valid label value; use up to 63 letters, digits, "
                                          "'-', '_' or '.', starting and ending with a letter or digit")
    return labels


def number_as_quantity(value: Any) -> Any:
    """`cpu: 2` in YAML is a number; Kubernetes quantities are strings."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


class SecretValue(str):
    """A resolved secret (inside the Pulumi program). str subclass so it never prints by accident."""

    def __repr__(self) -> str:
        return "SecretValue('***')"
