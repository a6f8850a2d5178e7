"""The rest of a rate or trace run's words: plots, the crossover note, guard and blocker details, the not-gated
sentence, `sglab results`, a sweep's ranking and the bench help name the levels as the run measured them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.analysis.checks import blockers, guards
from sglab.analysis.operating_point import crossover
from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.cli import build_parser
from sglab.cli.results import rows
from sglab.config.policy import PromotionPolicy
from sglab.report import plots
from sglab.schema.result import RunResult
from sglab.results.store import write_result
from sglab.sweep.outputs import ranking_table
from sglab.sweep.run import SweepState


def profiled(profile: str, levels=(1, 4, 16), **kw) -> RunResult:
    result = synthetic_result(levels=levels, gain={1: 0.06, 4: 0.02, 16: -0.05}, **kw)
    data = result.model_dump(mode="json", by_alias=False)
    data["load_plan"] = {**data["load_plan"], "profile": profile}
    return RunResult.model_validate(data)


# ---- plots -------------------------------------------------------------------------------------------

def figure_words(monkeypatch: pytest.MonkeyPatch, result: RunResult, tmp_path: Path) -> list[str]:
    """Every axis label and title of the run's plots."""
    words: list[str] = []

    def keep(fig, path):
        for ax in fig.axes:
            words.extend([ax.get_xlabel(), ax.get_title()])
            words.extend(t.get_text() for t in (ax.get_legend().get_texts() if ax.get_legend() else []))
        plots.plt.close(fig)
        return path

    monkeypatch.setattr(plots, "save_figure", keep)
    verdict = judge(result)
    assert plots.metric_plot(result, verdict, tmp_path / "m.png") is not None
    assert plots.latency_plot(result, verdict, tmp_path / "l.png") is not None
    assert plots.accept_plot(result, verdict, tmp_path / "a.png") is not None
    return [w for w in words if w]


def test_a_rate_runs_plots_say_req_per_s(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    words = figure_words(monkeypatch, profiled("rate"), tmp_path)
    assert not [w for w in words if "concurrency" in w], words
    assert "rate (req/s)" in words
    assert "TTFT CDF at 1 req/s" in words and "ITL CDF at 1 req/s" in words
    assert any(w.startswith("accept length at 1 req/s:") for w in words), words
    assert any(w.startswith("crossover ≈") and w.endswith("req/s") for w in words), words


def test_a_trace_runs_plots_name_the_trace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    words = figure_words(monkeypatch, profiled("trace", levels=(1,)), tmp_path)
    assert not [w for w in words if "concurrency" in w], words
    assert "TTFT CDF at the trace replay" in words and "trace replay" in words


def test_a_concurrency_runs_plots_keep_their_words(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    words = figure_words(monkeypatch, profiled("concurrency"), tmp_path)
    assert words.count("concurrency") == 2  # both axes of the metric plot
    assert "TTFT CDF at concurrency 1" in words
    assert any(w.startswith("crossover ≈") and w[-1].isdigit() for w in words), words


# ---- the crossover note ------------------------------------------------------------------------------

def test_the_crossover_note_of_a_rate_run_says_req_per_s() -> None:
    between = crossover({1: 0.06, 4: 0.02, 16: -0.05}, "rate")
    assert between.status == "between" and "concurrency" not in between.note
    assert f"about {between.concurrency:.1f} req/s (between 4 and 16 req/s)" in between.note, between.note
    assert "(16 req/s)" in crossover({1: 0.1, 16: 0.05}, "rate").note
    assert "(1 req/s)" in crossover({1: -0.1, 16: -0.05}, "rate").note


def test_a_trace_has_no_crossover_level() -> None:
    for gains in ({1: 0.05}, {1: -0.05}):
        note = crossover(gains, "trace").note
        assert "concurrency" not in note and "trace replay" in note and "(1)" not in note, note


def test_the_crossover_note_of_a_concurrency_run_is_unchanged() -> None:
    assert crossover({1: 0.1, 4: -0.1}).note == crossover({1: 0.1, 4: -0.1}, "concurrency").note
    assert crossover({1: 0.1, 4: -0.1}).note.startswith("the candidate stops winning at about concurrency 2.0 ")
    assert crossover({1: 0.1, 4: 0.1}).note.endswith("(concurrency 4); crossover is beyond it")


# ---- guard and blocker details -----------------------------------------------------------------------

GUARDED = PromotionPolicy(levels=[1, 4], ttft_p99_max_increase=0.2, itl_p99_max_increase=5.0)


def test_a_rate_runs_guards_say_req_per_s() -> None:
    result = profiled("rate", candidate_ttft_factor=2.0)
    levels = {lv.concurrency: lv for lv in judge(result, GUARDED).levels}
    details = [g.detail for g in guards(levels, GUARDED, "rate")]
    assert not [d for d in details if "concurrency" in d], details
    assert any(d.startswith("ttft-p99 ") and " at 4 req/s " in d for d in details), details
    assert any(d.endswith("at 16 req/s") for d in details), details  # the error-rate guard
    before = [g.detail for g in guards(levels, GUARDED)]
    assert any(" at concurrency 4 " in d for d in before) and before == [g.detail for g in
                                                                          guards(levels, GUARDED, "concurrency")]


def test_a_rate_runs_missing_gating_level_names_its_key() -> None:
    result = profiled("rate")
    policy = PromotionPolicy(levels=[1, 8])
    levels = {lv.concurrency: lv for lv in judge(result, policy).levels}
    missing = [b for b in blockers(result, levels, policy) if b.name == "data@8"]
    assert missing and missing[0].detail == "gating 8 req/s was not measured", missing
    assert "load.rate.levels" in missing[0].fix
    conc = profiled("concurrency")
    missing = [b for b in blockers(conc, levels, policy) if b.name == "data@8"]
    assert missing[0].detail == "gating concurrency 8 was not measured"
    assert missing[0].fix == "add 8 to load.concurrency and re-run"


# ---- the operating point -----------------------------------------------------------------------------

def test_the_not_gated_sentence_of_a_rate_run_says_req_per_s() -> None:
    point = judge(profiled("rate")).operating_point
    assert point.level_label == "rate"  # what level_label(result) gives: the profile's name
    assert point.not_gated_text == ("Only 1 req/s was judged (policy.levels; no sglab:traffic declared): "
                                    "4 and 16 req/s were measured but not gated."), point.not_gated_text
    assert "req/s with this config" in point.loss_text and "concurrent" not in point.loss_text, point.loss_text
    conc = judge(profiled("concurrency")).operating_point
    assert conc.not_gated_text == ("Only concurrency 1 was judged (policy.levels; no sglab:traffic declared): "
                                   "4 and 16 were measured but not gated.")
    assert "concurrent requests with this config" in conc.loss_text


# ---- sglab results -----------------------------------------------------------------------------------

def listed(result: RunResult, tmp_path: Path) -> tuple[str, ...]:
    result.verdict = judge(result)
    write_result(result, tmp_path / result.stack / result.run_id)
    (row,) = rows(result.stack, tmp_path)
    return row


def test_results_lists_a_rate_runs_levels_in_req_per_s(tmp_path: Path) -> None:
    row = listed(profiled("rate"), tmp_path)
    assert row[4] == "1,4,16 req/s" and row[5].startswith("1 req/s +") and "c1" not in row[5], row
    assert ", 16 req/s -" in row[5], row


def test_results_lists_a_trace_run_as_the_trace(tmp_path: Path) -> None:
    row = listed(profiled("trace", levels=(1,)), tmp_path)
    assert row[4] == "trace" and row[5].startswith("trace +"), row


def test_results_lists_a_concurrency_run_as_before(tmp_path: Path) -> None:
    row = listed(profiled("concurrency"), tmp_path)
    assert row[4] == "1,4,16" and row[5].startswith("c1 +") and " c16 -" in row[5], row


# ---- a sweep's ranking -------------------------------------------------------------------------------

def sweep(profile: str | None) -> SweepState:
    record = {"outcome": "winner", "rounds": 5, "arm_confidence": 0.975, "confidence": 0.95, "min_gain": 0.005,
              "arms": [{"rank": 1, "arm": "eagle-s3-d4", "status": "winner", "rounds": 5, "estimate": 0.05,
                        "low": 0.02, "high": 0.08, "eliminated_at": None, "reason": None}]}
    return SweepState(run_id="sweep-1", stack="s", metric="decode_tok_per_s", gated_levels=[4], max_rounds=8,
                      arms=[], baseline_hash="h", records={"4": record},
                      plan={"profile": profile} if profile else {})


def test_a_rate_sweeps_ranking_says_req_per_s() -> None:
    text = ranking_table(sweep("rate"))
    assert "\n4 req/s: winner after 5 rounds" in text and "concurrency" not in text, text
    assert "\nconcurrency 4: winner after 5 rounds" in ranking_table(sweep(None))
    assert "\nconcurrency 4: winner after 5 rounds" in ranking_table(sweep("concurrency"))


# ---- the bench help ----------------------------------------------------------------------------------

def test_one_rounds_option_says_what_it_does_under_sequential_and_fixed_rounds() -> None:
    bench = build_parser("bench")._subparsers._group_actions[0].choices["bench"]
    helps = {a.dest: " ".join(a.help.split()) for a in bench._actions if a.dest in ("rounds", "max_rounds")}
    assert set(helps) == {"rounds"}, helps  # no second option that patches it
    assert "sequential" in helps["rounds"] and "the most each may run" in helps["rounds"], helps
    assert "2 x load.rounds" in helps["rounds"] and "exactly that many" in helps["rounds"], helps


def test_the_judged_verdict_names_rate_levels_in_its_crossover_and_guards() -> None:
    v = judge(profiled("rate"))
    assert "req/s" in v.crossover.note and not [g for g in v.guards if "concurrency" in g.detail]
