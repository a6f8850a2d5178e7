"""The stack config as `pulumi up` provides it: `pulumi.Config("sglab")`, validated by the same pydantic model.

Each key of `StackConfig` is read from Pulumi config (objects as JSON, strings as-is); secret keys are
kept as Outputs and replaced by a `{secure: ...}` marker inside the model, so plaintext never enters
it. Unknown `sglab:*` keys are refused, and when the stack file is on disk the file loader runs too,
so a typo fails `pulumi up` with the same message (and line) as `sglab validate`.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env, is_config_secret

from sglab.config.loader import NAMESPACE, ConfigError, LoadedStack, _guess, load_mapping, load_stack, stack_path
from sglab.config.models import StackConfig

SECRET_MARKER = "<pulumi secret>"


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
    data: dict[str, Any] = {}
    secrets: dict[str, pulumi.Output[str]] = {}
    for key, name in keys.items():
        full_key = f"{NAMESPACE}:{key}"
        if is_config_secret(full_key):
            secret = cfg.get_secret(key)
            if secret is not None:
                secrets[key] = secret
                data[key] = {"secure": SECRET_MARKER}
            continue
        raw = cfg.get(key)
        if raw is None:
            continue
        if _is_plain_string(StackConfig.model_fields[name].annotation):
            data[key] = raw
            continue
        try:
            data[key] = json.loads(raw)
        except json.JSONDecodeError:
            data[key] = raw
    return PulumiStack(load_mapping(stack_name, path, data), secrets)
