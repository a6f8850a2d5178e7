"""The simulator's own knobs: one declaration each, read as `--sim-<name>` flags or `SGLAB_SIM_<NAME>` env.

A real SGLang server ignores SGLAB_SIM_*; `sglab sim` reads them (a flag beats the env, which beats
the default). The stack's `sim:` section (group "sim") and `sim.faults:` (group "faults") are built
from this table, the arms render it as env, and the simulator's parser reads it back.
Adding a knob is one `SimKnob(...)` line in SIM_KNOBS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

SIM_ENV_PREFIX = "SGLAB_SIM_"
# sim: a stack `sim:` key; faults: a `sim.faults:` key; cli: a flag/env only; node: set per arm by the bench's
# placement (sglab/load/design.py) from the stack's `sim.nodes`, never a key of its own.
Group = Literal["sim", "faults", "cli", "node"]


@dataclass(frozen=True)
class SimKnob:
    name: str  # snake_case: the stack key (kebab-case) and the SimConfig field
    type: type
    default: Any
    help: str
    group: Group = "sim"
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    why_bounded: str = ""  # said with a bound's message: why the bound is there

    @property
    def flag(self) -> str:
        return "--sim-" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return SIM_ENV_PREFIX + self.name.upper()

    def text(self, value: Any) -> str:
        """The env string of a value (floats without trailing zeros)."""
        return f"{value:g}" if isinstance(value, float) else str(value)

    def check(self, value: Any) -> None:
        """ValueError when a value is outside the knob's bounds (NaN is outside every bound)."""
        why = f" ({self.why_bounded})" if self.why_bounded else ""
        if self.ge is not None and not value >= self.ge:
            raise ValueError(f"{self.name} ({self.flag} / {self.env}) must be >= {self.ge:g}, got {value}{why}")
        if self.gt is not None and not value > self.gt:
            raise ValueError(f"{self.name} ({self.flag} / {self.env}) must be > {self.gt:g}, got {value}{why}")
        if self.le is not None and not value <= self.le:
            raise ValueError(f"{self.name} ({self.flag} / {self.env}) must be <= {self.le:g}, got {value}{why}")


# The time scales at which the simulator's gains and accept lengths stay what they are at 1 (within the noise
# of a benchmark: benchmarks/time_scale_fidelity.py, docs/simulator.md "Time scale"). Faster, the client's and
# the event loop's fixed costs per streamed chunk stop being negligible against the modelled step and favour
# the arm with fewer, fuller chunks (the candidate); slower, a 1,000-token request outlasts request timeouts.
TIME_SCALE_MIN = 0.25
TIME_SCALE_MAX = 10.0
# A closed-loop client's load is its streams x the time scale: above this product (16 streams at 3x, 4 at 10x)
# one Locust process on 2 cores no longer keeps up and the gains drift (measured, docs/simulator.md).
MAX_STREAMS_X_TIME_SCALE = 48.0


# A simulated node's speed: same-SKU GPUs differ by 8% on average, outliers run 1.5x slower (Sinha et al., SC'22;
# docs/simulator.md "Nodes"); 0.5 to 2 covers that with room, beyond is a typo.
NODE_SPEED_MIN = 0.5
NODE_SPEED_MAX = 2.0
# A node name: a DNS label (what Kubernetes names nodes with), so it is safe in logs, env and file names.
NODE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


def time_scale_problem(value: float, streams: int | None = None) -> str | None:
    """Why a simulator time scale is outside what the simulator models faithfully (None: inside); `streams`:
    the most concurrent streams the run keeps (its highest closed-loop level)."""
    if not (value == value and TIME_SCALE_MIN <= value <= TIME_SCALE_MAX):
        return (f"time scale {value:g} is outside {TIME_SCALE_MIN:g} to {TIME_SCALE_MAX:g}, the range where the "
                "simulator's gains and accept lengths stay the same (beyond it client and event-loop overheads, "
                "not the timing model, decide the speed); use a time scale from "
                f"{TIME_SCALE_MIN:g} to {TIME_SCALE_MAX:g} (1 = real time)")
    if streams and value * streams > MAX_STREAMS_X_TIME_SCALE:
        most = MAX_STREAMS_X_TIME_SCALE / streams
        return (f"time scale {value:g} with {streams} concurrent streams is {value * streams:g} streams x scale, "
                f"beyond the {MAX_STREAMS_X_TIME_SCALE:g} at which the load generator still keeps up (past it the "
                f"candidate's fewer, fuller chunks win by the client's overhead); use a time scale of at most "
                f"{most:.3g} with concurrency {streams}, or leave that level out")
    return None


SIM_KNOBS: tuple[SimKnob, ...] = (
    SimKnob("profile", str, "default", "timing profile: a built-in name or a YAML/JSON file"),
    SimKnob("set", str, "", "profile overrides NAME=VALUE[,NAME=VALUE...]", group="cli"),
    SimKnob("seed", int, 0, "seed of acceptance draws, EOS lengths and faults"),
    SimKnob("run_seed", int, 0, "the bench run's load seed: acceptance draws follow it, so each run draws its own "
            "(sglab bench sets it)", group="cli", ge=0),
    SimKnob("time_scale", float, 1.0, "divide every modelled duration by this", ge=TIME_SCALE_MIN,
            le=TIME_SCALE_MAX, why_bounded="the range where the simulator's gains and accept lengths stay the same; "
            f"use {TIME_SCALE_MIN:g} to {TIME_SCALE_MAX:g}, 1 = real time (docs/simulator.md, 'Time scale')"),
    SimKnob("allow_unfaithful_time_scale", int, 0, "1: accept a time scale outside the faithful range, for tests "
            "of behaviour only (the server reports time_scale_faithful false, and no result of it promotes)",
            group="cli", ge=0, le=1),
    SimKnob("warmup_s", float, 0.0, "seconds of 503 from /health* after start", ge=0),
    SimKnob("spin_ms", float, 1.0, "busy-wait this close to each deadline (sleep alone is up to 1 ms late); "
            "at most 10%% of an iteration", group="cli", ge=0),
    SimKnob("error_rate", float, 0.0, "fraction of requests answered with a 5xx", "faults", ge=0, le=1),
    SimKnob("error_status", int, 500, "status code of injected errors", "faults", ge=500, le=599),
    SimKnob("disconnect_rate", float, 0.0, "fraction of streams cut mid-stream", "faults", ge=0, le=1),
    SimKnob("stall_rate", float, 0.0, "fraction of streams that stall mid-stream", "faults", ge=0, le=1),
    SimKnob("stall_s", float, 2.0, "length of an injected stall (seconds, not scaled)", "faults", ge=0),
    SimKnob("slow_start_s", float, 0.0, "keep the port closed this long", "faults", ge=0),
    SimKnob("error_period_s", float, 0.0, "when > 0, fail every request in alternate periods of this many "
            "seconds from the start (the first period fails), none in between; error-rate is then not drawn "
            "(seconds, not scaled)", "faults", ge=0),
    SimKnob("node", str, "", "the simulated node this server runs on (a DNS label; reported in server info)",
            group="node"),
    SimKnob("node_speed", float, 1.0, "the simulated node's speed: every modelled duration is divided by it",
            group="node", ge=NODE_SPEED_MIN, le=NODE_SPEED_MAX, why_bounded="same-SKU nodes differ by 8% on "
            "average and 1.5x at worst (docs/simulator.md, 'Nodes')"),
)

# Fault draws share one uniform number per request, so their rates must add up to at most 1.
FAULT_RATES = ("error_rate", "disconnect_rate", "stall_rate")


def knobs(group: Group | None = None) -> tuple[SimKnob, ...]:
    """The declared knobs (of one group), read from SIM_KNOBS at call time."""
    return tuple(k for k in SIM_KNOBS if group is None or k.group == group)


def knob(name: str) -> SimKnob:
    return next(k for k in SIM_KNOBS if k.name == name)


def check_fault_rates(values: Mapping[str, float]) -> None:
    if sum(values.get(name, 0.0) for name in FAULT_RATES) > 1:
        raise ValueError("error-rate + disconnect-rate + stall-rate must not exceed 1")


def knob_env(values: Mapping[str, Any], group: Group) -> dict[str, str]:
    """SGLAB_SIM_* env for every knob of a group, from snake_case values (defaults where absent)."""
    return {k.env: k.text(values.get(k.name, k.default)) for k in knobs(group)}


def is_sim_env(name: str) -> bool:
    return name.startswith(SIM_ENV_PREFIX)
