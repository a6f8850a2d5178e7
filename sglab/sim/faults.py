"""Seeded fault injection, for testing the harness against a misbehaving server.

Per generation request, in arrival order, one seeded draw decides: answer with a 5xx error, drop the
connection mid-stream (after a seeded number of chunks, no [DONE]), or stall mid-stream for `stall_s`.
`error_period_s` fails by the clock instead: every request of alternate periods, none in the others (a
server that is down half the time, which a judge that skips windows without tokens would not see).
`slow_start_s` keeps the port closed that long after launch (a server still loading its weights).
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sglab.sglang import sim_knobs


def _validate(self) -> None:
    for knob in sim_knobs.knobs("faults"):
        knob.check(getattr(self, knob.name))
    sim_knobs.check_fault_rates(dataclasses.asdict(self))


def _any(self) -> bool:
    return bool(self.error_rate or self.disconnect_rate or self.stall_rate or self.slow_start_s
                or self.error_period_s)


# The fault knobs as the engine reads them: fields, defaults and bounds from sglab/sglang/sim_knobs.py.
if TYPE_CHECKING:
    FaultSpec = Any  # its fields are made at import time from sim_knobs, which mypy cannot see
else:
    FaultSpec = dataclasses.make_dataclass(
        "FaultSpec",
        [(k.name, k.type, dataclasses.field(default=k.default)) for k in sim_knobs.knobs("faults")],
        frozen=True,
        namespace={"validate": _validate, "any": property(_any), "__module__": __name__},
    )


@dataclass(frozen=True)
class RequestFault:
    """What happens to one request; chunk indices count streamed chunks from 1."""

    error: bool = False
    disconnect_after_chunk: int | None = None
    stall_after_chunk: int | None = None


NO_FAULT = RequestFault()


class FaultInjector:
    def __init__(self, spec: FaultSpec, seed: int, *, clock=time.monotonic) -> None:
        self.spec = spec
        self._rng = random.Random(f"faults:{seed}")
        self.injected = {"error": 0, "disconnect": 0, "stall": 0}
        self._clock = clock
        self._started = clock()

    def draw(self, expected_chunks: int) -> RequestFault:
        """One draw per request; `expected_chunks` bounds where a mid-stream fault lands."""
        if self.spec.error_period_s:
            if int((self._clock() - self._started) // self.spec.error_period_s) % 2 == 0:
                self.injected["error"] += 1
                return RequestFault(error=True)
            return NO_FAULT
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
