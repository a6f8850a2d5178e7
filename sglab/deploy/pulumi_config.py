"""The stack config as `pulumi up` provides it: `pulumi.Config("sglab")`, validated by the same pydantic model.

Each key of `StackConfig` is read from Pulumi config (objects as JSON, strings as-is); secret keys are
kept as Outputs and replaced by a `{secure: ...}` marker inside the model, so plaintext never enters
it. Unknown `sglab:*` keys are refused, and when the stack file is on disk the file loader runs too,
so a typo fails `pulumi up` with the same message (and line) as `sglab validate`.
"""

from __future__ import annotations

import json
import os
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
from pulumi.runtime.config import _SECRET_KEYS, CONFIG, get_config_env, get_config_secret_keys_env, is_config_secret

from sglab.config.loader import NAMESPACE, LoadedStack, _guess, load_mapping, load_stack
from sglab.core.errors import ConfigError
from sglab.core.paths import stack_path
from sglab.config.stack import SECRET_FIELDS, StackConfig

SECRET_MARKER = "<pulumi secret>"
SECRET_KEYS_ENV = "PULUMI_CONFIG_SECRET_KEYS"


@dataclass(frozen=True)
class PulumiStack:
    """The validated config plus the secret values, which only ever exist as Pulumi Outputs."""

    loaded: LoadedStack
    secrets: dict[str, pulumi.Output[str]] = field(default_factory=dict)


def config_keys() -> dict[str, str]:
    """kebab-case key (as in the stack file) -> StackConfig field name."""
    return {(f.alias or name).replace("_", "-"): name for name, f in StackConfig.model_fields.items()}


def _is_plain_string(annotation: Any) -> bool:
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    return origin is Literal and all(isinstance(a, str) for a in typing.get_args(annotation))


def _set_keys() -> list[str]:
    """Every `sglab:*` key Pulumi config holds (explicitly set, or from the CLI's PULUMI_CONFIG)."""
    keys = set(CONFIG.get()) | set(get_config_env())
    return sorted(k for k in keys if k.startswith(f"{NAMESPACE}:"))


def _secret_keys() -> tuple[set[str], bool]:
    """Config keys Pulumi marks secret, and whether that list is known.

    The language host passes the list in PULUMI_CONFIG_SECRET_KEYS; mocks and the Automation API set
    it with set_all_config. When neither says anything, secret fields are treated as secrets.
    """
    from_runtime = set(_SECRET_KEYS.get())
    known = bool(from_runtime) or SECRET_KEYS_ENV in os.environ
    return from_runtime | set(get_config_secret_keys_env()), known


def read_pulumi_config(stack_name: str | None = None) -> PulumiStack:
    """Build the StackConfig from Pulumi config. Raises ConfigError (file, key, problem, fix)."""
    stack_name = stack_name or pulumi.get_stack()
    path = stack_path(stack_name)
    if path.exists():
        load_stack(stack_name, path=path)
    keys = config_keys()
    for full_key in _set_keys():
        key = full_key.partition(":")[2].split(".")[0]
        if key not in keys:
            guess = _guess(key, list(keys))
            raise ConfigError(path, full_key, f"unknown key '{key}' (not a sglab setting)",
                              f"did you mean '{guess}'?" if guess else "remove it (pulumi config rm)")
    cfg = pulumi.Config(NAMESPACE)
    secret_keys, secret_keys_known = _secret_keys()
    data: dict[str, Any] = {}
    secrets: dict[str, pulumi.Output[str]] = {}
    for key, name in keys.items():
        full_key = f"{NAMESPACE}:{key}"
        raw = cfg.get(key)
        if raw is None:
            continue
        is_secret = full_key in secret_keys or is_config_secret(full_key)
        if is_secret or (name in SECRET_FIELDS and not secret_keys_known):
            secrets[key] = cfg.get_secret(key)
            data[key] = {"secure": SECRET_MARKER}
            continue
        if _is_plain_string(StackConfig.model_fields[name].annotation):
            data[key] = raw
            continue
        try:
            data[key] = json.loads(raw)
        except json.JSONDecodeError:
            data[key] = raw
    return PulumiStack(load_mapping(stack_name, path, data), secrets)
