"""The stack's `sim:` section: the simulator knobs declared in sglab/sglang/sim_knobs.py, as models.

The fields, defaults and bounds come from that table, so a knob added there is a stack key here,
an SGLAB_SIM_* variable in the rendered arms and a `sglab sim` flag, with no second declaration.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints, create_model, model_validator

from sglab.config.base import Model
from sglab.sglang import sim_knobs


def _fields(group: sim_knobs.Group) -> dict[str, Any]:
    return {k.name: (k.type, Field(k.default, ge=k.ge, gt=k.gt, le=k.le, description=k.help))
            for k in sim_knobs.knobs(group)}


class _FaultsBase(Model):
    @model_validator(mode="after")
    def _total(self) -> "_FaultsBase":
        sim_knobs.check_fault_rates(self.model_dump())
        return self


SimFaults = create_model("SimFaults", __base__=_FaultsBase, __module__=__name__,
                         __doc__="Seeded fault injection in the simulator (SGLAB_SIM_* env), for testing the harness.",
                         **_fields("faults"))

# The simulated nodes a `--target sim` bench places its arms on (name -> speed, sglab/load/design.py): at most 8,
# like the machines a sweep could use; two equal ones by default, so a design that moves arms has somewhere to go.
MAX_SIM_NODES = 8
_speed = sim_knobs.knob("node_speed")
NodeName = Annotated[str, StringConstraints(pattern=sim_knobs.NODE_NAME_PATTERN)]
NodeSpeed = Annotated[float, Field(ge=_speed.ge, le=_speed.le, allow_inf_nan=False)]
SimNodes = Annotated[dict[NodeName, NodeSpeed], Field(min_length=1, max_length=MAX_SIM_NODES)]

SimSpec = create_model("SimSpec", __base__=Model, __module__=__name__,
                       __doc__="Simulator-only knobs, passed as SGLAB_SIM_* env (ignored by a real SGLang server).",
                       **_fields("sim"), faults=(SimFaults | None, None),
                       nodes=(SimNodes, Field(default_factory=lambda: {"sim-node-a": 1.0, "sim-node-b": 1.0},
                                              description="the simulated nodes (name: speed, every modelled "
                                              "duration divided by the speed): a bench places the baseline on "
                                              "the first and the candidate on the second, and a crossover swaps "
                                              "them (policy.design)")))


def node_env(name: str, speed: float) -> dict[str, str]:
    """The SGLAB_SIM_* env that puts a simulator on one node of `sim.nodes`."""
    return sim_knobs.knob_env({"node": name, "node_speed": float(speed)}, "node")


def sim_env(sim: Any) -> dict[str, str]:
    """The SGLAB_SIM_* env of a `sim:` section (faults only when the section sets them)."""
    env = sim_knobs.knob_env(sim.model_dump(), "sim")
    if sim.faults is not None:
        env.update(sim_knobs.knob_env(sim.faults.model_dump(), "faults"))
    return env


def sim_time_scale(sim: Any) -> float:
    """The time scale a `sim:` section declares (its fields are made from sim_knobs, which mypy cannot see)."""
    return float(sim.time_scale)
