"""When decode tok/s and output tok/s disagree at a level (one is shown to lose, the other is not), the console
says so in one sentence; bench and compare print it alike (sglab/report/console.py)."""

from __future__ import annotations

from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.report.console import render_console
from sglab.schema.result import RunResult


def promoting(producer: str = "sglang") -> RunResult:
    return synthetic_result(gain=0.06, producer=producer, round_cv=0.004, shared_cv=0.002, request_cv=0.01,
                            levels=(1, 4))


def _with_level_gains(result: RunResult, concurrency: int, decode: tuple, output: tuple):
    verdict = judge(result)
    for lv in verdict.levels:
        if lv.concurrency == concurrency:
            lv.decode = lv.decode.model_copy(update=dict(zip(("estimate", "low", "high"), decode)))
            lv.output = lv.output.model_copy(update=dict(zip(("estimate", "low", "high"), output)))
    return verdict


def test_console_says_when_decode_and_output_tok_per_s_disagree() -> None:
    result = promoting("sglang")
    verdict = _with_level_gains(result, 4, (-0.03, -0.043, -0.016), (0.004, -0.01, 0.018))
    lines = render_console(result, verdict).splitlines()
    [said] = [line for line in lines if "loses (" in line and "is not shown to" in line]
    assert said.startswith("at concurrency 4 decode tok/s loses (-3.0% [-4.3%, -1.6%]) but output tok/s is not "
                           "shown to (+0.4% [-1.0%, +1.8%])")
    assert said.endswith("the gate judges decode tok/s")
    assert lines.index(said) < lines.index(verdict.sentence)
    flipped = _with_level_gains(result, 4, (0.004, -0.01, 0.018), (-0.03, -0.043, -0.016))
    assert any(line.startswith("at concurrency 4 output tok/s loses") for line in
               render_console(result, flipped).splitlines())
    agreeing = _with_level_gains(result, 4, (-0.03, -0.043, -0.016), (-0.02, -0.03, -0.01))
    assert not any("is not shown to" in line for line in render_console(result, agreeing).splitlines())
