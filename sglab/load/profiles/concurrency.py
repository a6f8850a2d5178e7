"""Closed loop: N users, each sends its next request as soon as the previous one ends (level = N)."""

from __future__ import annotations

from sglab.load.profiles.base import LoadProfile
from sglab.load.profiles.registry import register


@register
class ConcurrencyProfile(LoadProfile):
    name = "concurrency"
    level_label = "concurrency"

    def levels(self) -> list[int]:
        return list(self.plan.concurrency)

    def users_for(self, level: int) -> int:
        return level
