"""The sweep decides on the policy's gate metric as the verdict does: a goodput metric with the SLO, a metric
where lower is better the right way round."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from sglab import metrics
from sglab.config import load_stack
from sglab.config.policy import Slo
from sglab.load.schedule import plan_for
from sglab.schema.result import LevelResult, RequestSample, RoundSample
from sglab.sweep.grid import expand
from sglab.sweep.run import SweepController, new_state

GAINS = {"s1-k1-d2": -0.2, "s3-k1-d4-LL": 0.10, "s5-k1-d6-LL": 0.15}


def level(n: int, value_of, *, sd: float = 0.01, seed: int = 0, requests: bool = False) -> LevelResult:
    """n rounds at concurrency 1 of the baseline and GAINS' arms; value_of(gain, noise) is the round's value."""
    rng = np.random.default_rng(seed)
    rounds, samples = [], []
    for i in range(n):
        for position, arm in enumerate(["baseline", *GAINS]):
            value = value_of(GAINS.get(arm, 0.0), math.exp(rng.normal(0, sd)))
            rounds.append(RoundSample(level=1, round_index=i, position=position, arm=arm, started_at_s=float(i),
                                      duration_s=1.0, requests=4, errors=0, output_tokens=int(value),
                                      output_tok_per_s=value, decode_tok_per_s_mean=value,
                                      metrics={"test_latency_ms": value}))
            if requests:  # four good requests whose tokens add up to the round's value (goodput = value / 1 s)
                samples += [RequestSample(arm=arm, level=1, round_index=i, start_s=float(i), output_tokens=0,
                                          ttft_ms=50.0, e2e_ms=900.0, metrics={}) for _ in range(4)]
                for s in samples[-4:]:
                    s.output_tokens = max(2, int(value / 4))
    return LevelResult(concurrency=1, rounds=rounds, requests=samples)


def controller(tmp_path: Path, **policy) -> SweepController:
    loaded = load_stack("eagle-sweep")
    grid = expand(loaded)
    grid.arms = [a for a in grid.arms if a.name in GAINS]
    plan = plan_for(loaded, quick=True)
    state = new_state(loaded, grid, plan, run_id="r1", quick=True, sim_env={}, target="urls")  # no slot layout
    gate = loaded.config.policy.model_copy(update=policy)
    state.metric = gate.metric
    return SweepController(state, plan, gate, tmp_path, echo=lambda _: None)


def race(ctl: SweepController, make) -> None:
    for n in range(1, ctl.state.max_rounds + 1):
        ctl.round_done(1, n - 1, make(n))
        if not ctl.arms_for_round(1, n):
            break


def test_a_goodput_gate_gets_its_rounds_from_the_slo(tmp_path: Path) -> None:
    ctl = controller(tmp_path, metric="goodput_tok_per_s", slo=Slo(ttft_ms=200.0))
    race(ctl, lambda n: level(n, lambda g, e: 1000 * (1 + g) * e, requests=True))
    record = ctl.state.records["1"]
    assert record["rounds"] >= 3 and all(a["rounds"] > 0 for a in record["arms"])
    assert ctl.state.winner == "s5-k1-d6-LL", record["outcome"]


def test_a_metric_where_lower_is_better_picks_the_lowest(tmp_path: Path) -> None:
    latency = metrics.Metric(name="test_latency_ms", unit="ms", label="test latency", direction="lower",
                             can_gate=True)
    with metrics.registered(latency):
        ctl = controller(tmp_path, metric="test_latency_ms")
        race(ctl, lambda n: level(n, lambda g, e: 100.0 / (1 + g) * e))
    assert ctl.state.winner == "s5-k1-d6-LL"
    gains = {a["arm"]: a["estimate"] for a in ctl.state.records["1"]["arms"]}
    assert gains["s5-k1-d6-LL"] > 0.1  # reported as a gain: the pick is better than the baseline
