"""What a load profile is: the levels a run measures, the users each level runs, and when they send.

The runner walks `levels()`; at each level it keeps `users_for(level)` Locust users running and, in
every arm segment, asks `pacing(level, round_index)` when the n-th request of the segment may
start. The interleaved A/B design (same requests, same order, both arms, paired rounds) stays the
runner's job, so a profile only decides *how much* load and *when*.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar


class Pacing:
    """When the request with issue index `index` of a segment may start (seconds after the segment opens).

    None means "as soon as a user is free" (closed loop). Subclasses give a schedule.
    """

    def start_offset_s(self, index: int) -> float | None:
        return None

    def requests(self) -> int | None:
        """How many requests the schedule holds (None = unbounded; the segment's duration or quota ends it)."""
        return None


CLOSED_LOOP = Pacing()


class LoadProfile(ABC):
    """One way of loading the arms. Subclasses set `name` and live in one file of this package."""

    name: ClassVar[str]
    level_label: ClassVar[str]  # what a level is, for humans: "concurrency", "rate"...

    def __init__(self, plan: Any) -> None:
        self.plan = plan

    @abstractmethod
    def levels(self) -> list[int]:
        """The levels of the run, in the order they are measured."""

    @abstractmethod
    def users_for(self, level: int) -> int:
        """Locust users kept running at this level."""

    def pacing(self, level: int, round_index: int) -> Pacing:
        """When each request of a segment starts; the same for every arm of a round."""
        return CLOSED_LOOP

    def level_for_users(self, user_count: int) -> int:
        """An interactive run (Locust's own user count, no runner): the level those users represent."""
        return user_count

    def prompts(self, base_dir: Path | None = None) -> list | None:
        """The profile's own requests (a trace's), as sglab.load.prompts.Prompt; None: the plan's prompt set."""
        return None

    def prompt_offset(self, level: int, round_index: int, count: int) -> int | None:
        """Where a round starts in the prompt list (the same for every arm); None: the seeded schedule's offset."""
        return None

    #: False where the schedule is global to the segment (open loop): Locust workers would each replay it.
    distributable: ClassVar[bool] = True
