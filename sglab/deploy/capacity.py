"""The capacity preflight: will the GPU-holding servers of a `pulumi up` fit the nodes the stack may hold?

Pulumi creates new resources before it deletes the ones they replace (pulumi/pulumi#9979), so during an update
every server of the old shape and every new one can exist at once. A stack's servers are the baseline and its
candidate slots (sglab/sweep/arms.py): a sweep wave, the next wave and the confirmation A/B all use the
same `parallel-arms` slots, so moving between them replaces servers in place and the most that can ever exist
at once is the baseline plus every slot. That many servers, each `placement.nodes` whole GPU nodes, must fit in
`placement.max-nodes` (or what the caller is told), or new servers stay Pending on `Insufficient nvidia.com/gpu`
while the old ones are never deleted.

A serving stack (`sglab:serving`, sglab/serving/objects.py) holds its standing control and an Argo Rollouts
Rollout. With the Gateway API traffic router the stable pods all stay until the canary is promoted
(`dynamicStableScale: false`: an abort reloads nothing), so at full promotion the new revision's `replicas`
run beside the old one's: twice `replicas`. Routed by replica count, Argo keeps at most `replicas +
max-surge` pods.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglab.config.stack import StackConfig
from sglab.sweep.arms import slot_count
from sglab.core.errors import ConfigError
from sglab.core.paths import stack_path

KEY = "placement.max-nodes"


@dataclass(frozen=True)
class Capacity:
    servers: int  # GPU-holding servers that may exist at once
    nodes_per_server: int
    max_nodes: int | None
    probe: bool  # the NCCL probe may ask for one more free node beside them

    @property
    def nodes(self) -> int:
        return self.servers * self.nodes_per_server

    def describe(self) -> str:
        line = (f"capacity: up to {self.servers} servers x {self.nodes_per_server} node"
                f"{'s' if self.nodes_per_server > 1 else ''} = {self.nodes} GPU nodes at once")
        if self.max_nodes is None:
            return line + f" ({KEY} unset: not checked)"
        return line + f" of {KEY} {self.max_nodes}"


def rollout_peak(serving) -> int:
    """The most pods of the serving Rollout that exist at once during a rollout (see the module docstring)."""
    if serving.traffic_router == "gateway-api":
        return 2 * serving.replicas
    return serving.replicas + serving.max_surge


def capacity(stack: StackConfig, max_nodes: int | None = None) -> Capacity | None:
    """The plan's peak, or None when the servers hold no GPUs (the simulator)."""
    if stack.placement.gpus_per_node == 0:
        return None
    if stack.serving is not None:
        servers = stack.serving.control.replicas + rollout_peak(stack.serving)
    else:
        servers = 1 + (slot_count(stack) if stack.sweep is not None else 1)
    return Capacity(servers, stack.placement.nodes, max_nodes or stack.placement.max_nodes, stack.probe.enabled)


def check_capacity(stack: StackConfig, stack_name: str,
                   max_nodes: int | None = None) -> tuple[Capacity | None, list[str]]:
    """The capacity and its warnings; raises ConfigError (exit 2) for a plan that could deadlock."""
    cap = capacity(stack, max_nodes)
    if cap is None or cap.max_nodes is None:
        return cap, []
    if cap.nodes > cap.max_nodes:
        if stack.sweep is not None:
            fit = cap.max_nodes // cap.nodes_per_server - 1
            fix = (f"set sweep.parallel-arms to at most {fit} (the baseline takes one server), or raise {KEY} if "
                   "the pool has the nodes" if fit >= 1 else f"raise {KEY}: even one slot beside the baseline "
                   "needs more nodes")
        elif stack.serving is not None:
            fix = (f"give the stack {cap.nodes} GPU nodes ({KEY}); or lower serving.replicas, or route by replica "
                   "count (serving.traffic-router: replicas, whose peak is replicas + serving.max-surge)")
        else:
            fix = f"give the stack {cap.nodes} GPU nodes ({KEY}), or use a smaller placement"
        why = ("during a rollout Argo Rollouts runs the new revision beside the stable one (the standing control "
               "too), so the canary's pods would stay Pending and the rollout would never finish"
               if stack.serving is not None else
               "Pulumi creates new servers before deleting old ones, so the new ones would stay Pending and the old "
               "ones would never be deleted")
        raise ConfigError(stack_path(stack_name), KEY,
                          f"the servers need {cap.nodes} GPU nodes at once ({cap.servers} servers of "
                          f"{cap.nodes_per_server} node{'s' if cap.nodes_per_server > 1 else ''}), more than "
                          f"{KEY} {cap.max_nodes}: {why}", fix)
    warnings = []
    if cap.probe and cap.nodes + 1 > cap.max_nodes:
        warnings.append(f"the NCCL probe needs a free GPU node beside the {cap.servers} servers, and {KEY} "
                        f"{cap.max_nodes} leaves none: a probe requested (probe.rerun) while the servers run waits "
                        "until probe.timeout-min and fails (the servers are not affected); run it on a fresh "
                        "deploy, or with `sglab probe nccl --stack S | kubectl apply -f -` while a node is free")
    return cap, warnings
