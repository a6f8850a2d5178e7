"""What every config model shares: kebab-case keys, unknown keys refused, keyed errors, Kubernetes syntax."""

from __future__ import annotations

import re
from typing import Any

from pydantic import AliasGenerator, BaseModel, ConfigDict, ValidationInfo, field_validator

from sglab.config.strict import SECRETS_FIX, text_problem, type_problem
from sglab.sglang.env import NCCL_ENV_PREFIX, is_hf_token_env
from sglab.sglang.secret_names import secret_word
from sglab.sglang.honesty import faked_acceptance, refusal
from sglab.sglang.sim_knobs import is_sim_env
from sglab.core.untrusted import printable


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

    @field_validator("*", mode="before")
    @classmethod
    def _strict_values(cls, value: Any, info: ValidationInfo) -> Any:
        """Strict types, no control characters, no URL credentials (sglab/config/strict.py), before coercion."""
        found = text_problem(value, skip=(SecretValue,))
        if found is not None:
            raise KeyedValueError(found[0], found[1])
        field = cls.model_fields.get(info.field_name or "")
        if field is not None:
            problem = type_problem(field.annotation, value)
            if isinstance(problem, str) and problem:
                raise ValueError(problem)
        return value


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


def check_env(env: Any, nccl_key: str) -> Any:
    """Names of plain env variables: valid, not NCCL_* (typed under `nccl_key`), not SGLAB_SIM_*, no secret.

    Runs before type coercion, so a secret's value is never echoed in an error.
    """
    if not isinstance(env, dict):
        return env
    for key in env:
        key = str(key)
        if faked := faked_acceptance({printable(key, limit=80): ""}, ()):  # sglab/sglang/honesty.py: any backend
            raise KeyedValueError((key,), refusal(faked, "the stack"))
        if is_hf_token_env(key):
            raise KeyedValueError((key,), f"{key} carries the Hugging Face token, which must not be plain text "
                                          "(validate and render would print it, and it would be stored in the "
                                          "Deployment and the stack ConfigMap); delete it and set the secret: "
                                          "pulumi config set --secret sglab:hf-token <token>")
        if not _ENV_NAME.match(key):
            raise KeyedValueError((key,), f"{printable(repr(key), limit=80)} is not a valid environment variable "
                                          "name; use letters, digits and '_', not starting with a digit")
        word = secret_word(key)
        if word is not None:
            raise KeyedValueError((key,), f"{key} is named like a secret (the word '{word}'), which must not be plain "
                                          f"text in the stack file (validate and render would print it); delete it: "
                                          f"{SECRETS_FIX}. A variable that only looks like one is listed in "
                                          "sglab/sglang/secret_names.py")
        if key.startswith(NCCL_ENV_PREFIX):
            raise KeyedValueError((key,), f"{key} belongs under {nccl_key}, where it is type-checked; move it there")
        if is_sim_env(key):
            raise KeyedValueError((key,), f"{key} is a simulator knob; set it under sim instead")
    return env
