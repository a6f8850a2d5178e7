"""Checks on what produced the evidence, recomputed from what the result recorded (never from its verdict).

- faked or lossy acceptance in either arm's recorded launch command (sglab/sglang/honesty.py): a blocker;
- the arms measured on different machines: GPU product, driver or CUDA runtime of their nodes, or a
  different server version (sglab/results/schema.py ArmMachine): a blocker, like any other confound;
- output parity below `policy.min-output-parity` (sglab/analysis/parity.py): a guard.
Registered in sglab/analysis/checks.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sglab.analysis.samples import comparison_arms
from sglab.results.schema import RunResult
from sglab.results.verdict import Check
from sglab.sglang.flags import FlagError
from sglab.sglang.honesty import faked_acceptance, launch_env_and_args


def faked_acceptance_check(result: RunResult) -> Check | None:
    """Either compared arm launched with a setting that fakes or loosens acceptance (both may carry it, so
    it is no confound: it is checked on each arm's own recorded command)."""
    try:
        names = comparison_arms(result)
    except ValueError:
        return None
    found: dict[str, list[str]] = {}
    for name in names:
        info = result.arm(name)
        try:
            env, args = launch_env_and_args(info.launch_command)
            fakes = faked_acceptance(env, args)
        except (ValueError, FlagError) as exc:  # unreadable: the confounds check says so too
            return Check(name="faked-acceptance", ok=False,
                         detail=f"the recorded launch command of {name} cannot be checked for faked acceptance "
                                f"({exc})", fix=f"re-run `sglab bench --stack {result.stack}`")
        for fake in fakes:
            found.setdefault(fake.key, []).append(name)
    if not found:
        return None
    keys = ", ".join(f"{key} ({' and '.join(arms)})" for key, arms in found.items())
    settings = ", ".join(key.split(" ", 1)[1] for key in found)
    return Check(name="faked-acceptance", ok=False,
                 detail=f"the servers ran with settings that fake or loosen speculative acceptance ({keys}), so "
                        "their speed is not what real verification gives",
                 fix=f"remove {settings} from the stack and re-run `sglab bench --stack {result.stack}`")


@dataclass(frozen=True)
class Producer:
    """What produced a run's numbers: 'simulator', 'sglang' (real servers) or 'unknown' (not recorded)."""

    kind: Literal["simulator", "sglang", "unknown"]
    time_scale: float | None = None  # simulators: the scale their durations were divided by
    versions: tuple[str, ...] = ()  # the server versions the arms reported
    why: str = ""

    def describe(self) -> str:
        if self.kind == "simulator":
            scale = f" at time scale {self.time_scale:g}" if self.time_scale is not None else ""
            return f"sglab's simulator{scale} ({self.why})"
        if self.kind == "sglang":
            shown = ", ".join(self.versions) or "version not reported"
            return f"real SGLang servers ({shown}; {self.why})"
        return f"an unknown producer ({self.why})"


def producer_of(result: RunResult) -> Producer:
    """The producer, recomputed from what the run recorded: sglab started simulators (target 'sim'), or the
    servers described themselves as the simulator or as SGLang (ArmInfo.machine, from /get_server_info).
    A file written before the machine was recorded, against URLs, is 'unknown'."""
    try:
        names = comparison_arms(result)
    except ValueError:
        names = tuple(a.name for a in result.arms)
    machines = [m for name in names if (info := result.arm(name)) is not None and (m := info.machine) is not None]
    reported = {m.producer for m in machines if m.producer is not None}
    versions = tuple(sorted({m.server_version for m in machines if m.server_version}))
    scales = {m.time_scale for m in machines if m.time_scale is not None}
    if result.target.kind == "sim" or "simulator" in reported:
        why = ("sglab started them (target sim)" if result.target.kind == "sim"
               else "the servers reported themselves as sglab's simulator")
        recorded = result.target.time_scale
        scale = recorded if recorded is not None else (max(scales) if scales else None)
        if scale is None and result.target.kind == "sim":
            scale = 1.0  # no SGLAB_SIM_TIME_SCALE given: the simulator's default
        if len(scales | ({recorded} if recorded is not None else set())) > 1:
            why += f"; the arms disagree on the time scale ({', '.join(f'{s:g}' for s in sorted(scales))})"
            scale = max(scales | {recorded or 0.0})
        return Producer("simulator", scale, versions, why)
    if len(machines) == len(names) and reported == {"sglang"}:
        return Producer("sglang", None, versions, "the servers' /get_server_info")
    missing = [n for n in names if (info := result.arm(n)) is None or info.machine is None
               or info.machine.producer is None]
    return Producer("unknown", None, versions,
                    f"target {result.target.kind}; no server identity recorded for {', '.join(missing) or 'the arms'} "
                    "(a result written before sglab recorded it)")


def provenance_blockers(result: RunResult) -> list[Check]:
    """The blockers of this module, in the order the verdict lists them."""
    return [check for check in (faked_acceptance_check(result),) if check is not None]
