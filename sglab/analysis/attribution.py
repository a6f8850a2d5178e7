"""Attribution: split the candidate's gain into its declared differences, speculation and interaction.

Four arms run interleaved in every round: baseline (B), baseline + the candidate's declared
differences (B+), candidate without them (C-), candidate (C). Per round, with g_X = X / B - 1:
differences alone = g_B+, speculation alone = g_C-, interaction = g_C - g_B+ - g_C-, so the three
parts add up exactly to the total g_C. Each gets a paired interval over rounds.
"""

from __future__ import annotations

import numpy as np

from sglab.analysis.samples import CiMethod, mean_ci, paired
from sglab.schema.result import RunResult
from sglab.schema.verdict import Attribution, Component, LevelAttribution

ATTRIBUTION_ARMS = ("baseline", "baseline+confounds", "candidate-confounds", "candidate")


def confounds_label(result: RunResult) -> str:
    """'NCCL alone' when every declared difference is an NCCL_* variable, else a generic label."""
    keys = [c.key for c in result.confounds]
    if keys and all(k.startswith("env NCCL_") or k.startswith("nccl") for k in keys):
        return "NCCL alone"
    return "declared differences alone"


def attribute(result: RunResult, *, metric: str = "decode_tok_per_s", confidence: float = 0.95,
              method: CiMethod = "paired-t") -> Attribution | None:
    """None unless the result holds all four attribution arms."""
    names = {a.name for a in result.arms}
    if not set(ATTRIBUTION_ARMS) <= names:
        return None
    label = confounds_label(result)
    levels: list[LevelAttribution] = []
    for level in sorted(result.levels, key=lambda lv: lv.concurrency):
        rounds, data = paired(level, metric, list(ATTRIBUTION_ARMS))
        if not rounds:
            continue
        base = data[:, 0]
        g_confounds, g_speculation, g_total = (data[:, i] / base - 1.0 for i in (1, 2, 3))
        parts = {
            "total": ("total", g_total),
            "confounds": (label, g_confounds),
            "speculation": ("speculation alone", g_speculation),
            "interaction": ("interaction", g_total - g_confounds - g_speculation),
        }
        components = []
        for key, (text, values) in parts.items():
            ci = mean_ci(np.asarray(values), confidence=confidence, method=method)
            components.append(Component(key=key, label=text, estimate=ci.mean, low=ci.low, high=ci.high))
        levels.append(LevelAttribution(concurrency=level.concurrency, rounds=len(rounds), components=components))
    return Attribution(metric=metric, confidence=confidence, confounds_label=label, levels=levels)
