"""Profile name -> class. A profile registers itself with `@register` in its own module."""

from __future__ import annotations

from sglab.load.profiles.base import LoadProfile

PROFILES: dict[str, type[LoadProfile]] = {}


def register(cls: type[LoadProfile]) -> type[LoadProfile]:
    if cls.name in PROFILES and PROFILES[cls.name] is not cls:
        raise ValueError(f"load profile {cls.name!r} is registered twice")
    PROFILES[cls.name] = cls
    return cls
