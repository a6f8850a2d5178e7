"""An interactive run's samples -> pseudo-rounds, the result document and the tab's rows (no processes)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sglab.analysis.verdict import judge
from sglab.schema.result import ArmInfo, RequestSample
from sglab.results.store import create_run_dir, load_result, write_result
from sglab.ui.live import LiveRun, token_times_s, tokens_between
from sglab.ui.views import table_rows

TOKENS = 10


def _run(window_s: float = 1.0, warmup: int = 1) -> LiveRun:
    arms = [ArmInfo(name="baseline", role="baseline", speculative=False, config_hash="b", launch_command="b"),
            ArmInfo(name="candidate", role="candidate", speculative=True, config_hash="c", launch_command="c")]
    return LiveRun(run_id="20260101T000000Z-abcdef", stack="eagle-nccl-ll", arms=arms,
                   started_at="2026-01-01T00:00:00+00:00", started_monotonic_s=100.0, window_s=window_s,
                   warmup_requests=warmup, policy={"min_rounds": 3, "min_requests": 5})


def _sample(arm: str, gap_ms: float, ttft_ms: float = 50.0) -> RequestSample:
    e2e = ttft_ms + gap_ms * (TOKENS - 1)
    return RequestSample(arm=arm, level=0, round_index=0, start_s=0.0, output_tokens=TOKENS,
                         expected_output_tokens=TOKENS, ttft_ms=ttft_ms, e2e_ms=e2e, itl_ms=[gap_ms] * (TOKENS - 1),
                         decode_tok_per_s=1000.0 / gap_ms, accept_length=2.0 if arm == "candidate" else None)


def _feed(run: LiveRun, until_s: float, *, level: int = 1) -> None:
    """Closed-loop users, one per arm: each request starts when the previous one ended."""
    for arm, gap in (("baseline", 20.0), ("candidate", 18.0)):
        t = 0.0
        i = 0
        while True:
            i += 1
            sample = _sample(arm, gap * (1 + 0.01 * (i % 3 - 1)))  # a little spread, as real streams have
            end = t + sample.e2e_ms / 1000.0
            if end > until_s:
                break
            run.add(sample, level=level, received_monotonic_s=100.0 + end)
            t = end


def test_samples_are_retimed_windowed_and_warmup_marked():
    run = _run()
    _feed(run, 5.0)
    samples = run.snapshot()
    for arm in ("baseline", "candidate"):
        mine = [s for s in samples if s.arm == arm]
        assert mine[0].warmup and mine[0].round_index == -1
        assert not any(s.warmup for s in mine[1:])
        for s in mine[1:]:
            assert s.round_index == int((s.start_s + s.e2e_ms / 1000) // 1.0)
        assert mine[0].start_s == pytest.approx(0.0, abs=1e-6)
        assert all(s.level == 1 for s in mine)


def test_result_counts_only_closed_windows_after_warmup():
    run = _run()
    _feed(run, 5.0)
    running = run.to_result(now_s=105.5)
    assert running.kind == "interactive" and not running.complete
    assert "running" in running.incomplete_reason
    level = running.level(1)
    windows = sorted({r.round_index for r in level.rounds})
    # warm-up requests end ~0.2 s in, so window 0 is no round; windows 1-4 closed at 5.5 s
    assert windows == [1, 2, 3, 4]
    assert all(r.round_index in (-1, 1, 2, 3, 4) for r in level.requests)
    assert run.to_result(now_s=105.5, as_if_stopped=True).complete

    run.stop("2026-01-01T00:00:05+00:00", at_monotonic_s=105.2)  # 0.2 s into window 5: too short to count
    stopped = run.to_result()
    assert stopped.complete and stopped.finished_at
    assert sorted({r.round_index for r in stopped.level(1).rounds}) == [1, 2, 3, 4]


def test_window_output_counts_tokens_that_arrived_inside_it():
    sample = _sample("baseline", 20.0).model_copy(update={"start_s": 0.95})
    times = token_times_s(sample)
    assert len(times) == TOKENS and times[0] == pytest.approx(1.0)
    assert tokens_between([sample], 1.0, 1.1) == 5  # 1.00, 1.02, ..., 1.08
    assert tokens_between([sample], 0.0, 1.0) == 0
    assert tokens_between([sample.model_copy(update={"error": "boom"})], 0.0, 9.0) == 0

    run = _run()
    _feed(run, 6.0)
    for r in run.to_result(now_s=106.0).level(1).rounds:
        # closed-loop streaming at 1000/gap tok/s minus the TTFT pauses: never more than the stream rate
        rate = 1000.0 / (20.0 if r.arm == "baseline" else 18.0)
        assert 0.6 * rate < r.output_tok_per_s <= rate * 1.01


def test_result_round_trips_through_the_store_and_is_judged(tmp_path):
    run = _run()
    _feed(run, 8.0)
    run.stop("2026-01-01T00:00:08+00:00", at_monotonic_s=108.0)
    result = run.to_result()
    path = write_result(result, create_run_dir(result.stack, result.run_id, tmp_path))
    loaded = load_result(path)
    assert loaded == result
    verdict = judge(loaded)
    level = verdict.level(1)
    assert level.decode.rounds == 7  # windows 1..7
    assert level.decode.estimate == pytest.approx(20.0 / 18.0 - 1, rel=0.05)
    assert loaded.level(1).arms["candidate"].accept_length.client_mean == pytest.approx(2.0)
    assert loaded.level(1).arms["baseline"].accept_length is None


def test_user_count_change_starts_a_new_level():
    run = _run()
    _feed(run, 3.0, level=1)
    _feed(run, 3.0, level=4)
    assert [lv.concurrency for lv in run.to_result(now_s=103.0).levels] == [1, 4]


def test_table_rows_show_accept_length_for_the_candidate_only():
    run = _run()
    run.server_accept_length["candidate"] = 2.1
    _feed(run, 6.0)
    result = run.to_result(now_s=106.0, as_if_stopped=True)
    rows = {r["arm"]: r for r in table_rows(run, result, judge(result))}
    assert set(rows) == {"baseline", "candidate", "candidate vs baseline"}
    assert rows["baseline"]["accept_client"] is None and rows["baseline"]["accept_server"] is None
    assert rows["candidate"]["accept_client"] == 2.0 and rows["candidate"]["accept_server"] == 2.1
    assert rows["baseline"]["decode_tok_s"] == pytest.approx(50.0, rel=0.01)
    assert rows["candidate"]["decode_tok_s"] == pytest.approx(1000 / 18, rel=0.01)
    gain = rows["candidate vs baseline"]
    assert float(gain["decode_tok_s"].split("%")[0]) == pytest.approx(11.1, abs=0.3) and "[" in gain["decode_tok_s"]
    assert gain["verdict"].split(":")[0] in ("promote", "reject", "inconclusive")
    assert gain["verdict"].endswith("(5 pseudo-rounds)")


def test_table_columns_and_gains_come_from_the_metric_registry():
    """A metric declared once in the registry gets a column, a value per arm and a gain, with no UI edit."""
    from sglab import metrics
    from sglab.ui.views import table_columns

    fake = metrics.Metric(name="fake_tokens_per_request", unit="tok", label="fake tokens", direction="higher",
                          per_request=lambda s: float(s.output_tokens) * (2.0 if s.arm == "candidate" else 1.0),
                          can_gate=False)
    with metrics.registered(fake):
        columns = dict(table_columns())
        assert columns["fake_tokens_per_request"] == "Fake tokens (tok)"
        assert columns["decode_tok_s"] == "Decode tok/s (mean)"  # built-ins keep their keys and titles
        run = _run()
        _feed(run, 6.0)
        for s in run.samples:  # the collector fills registry values at record time
            metrics.fill_request_metrics(s)
        result = run.to_result(now_s=106.0, as_if_stopped=True)
        rows = {r["arm"]: r for r in table_rows(run, result, judge(result))}
    assert rows["baseline"]["fake_tokens_per_request"] == pytest.approx(TOKENS)
    assert rows["candidate"]["fake_tokens_per_request"] == pytest.approx(2 * TOKENS)
    assert rows["candidate vs baseline"]["fake_tokens_per_request"].startswith("+100.0%")


def test_gain_series_is_the_confidence_sequence_after_each_window():
    from sglab.analysis.sequential import bounds
    from sglab.ui.views import gain_series

    run = _run(window_s=0.5)
    _feed(run, 8.0)
    result = run.to_result(now_s=108.0, as_if_stopped=True)
    series = gain_series(result)
    assert series["metric"] == "decode_tok_per_s" and series["confidence"] == 0.95
    (level,) = series["levels"]
    points = level["points"]
    assert [p["rounds"] for p in points] == list(range(1, len(points) + 1)) and len(points) >= 10
    assert points[0]["low"] is None and points[0]["high"] is None  # unbounded at first
    assert points[-1]["low"] is not None and points[-1]["low"] < points[-1]["gain"] < points[-1]["high"]
    assert points[-1]["gain"] == pytest.approx(20.0 / 18.0 - 1, rel=0.05)
    # the band is the verdict's sequence (sequential.bounds) over the paired per-window log-ratios, nothing else
    by_round = {}
    for r in result.level(1).rounds:
        by_round.setdefault(r.round_index, {})[r.arm] = r.decode_tok_per_s_mean
    logs = [math.log(v["candidate"] / v["baseline"]) for _, v in sorted(by_round.items()) if len(v) == 2]
    _, lower, _ = bounds(np.asarray(logs))
    assert points[-1]["low"] == pytest.approx(math.expm1(lower[-1]), rel=1e-6)
    assert gain_series(None)["levels"] == []


def test_slo_metrics_stay_out_of_the_live_table():
    """A live window has no SLO to judge goodput by; the verdict computes it after the run."""
    from sglab import metrics
    from sglab.ui.views import table_columns

    keys = {key for key, _ in table_columns()}
    slo_based = [m.name for m in metrics.all_metrics() if m.uses_slo]
    assert slo_based and not keys & set(slo_based)


def _feed_categories(run: LiveRun, until_s: float) -> None:
    """Closed-loop users alternating two categories: the candidate is faster on code, slower on chat."""
    gaps = {("baseline", "code"): 20.0, ("baseline", "chat"): 20.0,
            ("candidate", "code"): 15.0, ("candidate", "chat"): 22.0}
    accepts = {"code": 3.0, "chat": 1.5}
    for arm in ("baseline", "candidate"):
        t, i = 0.0, 0
        while True:
            category = ("code", "chat")[i % 2]
            i += 1
            sample = _sample(arm, gaps[(arm, category)]).model_copy(update={
                "category": category, "accept_length": accepts[category] if arm == "candidate" else None})
            end = t + sample.e2e_ms / 1000.0
            if end > until_s:
                break
            run.add(sample, level=1, received_monotonic_s=100.0 + end)
            t = end


def test_category_table_breaks_gain_and_accept_length_down_by_category():
    from sglab.ui.views import category_columns, category_rows

    run = _run()
    _feed_categories(run, 8.0)
    result = run.to_result(now_s=108.0, as_if_stopped=True)
    verdict = judge(result)
    rows = {r["category"]: r for r in category_rows(verdict)}
    assert set(rows) == {"chat", "code"}
    assert set(rows["code"]) == {key for key, _ in category_columns()}
    code, chat = rows["code"], rows["chat"]
    assert float(code["gain"].split("%")[0]) == pytest.approx((20 / 15 - 1) * 100, abs=1.0)
    assert float(chat["gain"].split("%")[0]) == pytest.approx((20 / 22 - 1) * 100, abs=1.0)
    assert "[" in code["gain"] and code["metric"] == "decode_tok_per_s" and code["rounds"] >= 5
    assert code["accept_length"].startswith("3.00") and chat["accept_length"].startswith("1.50")
    # the request counts are the verdict's per-category counts of measured requests
    measured = [s for s in result.level(1).requests if not s.warmup and s.round_index >= 0]
    for category, row in rows.items():
        counts = [sum(1 for s in measured if s.arm == arm and s.category == category)
                  for arm in ("baseline", "candidate")]
        assert row["requests"] == f"{counts[0]} / {counts[1]}" and min(counts) > 0


def test_category_table_is_empty_without_categories_or_verdict():
    from sglab.ui.views import category_rows

    run = _run()
    _feed(run, 6.0)
    result = run.to_result(now_s=106.0, as_if_stopped=True)
    assert category_rows(judge(result)) == []
    assert category_rows(None) == []


def test_category_rows_label_levels_when_there_are_several():
    from sglab.ui.views import category_rows

    run = _run()
    _feed_categories(run, 4.0)
    for s in run.snapshot():  # a second user count: the same requests again at c=4
        run.samples.append(s.model_copy(update={"level": 4}))
    verdict = judge(run.to_result(now_s=104.0, as_if_stopped=True))
    labels = [r["category"] for r in category_rows(verdict)]
    assert labels == ["chat (c=1)", "code (c=1)", "chat (c=4)", "code (c=4)"]


def test_category_gain_without_an_interval_says_why():
    from sglab.schema.verdict import Gain
    from sglab.ui.views import _gain_text

    assert _gain_text(Gain(metric="decode_tok_per_s", rounds=1, estimate=0.1)).startswith("+10.0% (an interval needs")
    assert _gain_text(Gain(metric="decode_tok_per_s", rounds=0)).startswith("waiting")
