"""Where each arm runs in each round (policy.design), and moving the servers there: the simulated nodes of the
stack's `sim.nodes` (the simulators sglab starts), or the cluster's nodes (the benchmark Job's Deployments).

A node's speed adds the same offset to every round its arm runs there, which interleaving cannot cancel
(docs/load.md, "Designs"). The round layout is the contract the analysis reads (RoundSample.node, .period):
- parallel: the baseline on the first node, the candidate on the second, all the time; period None.
- crossover: every round has both arms; odd periods place the baseline on the first node and the candidate on
  the second, even periods swap them (each server restarts on the other node, same argv); round j of period
  2k-1 pairs with round j of period 2k.
- switchback: one node; one arm per round, periods in ABBA blocks (4b+1 and 4b+4 the baseline, 4b+2 and 4b+3
  the candidate); a server starts on the node when its turn comes and stops when it ends.
A sweep places its arms by name (BenchRequest.arm_nodes: the baseline on the first node, the arms on the others,
the slots; sglab/sweep/race.py corrects for them).
An A/B (or A/A) moves where sglab starts the servers (`--target sim`) or may move them (the benchmark Job,
`--deployment ARM=NAME`: below; its nodes are the ones the arms run on when it starts); servers
given by URL, attribution runs (four arms) and a sweep's race run parallel, and their DesignRecord says why.

Carrying out a design's moves (`Mover`): stop a server where it ran, start it where its period places it, and
wait until it serves again. One protocol, two backends:

- SimMover: the simulators sglab started (`--target sim`): each moving process stops and starts again with its
  new node's env, on the same port.
- ClusterMover: the benchmark Job in the cluster (`--deployment ARM=NAME`): each arm's Deployment is pinned to
  its node by a required node affinity on `kubernetes.io/hostname`, or stopped (replicas 0, a switchback's arm
  out of turn). Every patch goes first, then the wait: two whole-node servers swap only once both old pods are
  gone (the chart's Recreate strategy), so waiting for one before patching the other would deadlock. An arm is
  back when its Deployment has rolled out the patch, exactly one pod of it runs, Ready, on the wanted node, and
  the arm's Service answers /health, within the stack's `rollout.startup-timeout-min`.

Least privilege: the Job's Role may get and patch exactly the two Deployments and list pods (sglab/deploy/
benchmark_job.py). The pin is the only field the Job adds to the pod template, and the chart never sets a node
affinity, so the next `pulumi up` neither fights nor undoes it (its server-side apply owns the chart's fields,
the pin belongs to field manager `sglab-benchmark`). A server replaced while a period measures (a `pulumi up`
that changed it, an eviction) is caught at the period's end (`check`) and ends the run invalid: the evidence
could not say which node served those rounds.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from sglab.config.server import node_env
from sglab.core.children import stop_all
from sglab.load.targets import TargetError, Targets, pod_ready, start_sim, wait_healthy

Node = tuple[str, float]  # (name, speed)


@dataclass(frozen=True)
class Joined:
    """This run is period 2 of a crossover whose period 1 is an earlier run of servers given by URL, the user
    having swapped the machines between them (sglab/bench/crossover.py)."""

    run_id: str
    digest: str | None
    first: dict[str, str]  # arm -> its machine in period 1 (the earlier run)
# Periods per cycle: a crossover's pair of periods (each node serves both arms), a switchback's ABBA block
# (cancels a linear drift); a level gets periods short enough for at least one cycle.
CYCLE_PERIODS = {"crossover": 2, "switchback": 4}


@dataclass
class Placement:
    """The design as it will be carried out: which arm runs on which node in which period."""

    design: str
    arms: list[str]  # the baseline first
    nodes: list[Node]
    period_rounds: int = 4
    notes: list[str] = field(default_factory=list)
    joined_period: int | None = None  # every round of this run is in this period (a joined crossover's second)
    assigned: dict[str, Node] = field(default_factory=dict)  # parallel: arm -> its node, by name (a sweep's slots)

    @property
    def moves(self) -> bool:
        return self.design != "parallel" and self.joined_period is None

    def period_length(self, level_rounds: int) -> int:
        """Rounds per period at a level of `level_rounds` rounds: load.period-rounds, shorter where the level
        would not otherwise complete one cycle."""
        if not self.moves:
            return level_rounds
        return max(1, min(self.period_rounds, level_rounds // CYCLE_PERIODS[self.design]))

    def period(self, round_index: int, level_rounds: int) -> int | None:
        """The period of a round (from 1); None for parallel. Warm-ups (-1) belong to the first period."""
        if self.joined_period is not None:
            return self.joined_period
        if not self.moves:
            return None
        return max(0, round_index) // self.period_length(level_rounds) + 1

    def in_turn(self, period: int | None) -> str:
        """The arm a switchback period serves: ABBA."""
        return self.arms[0] if period is None or (period - 1) % 4 in (0, 3) else self.arms[1]

    def arms_of(self, period: int | None, arms: list[str]) -> list[str]:
        """The arms that run in a round of this period (of `arms`, in their order)."""
        if self.design == "switchback":
            return [a for a in arms if a == self.in_turn(period)]
        return list(arms)

    def nodes_for(self, period: int | None) -> dict[str, Node | None]:
        """arm -> its node in this period (None: not running)."""
        if self.design == "switchback":
            return {arm: self.nodes[0] if arm == self.in_turn(period) else None for arm in self.arms}
        if self.design == "crossover" and period is not None and period % 2 == 0:
            return {self.arms[0]: self.nodes[1], self.arms[1]: self.nodes[0]}
        if self.assigned:
            return {arm: self.assigned.get(arm, self.nodes[0]) for arm in self.arms}
        return {arm: self.nodes[i % len(self.nodes)] for i, arm in enumerate(self.arms)}

    def start_nodes(self) -> dict[str, Node]:
        """arm -> the node it starts on: its first placement, or (a switchback's arm not yet in turn) the
        design's node. Every arm starts, so its live flags can be checked before anything is measured."""
        first = self.nodes_for(1 if self.moves else None)
        return {arm: first[arm] or self.nodes[0] for arm in self.arms}

    def start_env(self) -> dict[str, dict[str, str]]:
        return {arm: node_env(*node) for arm, node in self.start_nodes().items()}


def placement_for(request) -> Placement:
    """The placement of a bench request (sglab.load.request.BenchRequest): its policy's design where sglab
    starts the two arms, parallel (and why, in notes) where it cannot move them."""
    config = request.loaded.config
    asked = config.policy.design
    arms = [a.name for a in request.arms]
    nodes = [(name, float(speed)) for name, speed in config.sim.nodes.items()]
    notes: list[str] = []
    design = asked
    joined = request.joined
    if joined is not None:  # the machines as period 1 placed the arms: period 2 swaps them
        return Placement(design="crossover", arms=arms, nodes=[(joined.first[a], 1.0) for a in arms],
                         notes=[f"period 1 is run {joined.run_id} (the arms on the other machines); this run is "
                                "period 2"], joined_period=2)
    movable = request.target_kind == "sim" or (request.target_kind == "in-cluster" and
                                               set(request.deployments) == set(arms))
    if request.target_kind == "in-cluster":
        nodes = []  # the nodes the arms run on when the run starts (ClusterMover.start)
    if asked != "parallel" and not movable:
        design = "parallel"
        notes.append(f"policy.design is {asked}, but the arms are servers given by URL ({request.target_kind}), "
                     "which sglab cannot move: ran parallel, so the gain includes any difference between their nodes")
    elif asked != "parallel" and (len(arms) != 2 or request.kind not in ("ab", "aa")):
        design = "parallel"
        notes.append(f"policy.design {asked} places the two arms of an A/B; this {request.kind} run has "
                     f"{len(arms)}: ran parallel")
    elif asked == "crossover" and len(nodes) < 2 and request.target_kind == "sim":
        design = "switchback"
        notes.append(f"policy.design is crossover but sim.nodes declares one node ({nodes[0][0]}): ran switchback "
                     "on it (declare two nodes for a crossover)")
    assigned = {}
    if request.target_kind == "sim" and request.arm_nodes:
        speeds = dict(nodes)
        assigned = {arm: (node, speeds[node]) for arm, node in request.arm_nodes.items()}
    return Placement(design=design, arms=arms, nodes=nodes, period_rounds=request.plan.period_rounds, notes=notes,
                     assigned=assigned)


# ---- carrying out the moves: the simulators, or the benchmark Job's Deployments -------------------------------------
FIELD_MANAGER = "sglab-benchmark"
HOSTNAME_LABEL = "kubernetes.io/hostname"
PINNED_BY = "sglab/pinned-by"  # a Deployment annotation: which Job pod pinned it
MOVE_POLL_S = 2.0


class MoveFailed(Exception):
    """An arm did not come back where its period placed it: the run ends invalid."""

    def __init__(self, arm: str, reason: str, restarted: list[str] | None = None) -> None:
        super().__init__(f"{arm}: {reason}")
        self.arm, self.reason, self.restarted = arm, reason, list(restarted or [])


class CannotMove(Exception):
    """The design cannot be carried out (before anything is measured): the run goes parallel and says why."""


class Mover(Protocol):
    def start(self) -> dict[str, Node | None]:
        """Where each arm runs before the first period."""

    def move(self, moving: dict[str, Node | None]) -> list[str]:
        """Put each arm of `moving` on its node (None: stopped); returns the arms started. Raises MoveFailed."""

    def check(self) -> str | None:
        """None while every arm is still the server the last move left; else what changed."""

    def finish(self) -> list[str]:
        """After the run: what was left in place, as notes for the design record."""


@dataclass
class SimMover:
    """The simulators of a `--target sim` run (targets.processes), restarted with their new node's env."""

    targets: Targets
    start_nodes: dict[str, Node]
    base_env: dict[str, str]

    def start(self) -> dict[str, Node | None]:
        return dict(self.start_nodes)

    def move(self, moving: dict[str, Node | None]) -> list[str]:
        sims = {sim.arm.name: sim for sim in self.targets.processes}
        stop_all([sims[arm].process for arm in moving if arm in sims])  # a node serves one server at a time
        restarted: list[str] = []
        for arm, node in moving.items():
            if node is None:
                continue
            old = sims[arm]
            sims[arm] = start_sim(old.arm, extra_env={**self.base_env, **node_env(*node)},
                                  log_dir=old.log_path.parent if old.log_path else None, port=old.port)
            restarted.append(arm)
        self.targets.processes = [sims[arm] for arm in sims]
        for arm in restarted:
            sim = sims[arm]
            try:
                wait_healthy(sim.url, process=sim.process, log_path=sim.log_path)
            except TargetError as exc:
                raise MoveFailed(arm, f"did not come back on node {moving[arm][0]} after a restart "  # type: ignore[index]
                                 f"({str(exc).splitlines()[0]})", restarted) from None
        return restarted

    def check(self) -> str | None:
        return None  # a simulator that dies is the watchdog's (sglab/load/targets.py)

    def finish(self) -> list[str]:
        return []


def _waiting_detail(pods: list[Any]) -> str:
    """Why a pod is not serving yet, in the API's words (unschedulable, image pull, not ready)."""
    if not pods:
        return "no pod yet"
    pod = pods[0]
    phase = pod.status.phase if pod.status is not None else None
    for condition in (pod.status.conditions or []) if pod.status is not None else []:
        if condition.status != "True" and condition.message:
            return f"pod {pod.metadata.name} {phase}: {condition.type} {condition.reason or ''}: {condition.message}"
    where = f" on {pod.spec.node_name}" if pod.spec.node_name else ""
    return f"pod {pod.metadata.name} {phase}{where}, not ready"


def pin_patch(node: str, holder: str, *, replicas: int | None = None) -> dict[str, Any]:
    """The Deployment patch that places its pod on `node` (and starts it again, a switchback's arm in turn)."""
    term = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}
    spec: dict[str, Any] = {"template": {"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"metadata": {"annotations": {PINNED_BY: holder}}, "spec": spec}


def stop_patch(holder: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {PINNED_BY: holder}}, "spec": {"replicas": 0}}


def unpin_and_stop_patch() -> dict[str, Any]:
    """After the run, where the arms are scaled to 0 anyway: the pin goes in the same patch, so nothing restarts."""
    return {"metadata": {"annotations": {PINNED_BY: None}},
            "spec": {"replicas": 0, "template": {"spec": {"affinity": {"nodeAffinity": None}}}}}


@dataclass
class ClusterMover:
    """The arms' Deployments in the benchmark Job's namespace (arm -> Deployment name), their Services' URLs."""

    deployments: dict[str, str]
    urls: dict[str, str]
    namespace: str
    apps: Any
    core: Any
    ready_timeout_s: float
    holder: str = "sglab-bench"
    scaled_down_after: bool = False  # the Job scales the arms to 0 when it ends: take the pins back with it
    poll_s: float = MOVE_POLL_S
    pods: dict[str, str | None] = field(default_factory=dict)  # arm -> the pod the last move left (None: stopped)
    pinned: set[str] = field(default_factory=set)
    selectors: dict[str, str] = field(default_factory=dict)

    def _selector(self, arm: str) -> str:
        if arm not in self.selectors:
            deployment = self.apps.read_namespaced_deployment(self.deployments[arm], self.namespace)
            labels = deployment.spec.selector.match_labels or {}
            self.selectors[arm] = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        return self.selectors[arm]

    def _pods(self, arm: str, *, terminating: bool = False) -> list[Any]:
        """The arm's pods that are not being deleted (with `terminating`, those too: they still hold the GPUs)."""
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=self._selector(arm)).items
        return sorted((p for p in pods if terminating or p.metadata.deletion_timestamp is None),
                      key=lambda p: p.metadata.name)

    def start(self) -> dict[str, Node | None]:
        where: dict[str, Node | None] = {}
        for arm, name in self.deployments.items():
            try:
                ready = [p for p in self._pods(arm) if pod_ready(p)]
            except Exception as exc:  # Forbidden, NotFound: the Job was not granted the move
                reason = getattr(exc, "reason", None) or type(exc).__name__
                raise CannotMove(f"cannot read Deployment {self.namespace}/{name} and its pods ({reason}); the "
                                 "benchmark Job's Role gets and patches the arms' Deployments") from None
            if len(ready) != 1 or not ready[0].spec.node_name:
                raise CannotMove(f"Deployment {self.namespace}/{name} has {len(ready)} ready pods; a move needs "
                                 "exactly one, on a node")
            self.pods[arm] = ready[0].metadata.name
            where[arm] = (ready[0].spec.node_name, 1.0)
        nodes = [node for node in where.values() if node is not None]
        if len(set(nodes)) != len(nodes):
            raise CannotMove(f"both arms run on node {nodes[0][0]}: nothing to swap")
        return where

    def move(self, moving: dict[str, Node | None]) -> list[str]:
        generations: dict[str, int] = {}
        for arm, node in moving.items():
            if node is None:
                body = stop_patch(self.holder)
            else:
                body = pin_patch(node[0], self.holder, replicas=1 if self.pods.get(arm) is None else None)
                self.pinned.add(arm)
            patched = self.apps.patch_namespaced_deployment(self.deployments[arm], self.namespace, body,
                                                            field_manager=FIELD_MANAGER)
            generations[arm] = patched.metadata.generation or 0
        deadline = time.monotonic() + self.ready_timeout_s
        pending = dict(moving)
        details: dict[str, str] = {}
        while pending:
            for arm in list(pending):
                done, details[arm] = self._settled(arm, pending[arm], generations[arm])
                if done:
                    del pending[arm]
            if not pending:
                break
            if time.monotonic() >= deadline:
                arm, node = next(iter(pending.items()))
                where = f"on node {node[0]}" if node else "stopped"
                raise MoveFailed(arm, f"did not come back {where} within {self.ready_timeout_s:g} s "
                                 f"(rollout.startup-timeout-min; {details[arm]})")
            time.sleep(self.poll_s)
        started = [arm for arm, node in moving.items() if node is not None]
        for arm in started:
            try:
                wait_healthy(self.urls[arm], timeout_s=max(1.0, deadline - time.monotonic()))
            except TargetError as exc:
                raise MoveFailed(arm, f"did not answer /health on node {moving[arm][0]} "  # type: ignore[index]
                                 f"({str(exc).splitlines()[0]})", started) from None
        return started

    def _settled(self, arm: str, node: Node | None, generation: int) -> tuple[bool, str]:
        """Whether the arm's Deployment has carried out its patch: stopped with no pod left, or one Ready pod on
        the wanted node; and what it waits for."""
        status = self.apps.read_namespaced_deployment(self.deployments[arm], self.namespace).status
        if (status.observed_generation or 0) < generation:
            return False, "the Deployment has not seen the patch yet"
        if node is None:
            self.pods[arm] = None
            left = self._pods(arm, terminating=True)
            return not left and not status.replicas, f"{len(left)} pods not gone yet"
        pods = self._pods(arm)
        ready = [p for p in pods if pod_ready(p) and p.spec.node_name == node[0]]
        if len(pods) == 1 and ready and (status.updated_replicas or 0) == 1:
            self.pods[arm] = ready[0].metadata.name
            return True, ""
        return False, _waiting_detail(pods)

    def check(self) -> str | None:
        for arm, expected in self.pods.items():
            try:
                found = [p.metadata.name for p in self._pods(arm)]
            except Exception as exc:
                return f"cannot list the {arm} server's pods ({getattr(exc, 'reason', None) or type(exc).__name__})"
            if found != ([expected] if expected else []):
                return (f"the {arm} server changed while a period measured (pods {found or 'none'}, expected "
                        f"{expected or 'none'}): replaced by something else than this run (a pulumi up, an eviction)")
        return None

    def finish(self) -> list[str]:
        if not self.pinned:
            return []
        names = ", ".join(self.deployments[arm] for arm in sorted(self.pinned))
        if not self.scaled_down_after:
            return [f"the Job left Deployments {names} pinned to the nodes of the last period (node affinity on "
                    f"{HOSTNAME_LABEL}, field manager {FIELD_MANAGER}); docs/in-cluster.md says how to unpin them"]
        failed = []
        for arm in sorted(self.pinned):
            try:
                self.apps.patch_namespaced_deployment(self.deployments[arm], self.namespace, unpin_and_stop_patch(),
                                                      field_manager=FIELD_MANAGER)
            except Exception as exc:
                failed.append(f"{self.deployments[arm]} ({getattr(exc, 'reason', None) or type(exc).__name__})")
        if failed:
            return [f"could not take the pin back from {', '.join(failed)}: docs/in-cluster.md says how to unpin"]
        return [f"the Job scaled {names} to 0 and took its node pins back in the same patch"]


def cluster_apis() -> tuple[Any, Any, str]:
    """(AppsV1Api, CoreV1Api, namespace) of the pod this runs in."""
    from kubernetes import client, config

    from sglab.results.sink import current_namespace

    config.load_incluster_config()
    return client.AppsV1Api(), client.CoreV1Api(), current_namespace()


def mover_for(request: Any, targets: Targets, placement: Any, sim_env: dict[str, str]) -> Mover:
    """The backend for a run whose design moves its arms (placement_for said it can); `sim_env`: the env a
    simulator restarts with (sglab.load.request.sim_start_env)."""
    if request.target_kind == "sim":
        return SimMover(targets, placement.start_nodes(), sim_env)
    try:
        apps, core, namespace = cluster_apis()
    except Exception as exc:  # not in a pod, or no credentials
        raise CannotMove(f"the Kubernetes API is not reachable ({type(exc).__name__}: {exc})") from None
    stack = request.loaded.config
    return ClusterMover(dict(request.deployments), dict(targets.urls), namespace, apps, core,
                        ready_timeout_s=stack.rollout.startup_timeout_min * 60.0,
                        holder=os.environ.get("POD_NAME") or "sglab-bench",
                        scaled_down_after=stack.benchmark_scales_arms_down)
