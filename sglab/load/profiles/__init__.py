"""Load profiles, one module each, found and registered on import.

    from sglab.load.profiles import profile_for
    profile = profile_for(plan)          # the plan's `profile` (default: concurrency)

Adding a profile = one new module here with a `@register`ed `LoadProfile` subclass (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from sglab.load.profiles.base import CLOSED_LOOP, LoadProfile, Pacing
from sglab.load.profiles.registry import PROFILES, register

DEFAULT_PROFILE = "concurrency"
_INFRA = {"base", "registry"}


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _INFRA and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def profile_names() -> list[str]:
    return sorted(PROFILES)


def profile_for(plan: Any, name: str | None = None) -> LoadProfile:
    """The load profile a plan asks for (its `profile` field when it has one)."""
    name = name or getattr(plan, "profile", None) or DEFAULT_PROFILE
    try:
        cls = PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown load profile {name!r}; known: {', '.join(profile_names())}") from None
    return cls(plan)


_discover()

__all__ = ["CLOSED_LOOP", "DEFAULT_PROFILE", "LoadProfile", "PROFILES", "Pacing", "profile_for", "profile_names",
           "register"]
