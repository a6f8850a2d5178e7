"""A metric is one declaration: declared once, it flows collector -> result -> verdict -> table."""

from __future__ import annotations

import pytest

from sglab import metrics
from sglab.analysis import verdict as verdict_module
from sglab.analysis.verdict import METRICS, judge
from sglab.report.console import format_table
from sglab.load.collector import SampleCollector
from sglab.load.summary import arm_level_summary, round_sample
from sglab.schema.result import ArmInfo, LevelResult, RequestSample, RunResult, Target

FAKE = metrics.Metric(name="fake_tokens_per_request", unit="tok", label="fake tok/req", direction="higher",
                      per_request=lambda s: float(s.output_tokens), can_gate=True,
                      description="output tokens of a request (a test metric)")
TOKENS = {"baseline": 100, "candidate": 120}  # the fake metric's truth: candidate +20%


def _request(arm: str, round_index: int, i: int, start_s: float) -> RequestSample:
    tokens = TOKENS[arm] + (round_index % 3) - 1 + (i % 2)
    return RequestSample(arm=arm, level=1, round_index=round_index, start_s=start_s, output_tokens=tokens,
                         ttft_ms=20.0, e2e_ms=20.0 + 10.0 * (tokens - 1), itl_ms=[10.0] * (tokens - 1),
                         decode_tok_per_s=100.0, prompt_index=i, temperature=0.0,
                         output_sha256=f"{i:064x}")  # both arms answer prompt i alike: output parity holds


def _run(rounds: int = 6, metric: str = "fake_tokens_per_request") -> RunResult:
    collector = SampleCollector()
    level = LevelResult(concurrency=1)
    t = 0.0
    for r in range(rounds):
        for position, arm in enumerate(("baseline", "candidate")):
            for i in range(5):
                collector.record(_request(arm, r, i, t))
            samples = collector.samples(arm, round_index=r)
            level.rounds.append(round_sample(samples, level=1, round_index=r, position=position, arm=arm,
                                             warmup=False, started_at_s=t, duration_s=1.0,
                                             server_accept_length=None))
            t += 1.0
    level.requests = collector.samples()
    for arm in TOKENS:
        level.arms[arm] = arm_level_summary(collector.samples(arm), [s for s in level.rounds if s.arm == arm])
    arms = [ArmInfo(name=a, role=a, speculative=a == "candidate", config_hash=a, launch_command="x",
                    live_flags_checked=True) for a in TOKENS]
    return RunResult(run_id="r1", stack="fake", started_at="2026-01-01T00:00:00Z", complete=True,
                     target=Target(kind="sim"), arms=arms, config_hash={a: a for a in TOKENS}, levels=[level],
                     policy={"metric": metric, "levels": [1], "min_requests": 5})


def test_a_fake_metric_flows_from_the_collector_to_the_verdict_table() -> None:
    with metrics.registered(FAKE):
        assert "fake_tokens_per_request" in verdict_module.METRICS
        stored = RunResult.model_validate_json(_run().model_dump_json())  # through the result file format
        level = stored.levels[0]
        assert level.requests[0].metrics["fake_tokens_per_request"] == level.requests[0].output_tokens
        assert 99 < level.rounds[0].metrics["fake_tokens_per_request"] < 121
        assert set(level.arms["candidate"].metrics) == {"fake_tokens_per_request"}
        verdict = judge(stored)
        gain = verdict.level(1).gain("fake_tokens_per_request")
        assert gain.rounds == 6 and gain.estimate == pytest.approx(0.20, abs=0.01)
        assert verdict.metric == "fake_tokens_per_request" and verdict.outcome == "promote"
        table = format_table(verdict)
        assert "fake tok/req gain" in table.splitlines()[1]
        assert f"{gain.estimate:+.1%}" in table.splitlines()[3] and "gate fake tok/req ≥ +0.5%" in table
    assert "fake_tokens_per_request" not in [m.name for m in metrics.all_metrics()]


def test_a_lower_is_better_metric_counts_a_drop_as_a_gain() -> None:
    slow = metrics.Metric(name="fake_latency_ms", unit="ms", label="fake ms", direction="lower",
                          per_request=lambda s: 1000.0 / s.output_tokens)
    with metrics.registered(slow):
        verdict = judge(RunResult.model_validate_json(_run(metric="decode_tok_per_s").model_dump_json()))
        gain = verdict.level(1).gain("fake_latency_ms")
        assert gain.estimate == pytest.approx(0.20, abs=0.01)
        assert gain.candidate_mean < gain.baseline_mean


def test_the_built_in_metrics_are_the_gate_metrics_and_names_are_unique() -> None:
    # goodput at SLO is the third kind of built-in gate metric
    built_in = ["decode_tok_per_s", "output_tok_per_s", "goodput_tok_per_s", "goodput_req_per_s"]
    assert metrics.gate_metric_names() == built_in
    assert METRICS == tuple(built_in)
    with pytest.raises(ValueError, match="already declared"):
        metrics.register(metrics.Metric(name="decode_tok_per_s", unit="tok/s", label="x"))


def test_a_fake_metric_reaches_compare_and_its_csv(tmp_path, capsys) -> None:
    from sglab.cli import main
    from sglab.results.store import write_result

    with metrics.registered(FAKE):
        run_dir = tmp_path / "fake" / "r1"
        write_result(_run(), run_dir)
        assert main(["compare", str(run_dir)]) == 0
        out = capsys.readouterr().out
        assert "fake tok/req gain" in out and out.rstrip().splitlines()[-1].startswith("verdict: promote")
        assert main(["compare", str(run_dir), "--output", "csv"]) == 0
        header = (run_dir / "rounds.csv").read_text(encoding="utf-8").splitlines()[0]
        assert header.endswith("decode_tok_per_s,output_tok_per_s,fake_tokens_per_request,producer,time_scale")
        assert "fake_tokens_per_request_gain" in (run_dir / "verdict.csv").read_text(encoding="utf-8")
