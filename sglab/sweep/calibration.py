"""A sweep's slot nodes calibrated: how much faster or slower each node runs the baseline's own config.

A sweep's arms run on slot nodes, its baseline on a node of its own; a node's speed adds the same offset to every
round an arm runs there, which the race's paired rounds cannot cancel (docs/load.md, "Designs"). Before a gated
level's race, a calibration block runs the baseline config on every slot node beside the baseline for
`sweep.calibration-rounds` rounds: the mean per-round log ratio is the node's offset against the baseline's node,
with a Student t interval at level 1 - alpha * CALIBRATION_ALPHA_SHARE / S (S slot nodes calibrated). The race
subtracts the offset of an arm's node from its values and widens every bound by the intervals' half-widths it
involves (none between two arms on one node), its own sequences at 1 - alpha * (1 - share) / K: with probability at
least 1 - alpha every calibration interval holds its node's offset and every sequence of the best arm holds its
mean, so the race's family-wise guarantee stands with the node effects removed.

Which rounds calibrated and which node served which arm are read from the sealed result (RoundSample.node),
never from sweep.json: a calibration arm is the baseline config named `baseline@<node>`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel
from scipy import stats

CALIBRATION_ALPHA_SHARE = 0.5  # of 1 - policy.confidence, spent on the node offsets' intervals
PREFIX = "baseline@"


def calibration_arm(node: str) -> str:
    """The name of the baseline config running on `node` during a calibration block."""
    return f"{PREFIX}{node}"


def calibrated_node(arm: str) -> str | None:
    """The node a calibration arm ran on (None: not a calibration arm)."""
    return arm[len(PREFIX):] if arm.startswith(PREFIX) else None


class NodeOffset(BaseModel):
    """One slot node against the baseline's: the baseline config on each, paired by round."""

    node: str
    rounds: int
    mean_log: float | None  # mean of log(value on this node / value on the baseline's node), oriented
    halfwidth_log: float | None  # of its interval (None: unbounded, fewer than 2 rounds)
    estimate: float | None  # exp(mean_log) - 1: this node is that much faster (negative: slower)
    low: float | None
    high: float | None

    def describe(self, against: str) -> str:
        if self.estimate is None:
            return f"{self.node}: not measured"
        if self.low is None or self.high is None:
            return f"{self.node}: {self.estimate:+.1%} against {against} ({self.rounds} rounds, no interval yet)"
        return (f"{self.node}: {self.estimate:+.1%} [{self.low:+.1%}, {self.high:+.1%}] against {against} "
                f"({self.rounds} rounds)")


def node_offsets(values: np.ndarray, nodes: Sequence[str], *, confidence: float) -> list[NodeOffset]:
    """`values`: rounds x (1 + S) oriented log values of the calibration block (the baseline, then the baseline
    config on each of `nodes`; NaN where a segment gave none). Each node's interval is at 1 - alpha * share / S."""
    data = np.asarray(values, dtype=float).reshape(-1, len(nodes) + 1)
    alpha = (1.0 - confidence) * CALIBRATION_ALPHA_SHARE / max(len(nodes), 1)
    out = []
    for s, node in enumerate(nodes):
        both = np.isfinite(data[:, 0]) & np.isfinite(data[:, 1 + s])
        diff = data[both, 1 + s] - data[both, 0]
        n = int(diff.size)
        mean = float(diff.mean()) if n else None
        half = None
        if n >= 2:
            half = float(stats.t.ppf(1.0 - alpha / 2.0, n - 1) * diff.std(ddof=1) / math.sqrt(n))
        out.append(NodeOffset(node=node, rounds=n, mean_log=mean, halfwidth_log=half,
                              estimate=None if mean is None else math.expm1(mean),
                              low=None if mean is None or half is None else math.expm1(mean - half),
                              high=None if mean is None or half is None else math.expm1(mean + half)))
    return out


def arm_corrections(arm_nodes: Sequence[str | None], baseline_node: str | None, offsets: Sequence[NodeOffset]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per arm: (offset to subtract, the half-width its bounds widen by, a node id: arms on one node share it).
    No calibration at all: nothing is corrected (the gaps include the nodes, as the sweep's output says). Otherwise
    an arm on the baseline's node needs no correction, and one on a node without a measured offset gets an
    unbounded half-width (the race can then never decide on it)."""
    by_node = {o.node: o for o in offsets}
    ids = {node: i for i, node in enumerate(dict.fromkeys([baseline_node, *arm_nodes]))}
    offset = np.zeros(len(arm_nodes))
    half = np.zeros(len(arm_nodes))
    for j, node in enumerate(arm_nodes if offsets else []):
        if node == baseline_node:
            continue
        found = by_node.get(node or "")
        if found is None or found.mean_log is None or found.halfwidth_log is None:
            half[j] = math.inf
            continue
        offset[j], half[j] = found.mean_log, found.halfwidth_log
    return offset, half, np.array([ids[node] for node in arm_nodes])
