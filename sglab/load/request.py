"""What `sglab bench` asks for (plan, arms, target) and the checks before anything is measured."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sglab.core.untrusted import printable
from sglab.config.arms import ArmSpec, attribution_arms, baseline_arm, candidate_arm
from sglab.config.loader import LoadedStack
from sglab.config.loadplan import LoadPlan
from sglab.load.design import Joined, placement_for
from sglab.load.targets import (arm_machine, given_urls, live_mismatches, start_sims, stop_signals_interrupt,
                                unverified)
from sglab.schema.result import ArmInfo
from sglab.sglang.client import ServerInfoError, get_server_info


class RefusedError(Exception):
    """The run must not start (e.g. live flags differ from the stack); message says why and the fix."""


@dataclass
class BenchRequest:
    """Everything `sglab bench` decided: the plan, the arms and where they run."""

    loaded: LoadedStack
    plan: LoadPlan
    kind: str = "ab"
    target_kind: str = "sim"
    urls: dict[str, str] = field(default_factory=dict)
    deployments: dict[str, str] = field(default_factory=dict)  # in the cluster: arm -> its Deployment, to move it
    joined: Joined | None = None  # period 2 of a crossover across two URL runs (sglab/bench/crossover.py)
    arm_nodes: dict[str, str] = field(default_factory=dict)  # --target sim: arm -> its node of sim.nodes (a sweep)
    sim_env: dict[str, str] = field(default_factory=dict)
    workers: int = 0
    out: Path | None = None
    progress: bool = True
    check_live_flags: bool = True

    def __post_init__(self) -> None:
        self.plan = self.plan.for_run()  # every run its own seed unless the stack or --seed fixes one

    @property
    def arms(self) -> list[ArmSpec]:
        stack = self.loaded.config
        if self.kind == "attribute":
            return attribution_arms(stack)
        if self.kind == "aa":
            base = baseline_arm(stack)
            return [base, base.with_name("candidate")]
        return [baseline_arm(stack), candidate_arm(stack)]


def arm_infos(request: BenchRequest, urls: dict[str, str]) -> list[ArmInfo]:
    infos = []
    for arm in request.arms:
        role = "candidate" if arm.name != "baseline" and (arm.speculative or request.kind == "aa") else arm.role
        infos.append(ArmInfo(name=arm.name, role=role, speculative=arm.speculative, url=urls.get(arm.name),
                             config_hash=arm.config_hash, launch_command=arm.launch_command))
    return infos


def check_live_flags(request: BenchRequest, urls: dict[str, str], infos: list[ArmInfo]) -> list[str]:
    """Read /get_server_info of every arm; return all mismatches (also recorded on the ArmInfos)."""
    found: list[str] = []
    for arm, info in zip(request.arms, infos):
        try:
            live = get_server_info(urls[arm.name])
        except ServerInfoError as exc:
            mismatch = [f"{arm.name}: cannot read server info ({printable(exc, limit=None)})"]
        else:
            mismatch = live_mismatches(arm, live)
            info.unverified = unverified(arm, live)
        info.live_flags_checked = True
        info.live_mismatches = mismatch
        found += mismatch
    return found


def record_machines(request: BenchRequest, urls: dict[str, str], infos: list[ArmInfo]) -> None:
    """What served each arm (arm_machine), on its ArmInfo: the evidence says which machine produced it."""
    for arm, info in zip(request.arms, infos):
        url = urls.get(arm.name)
        live, error = None, None
        if url:
            try:
                live = get_server_info(url)
            except ServerInfoError as exc:
                error = str(exc)
        info.machine = arm_machine(url=url, target_kind=request.target_kind, declared_image=arm.image, info=live,
                                   info_error=error)


def stack_sim_env(loaded: LoadedStack) -> dict[str, str]:
    """The stack's `sim:` knobs as SGLAB_SIM_* env (arms of a `backend: sim` stack carry them already)."""
    stack = loaded.config
    if stack.backend == "sim":
        return {}
    as_sim = stack.model_copy(update={"backend": "sim"})
    return {k: v for k, v in baseline_arm(as_sim).env.items() if k.startswith("SGLAB_SIM_")}


def sim_start_env(request: BenchRequest) -> dict[str, str]:
    """The SGLAB_SIM_* env every simulator of the run starts with (and restarts with, when a design moves it):
    the stack's knobs, the run's own, and the run's seed, which drives the acceptance draws so a re-run draws its
    own (not recorded in target.sim_env, which keys the sequence; the result's load plan records the seed)."""
    from sglab.sglang.sim_knobs import knob

    return {**stack_sim_env(request.loaded), **request.sim_env, knob("run_seed").env: str(request.plan.seed)}


@contextmanager
def reached_arms(request: BenchRequest, log_dir: Path) -> Iterator[tuple[object, list[ArmInfo], list[str]]]:
    """Start (or reach) the arms and check their live flags; yields (targets, arm infos, mismatches) while the
    arms are up. A live server that differs from the stack is refused before any request is sent."""
    with stop_signals_interrupt():  # until the run's own handlers take over (BenchRun.execute)
        if request.target_kind == "sim":
            targets = start_sims(request.arms, extra_env=sim_start_env(request), log_dir=log_dir,
                                 arm_env=placement_for(request).start_env())
        else:
            targets = given_urls(request.urls)
    with targets:
        with stop_signals_interrupt():
            infos = arm_infos(request, targets.urls)
            mismatches = check_live_flags(request, targets.urls, infos) if request.check_live_flags else []
            record_machines(request, targets.urls, infos)
        if mismatches:
            raise RefusedError(
                "refusing to benchmark: the live servers differ from what stack "
                f"'{request.loaded.name}' declares ({request.loaded.path}):\n"
                + "\n".join(f"  - {m}" for m in mismatches)
                + "\n  fix: redeploy the arms from this stack (pulumi up), or correct the stack so it "
                "describes what is running")
        yield targets, infos, mismatches
