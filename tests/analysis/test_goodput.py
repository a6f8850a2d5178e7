"""Goodput at SLO: good requests' tokens (and count) per second, against a hand computation."""

from __future__ import annotations

import pytest

from sglab import metrics
from sglab.analysis.samples import per_round
from sglab.analysis.verdict import judge
from sglab.config.policy import PromotionPolicy, Slo
from sglab.metrics.builtin import is_good, tpot_ms
from sglab.schema.result import LevelResult, RequestSample, RoundSample, RunResult, Target, ArmInfo

SLO = metrics.SloTargets(ttft_ms=200.0, tpot_ms=20.0)


def _req(arm: str, ttft: float, e2e: float, tokens: int, *, round_index: int = 0, error: str | None = None,
         start: float = 0.0) -> RequestSample:
    return RequestSample(arm=arm, level=1, round_index=round_index, start_s=start, output_tokens=tokens,
                         ttft_ms=ttft, e2e_ms=e2e, error=error)


# Round 0 of 10 s, no time window. By hand, with TTFT <= 200 ms and TPOT <= 20 ms:
#   a: ttft 100, tpot (1100-100)/50 = 20.0 -> good, 51 tokens
#   b: ttft 250 -> bad (TTFT)
#   c: ttft 150, tpot (3150-150)/100 = 30.0 -> bad (TPOT)
#   d: failed -> bad
#   e: ttft 50, tpot (450-50)/40 = 10.0 -> good, 41 tokens
# goodput = (51 + 41) / 10 = 9.2 tok/s; 2 good requests / 10 s = 0.2 req/s.
FIXTURE = [_req("baseline", 100, 1100, 51), _req("baseline", 250, 1250, 51), _req("baseline", 150, 3150, 101),
           _req("baseline", 100, 500, 0, error="HTTP 500"), _req("baseline", 50, 450, 41)]


def _level(requests: list[RequestSample], *, window_s: float | None = None) -> LevelResult:
    rounds = sorted({(r.arm, r.round_index) for r in requests})
    return LevelResult(concurrency=1, requests=requests, rounds=[
        RoundSample(level=1, round_index=i, position=0, arm=arm, started_at_s=0.0, duration_s=10.0,
                    requests=0, errors=0, output_tokens=0, window_s=window_s) for arm, i in rounds])


def test_good_requests_and_tpot_by_hand() -> None:
    assert tpot_ms(FIXTURE[0]) == pytest.approx(20.0)
    assert [is_good(r, SLO) for r in FIXTURE] == [True, False, False, False, True]


def test_goodput_matches_the_hand_computation() -> None:
    level = _level(FIXTURE)
    assert per_round(level, "goodput_tok_per_s", SLO)[0]["baseline"] == pytest.approx(9.2)
    assert per_round(level, "goodput_req_per_s", SLO)[0]["baseline"] == pytest.approx(0.2)


def test_without_an_slo_there_is_no_goodput_and_no_column() -> None:
    assert per_round(_level(FIXTURE), "goodput_tok_per_s", None) == {}


def test_itl_quantile_bound() -> None:
    spiky = RequestSample(arm="b", level=1, round_index=0, start_s=0, output_tokens=5, ttft_ms=10, e2e_ms=50,
                          itl_ms=[5, 5, 5, 25])
    assert is_good(spiky, metrics.SloTargets(tpot_ms=20.0))  # mean TPOT 10 ms
    assert not is_good(spiky, metrics.SloTargets(itl_ms=20.0, itl_quantile=0.99))


def test_goodput_can_gate_and_a_candidate_missing_the_slo_is_rejected() -> None:
    """Candidate decodes faster but its TTFT breaks the SLO in every round: goodput rejects it. (8 rounds: the
    default sequence has no bounds at 4; that 4 identical rounds once gave a point interval was a defect.)"""
    requests = []
    for i in range(8):
        for k in range(30):
            requests.append(_req("baseline", 100, 1100, 51, round_index=i, start=k * 0.3))
            requests.append(_req("candidate", 300, 800, 51, round_index=i, start=k * 0.3))
    result = RunResult(run_id="r", stack="s", started_at="2026-01-01T00:00:00Z", complete=True,
                       finished_at="2026-01-01T00:01:00Z", target=Target(kind="sim"),
                       arms=[ArmInfo(name="baseline", role="baseline", speculative=False, config_hash="a",
                                     launch_command="x", live_flags_checked=True),
                             ArmInfo(name="candidate", role="candidate", speculative=True, config_hash="b",
                                     launch_command="x --speculative-algorithm EAGLE3", live_flags_checked=True)],
                       config_hash={"baseline": "a", "candidate": "b"}, levels=[_level(requests)])
    policy = PromotionPolicy(metric="goodput_tok_per_s", slo=Slo(ttft_ms=200, tpot_ms=50), ttft_p99_max_increase=None)
    v = judge(result, policy)
    gain = v.level(1).gain("goodput_tok_per_s")
    assert gain.rounds == 8 and gain.estimate == pytest.approx(0.5 / (30 * 51) - 1, rel=1e-6)
    assert v.level(1).outcome == "lose" and v.statistical_outcome == "reject"


def test_the_sequential_stop_computes_a_goodput_gate_under_its_slo() -> None:
    """The bench's sequential stop called paired() without the SLO, so a goodput gate metric had no rounds: no
    early stop, 'no paired round'. Its log-ratios now come under the policy's SLO."""
    from sglab.analysis.sequential import sequential_test
    from sglab.analysis.stops import level_log_ratios

    requests = []
    for i in range(12):
        for k in range(10):
            requests.append(_req("baseline", 100, 1100, 51, round_index=i, start=k * 0.3))
            requests.append(_req("candidate", 300 if k % 2 else 100, 800, 51, round_index=i, start=k * 0.3))
    level = _level(requests)
    policy = PromotionPolicy(metric="goodput_tok_per_s", slo=Slo(ttft_ms=200, tpot_ms=50))
    ratios = level_log_ratios(level, policy.metric, policy)
    assert len(ratios) == 12
    assert sequential_test(ratios, min_gain=policy.min_gain, max_rounds=32).decision == "reject"
