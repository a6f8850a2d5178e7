"""The operating point decides: losing levels are named, ungated levels said, traffic gates every level."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.report.console import format_table
from sglab.core.errors import ConfigError
from sglab.config.loader import load_stack
from sglab.config.policy import PromotionPolicy, Traffic
from sglab.report import write_report

DEMO = {1: 0.033, 4: -0.032, 16: -0.188}  # what make demo measured on eagle-nccl-ll


def test_a_promotion_names_every_losing_level_and_the_ungated_ones() -> None:
    v = judge(synthetic_result(gain=DEMO))
    assert v.outcome == "promote" and v.sentence.startswith("promote: the candidate's gain is +")
    assert "loses" in v.sentence and "at concurrency 4" in v.sentence and "at concurrency 16" in v.sentence
    assert "do not serve ≥ 3 concurrent requests with this config" in v.sentence  # crossover ≈ 2.4
    assert "Only concurrency 1 was judged (policy.levels; no sglab:traffic declared)" in v.sentence
    assert v.operating_point.losing == [4, 16] and v.operating_point.ungated == [4, 16]
    table = format_table(v)
    assert "LOSES: " in table and table.rstrip().endswith("verdict: promote")


def test_nothing_is_added_when_every_measured_level_is_gated_and_wins() -> None:
    v = judge(synthetic_result(gain=0.05, levels=(1, 4), policy={"levels": [1, 4]}))
    assert v.outcome == "promote" and v.operating_point.loss_text is None
    assert v.sentence.endswith("guards hold.")


def test_traffic_gates_every_level_so_the_demo_numbers_reject() -> None:
    policy = PromotionPolicy(traffic=Traffic(levels=[1, 16]))
    v = judge(synthetic_result(gain=DEMO), policy)
    assert v.gating_levels == [1, 16] and v.level(16).gating and v.level(16).outcome == "lose"
    assert v.outcome == "reject" and "at concurrency 16" in v.sentence
    assert "outside the declared traffic" in v.sentence and v.operating_point.gated_by == "traffic"


def test_non_inferiority_where_the_traffic_says_so() -> None:
    result = synthetic_result(gain={1: 0.05, 16: -0.01}, levels=(1, 16), rounds=8)
    # a fixed 8-round run read once: the fixed-n paired-t (the sequence would need more rounds to decide)
    strict = judge(result, PromotionPolicy(method="paired-t", traffic=Traffic(levels=[1, 16])))
    assert strict.outcome != "promote"
    lenient = judge(result, PromotionPolicy(method="paired-t",
                                            traffic=Traffic(levels=[1, 16], non_inferiority={16: 0.05})))
    assert lenient.level(16).outcome == "win" and lenient.level(16).non_inferiority_margin == 0.05
    assert lenient.outcome == "promote" and "non-inferiority margin -5.0%" in lenient.sentence
    assert "loses -" in lenient.sentence  # still named: it is slower there, within the margin


def test_traffic_weights_give_a_weighted_gain() -> None:
    result = synthetic_result(gain={1: 0.10, 4: 0.02}, levels=(1, 4))
    v = judge(result, PromotionPolicy(traffic=Traffic(levels=[1, 4], weights=[1, 3])))
    g1, g4 = v.level(1).decode.estimate, v.level(4).decode.estimate
    assert v.operating_point.weighted_gain == pytest.approx(((1 + g1) * (1 + g4) ** 3) ** 0.25 - 1)


def test_report_shows_the_loss_on_top(tmp_path: Path) -> None:
    path = write_report(synthetic_result(gain=DEMO), tmp_path)
    html = path.read_text()
    assert html.index("PROMOTE") < html.index("LOSES") < html.index("Per concurrency level")
    assert "<svg" in html and (tmp_path / "latency_throughput.png").exists()


STACK = """config:
  sglab:backend: sim
  sglab:model: {{path: m}}
  sglab:server: {{tp-size: 1, max-running-requests: 48}}
  sglab:candidate:
    speculative: {{algorithm: EAGLE3, draft-model-path: d, num-steps: 2, eagle-topk: 1, num-draft-tokens: 3}}
  sglab:placement: {{gpus-per-node: 1}}
{extra}
"""


def _load(tmp_path: Path, extra: str):
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(STACK.format(extra=extra))
    return load_stack("t", path=path)


def test_traffic_in_the_stack_becomes_the_gate(tmp_path: Path) -> None:
    loaded = _load(tmp_path, "  sglab:traffic: {levels: [1, 16]}\n  sglab:policy: {slo: {ttft-ms: 500, tpot-ms: 40}}")
    policy = loaded.config.policy
    assert policy.levels == [1, 16] and policy.traffic.levels == [1, 16] and policy.slo.ttft_ms == 500
    recorded = policy.model_dump(mode="json", by_alias=False)
    assert PromotionPolicy.model_validate(recorded) == policy  # what a result records judges the same


@pytest.mark.parametrize("extra, key", [
    ("  sglab:traffic: {levels: [1, 32]}", "traffic.levels"),
    ("  sglab:traffic: {levels: [1]}\n  sglab:policy: {levels: [4]}", "policy.levels"),
    ("  sglab:traffic: {profile: rate, levels: [1]}", "traffic.profile"),
    ("  sglab:policy: {metric: goodput_tok_per_s}", "policy.metric"),
    ("  sglab:traffic: {levels: [1, 4], weights: [1]}", "traffic"),
    # the SLO is the gate's, declared once in policy.slo, with or without sglab:traffic
    ("  sglab:traffic: {levels: [1], slo: {ttft-ms: 500}}", "traffic.slo"),
])
def test_bad_traffic_is_refused_with_its_key(tmp_path: Path, extra: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, extra)
    assert info.value.key.startswith("sglab:" + key), str(info.value)
    if key == "traffic.slo":
        assert "move it to policy.slo" in str(info.value)


def test_the_recorded_traffic_judges_the_same_after_the_result_file() -> None:
    from sglab.schema.result import RunResult

    policy = PromotionPolicy(method="paired-t", traffic=Traffic(levels=[1, 16], non_inferiority={16: 0.05}),
                             levels=[1, 16])
    result = synthetic_result(gain={1: 0.05, 16: -0.01}, levels=(1, 16), rounds=8,
                              policy=policy.model_dump(mode="json", by_alias=False))
    stored = RunResult.model_validate_json(result.model_dump_json())
    v = judge(stored)
    assert v.gating_levels == [1, 16] and v.level(16).non_inferiority_margin == 0.05
    assert v.operating_point.gated_by == "traffic" and v.outcome == "promote"


def test_a_negative_estimate_inside_the_noise_is_not_called_a_loss_to_avoid() -> None:
    """An A/A run's -0.1% (interval across zero) must not tell the user to stop serving the config."""
    v = judge(synthetic_result(gain={1: 0.0, 4: -0.01}, levels=(1, 4), round_cv=0.02))
    g = v.level(4).decode
    assert g.estimate < 0 < g.high
    assert "do not serve" not in v.sentence and "which includes no change" in v.sentence
    assert v.operating_point.losing == [4] and v.operating_point.slower == []
    assert "LOSES" not in format_table(v) and "within the noise" in format_table(v)
