"""Where each arm runs in each round: policy.design carried out on the simulated nodes of the stack's `sim.nodes`.

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
`--deployment ARM=NAME`: sglab/load/moves.py; its nodes are the ones the arms run on when it starts); servers
given by URL, attribution runs (four arms) and a sweep's race run parallel, and their DesignRecord says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sglab.config.server import node_env

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
