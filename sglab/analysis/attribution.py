"""Where the candidate's gain comes from: split by its declared differences and speculation, and by prompt category.

Attribution. Four arms run interleaved in every round: baseline (B), baseline + the candidate's declared
differences (B+), candidate without them (C-), candidate (C). Per round, with g_X = X / B - 1:
differences alone = g_B+, speculation alone = g_C-, interaction = g_C - g_B+ - g_C-, so the three
parts add up exactly to the total g_C. Each gets a paired interval over rounds.

Per category: the gain and the candidate's accept length for each prompt category. Drafts accept very
differently on code, maths and open chat, so one average can hide a category where the candidate loses. Requests
carry their prompt's category (RequestSample.category); per level and category the gain is paired by round like
the level's own (geometric mean of per-round ratios of the category's requests), on the gate metric when it is a
per-request metric, else on decode tok/s. Intervals need two rounds where both arms served the category.

Seven categories at one level are seven intervals: at 95% each, one of them excludes no change in about 30% of
A/A runs (an A/A run printed `long-context +0.3% [+0.1%, +0.5%]`). Each interval is therefore at
1 - alpha / k for the k categories of its level (Bonferroni: all k cover at once with probability >= 1 - alpha,
however the categories are correlated; tests/analysis/test_category_multiplicity.py measures it).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from sglab import metrics
from sglab.analysis.samples import CiMethod, log_ratio_ci, mean_ci, paired
from sglab.config.policy import PromotionPolicy
from sglab.schema.result import RequestSample, RunResult
from sglab.schema.verdict import Attribution, CategoryGain, Component, Gain, LevelAttribution

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


def category_metric(policy: PromotionPolicy) -> str:
    """The metric a category can be judged on: the gate metric when it is a mean of requests."""
    return policy.metric if metrics.get(policy.metric).from_requests else "decode_tok_per_s"


def _per_round(requests: list[RequestSample], metric: metrics.Metric) -> dict[int, dict[str, float]]:
    grouped: dict[tuple[int, str], list[float]] = defaultdict(list)
    for r in requests:
        value = metric.request_value(r)
        if value is not None and value > 0:
            grouped[(r.round_index, r.arm)].append(value)
    out: dict[int, dict[str, float]] = defaultdict(dict)
    for (round_index, arm), values in grouped.items():
        out[round_index][arm] = float(np.mean(values))
    return out


def _cycle_accept(r: RequestSample) -> float | None:
    """Tokens per verify cycle: 1 + correct drafts / verify passes when the server said (no prefill token),
    else the request's accept length."""
    if r.spec_correct_drafts is not None and r.spec_verify_ct:
        return 1.0 + r.spec_correct_drafts / r.spec_verify_ct
    return r.accept_length


def category_gains(result: RunResult, base: str, cand: str, policy: PromotionPolicy) -> list[CategoryGain]:
    """One CategoryGain per (level, category) with requests from both arms; [] when no request has a category."""
    metric = metrics.get(category_metric(policy))
    out: list[CategoryGain] = []
    for level in sorted(result.levels, key=lambda lv: lv.concurrency):
        measured = [r for r in level.requests if r.category is not None and not r.warmup and r.round_index >= 0
                    and r.error is None and r.arm in (base, cand)]
        names = sorted({r.category for r in measured})
        confidence = 1.0 - (1.0 - policy.confidence) / max(len(names), 1)
        for category in names:
            requests = [r for r in measured if r.category == category]
            table = _per_round(requests, metric)
            rounds = sorted(i for i, v in table.items() if base in v and cand in v)
            gain = Gain(metric=metric.name, rounds=len(rounds))
            if rounds:
                data = np.array([[table[i][base], table[i][cand]] for i in rounds])
                worse, better = metric.improvement(data[:, 0], data[:, 1])
                ci = log_ratio_ci(worse, better, confidence=confidence,
                                  method=policy.interval_method(level.concurrency))
                estimate, low, high = ci.as_gain()
                gain = Gain(metric=metric.name, rounds=ci.n, baseline_mean=float(data[:, 0].mean()),
                            candidate_mean=float(data[:, 1].mean()), estimate=estimate, low=low, high=high,
                            mean_log=ci.mean, sd_log=ci.sd)
            accepts: dict[int, list[float]] = defaultdict(list)
            for r in requests:
                if r.arm == cand and (value := _cycle_accept(r)) is not None:
                    accepts[r.round_index].append(value)
            accept = low_a = high_a = None
            if accepts:
                per_round = np.array([np.mean(v) for v in accepts.values()])
                ci_a = mean_ci(per_round, confidence=confidence)
                accept, low_a, high_a = ci_a.mean, ci_a.low, ci_a.high
            out.append(CategoryGain(
                level=level.concurrency, category=category, gain=gain,
                baseline_requests=sum(1 for r in requests if r.arm == base),
                candidate_requests=sum(1 for r in requests if r.arm == cand),
                accept_length=accept, accept_low=low_a, accept_high=high_a, confidence=confidence))
    return out
