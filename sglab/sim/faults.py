"""Seeded fault injection, for testing the harness against a misbehaving server.

Per generation request, in arrival order, one seeded draw decides: answer with a 5xx error, drop the
connection mid-stream (after a seeded number of chunks, no [DONE]), or stall mid-stream for `stall_s`.
`slow_start_s` keeps the port closed that long after launch (a server still loading its weights).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class FaultSpec:
    error_rate: float = 0.0
    error_status: int = 500
    disconnect_rate: float = 0.0
    stall_rate: float = 0.0
    stall_s: float = 2.0
    slow_start_s: float = 0.0

    def validate(self) -> None:
        for name in ("error_rate", "disconnect_rate", "stall_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.error_rate + self.disconnect_rate + self.stall_rate > 1.0:
            raise ValueError("error_rate + disconnect_rate + stall_rate must not exceed 1")
        if not 500 <= self.error_status <= 599:
            raise ValueError(f"error_status must be a 5xx code, got {self.error_status}")
        if self.stall_s < 0 or self.slow_start_s < 0:
            raise ValueError("stall_s and slow_start_s must be >= 0")

    @property
    def any(self) -> bool:
        return bool(self.error_rate or self.disconnect_rate or self.stall_rate or self.slow_start_s)


@dataclass(frozen=True)
class RequestFault:
    """What happens to one request; chunk indices count streamed chunks from 1."""

    error: bool = False
    disconnect_after_chunk: int | None = None
    stall_after_chunk: int | None = None


NO_FAULT = RequestFault()


class FaultInjector:
    def __init__(self, spec: FaultSpec, seed: int) -> None:
        self.spec = spec
        self._rng = random.Random(f"faults:{seed}")
        self.injected = {"error": 0, "disconnect": 0, "stall": 0}

    def draw(self, expected_chunks: int) -> RequestFault:
        """One draw per request; `expected_chunks` bounds where a mid-stream fault lands."""
        if not (self.spec.error_rate or self.spec.disconnect_rate or self.spec.stall_rate):
            return NO_FAULT
        roll = self._rng.random()
        position = 1 + self._rng.randrange(max(1, expected_chunks - 1))
        spec = self.spec
        if roll < spec.error_rate:
            self.injected["error"] += 1
            return RequestFault(error=True)
        if roll < spec.error_rate + spec.disconnect_rate:
            self.injected["disconnect"] += 1
            return RequestFault(disconnect_after_chunk=position)
        if roll < spec.error_rate + spec.disconnect_rate + spec.stall_rate:
            self.injected["stall"] += 1
            return RequestFault(stall_after_chunk=position)
        return NO_FAULT
