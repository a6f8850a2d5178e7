"""Stack outputs are wired from the result the Job left in its ConfigMap (read back under mocks)."""

from __future__ import annotations

import pytest

from sglab.config.loader import load_stack
from sglab.deploy.benchmark_job import PENDING, names, summarize_result
from sglab.results.sink import SUMMARY_KEY, encode_result

from pulumi_harness import UNKNOWN, run_program
from .results_fixtures import judged_result

STACK = "eagle-nccl-ll"


def result_read(result_json: str | None) -> dict:
    stack = load_stack(STACK).config
    n = names(stack, STACK)
    state = {"metadata": {"name": n.result_configmap, "namespace": stack.namespace}}
    if result_json is not None:
        encoded = encode_result(result_json)
        state["binaryData"] = {"result.json.gz": encoded.parts[0]}
        state["data"] = {SUMMARY_KEY: encoded.summary}
    return {f"{stack.namespace}/{n.result_configmap}": state}


def test_outputs_come_from_the_verdict_in_the_result_configmap():
    result = judged_result()
    verdict = result.verdict.model_dump(mode="json")  # as the program reads it
    run = run_program(STACK, reads=result_read(result.model_dump_json()))
    assert run.error is None
    out = run.outputs
    (read,) = run.reads()
    assert read.read_id.endswith("/" + names(load_stack(STACK).config, STACK).result_configmap)
    assert out["benchmark_verdict"] == verdict["outcome"] and out["benchmark_verdict"] in (
        "promote", "reject", "inconclusive")
    assert out["benchmark_sentence"] == verdict["sentence"]
    assert out["benchmark_run_id"] == result.run_id
    assert [lv["concurrency"] for lv in out["benchmark_levels"]] == [lv["concurrency"] for lv in verdict["levels"]]
    for exported, level in zip(out["benchmark_levels"], verdict["levels"]):
        assert (exported["gain"], exported["ci_low"], exported["ci_high"]) == (
            level["decode"]["estimate"], level["decode"]["low"], level["decode"]["high"])
        assert exported["gain"] is not None and exported["ci_low"] < exported["gain"] < exported["ci_high"]
        assert exported["gating"] == level["gating"] and exported["outcome"] == level["outcome"]
    for exported, level in zip(out["benchmark_break_even"], verdict["levels"]):
        econ = level["economics"]
        assert exported["break_even_accept_length"] == econ["break_even_accept_length"] is not None
        assert exported["accept_length"] == econ["accept_length"]
        assert exported["verify_cycle_ms"] == econ["verify_cycle_ms"]
        assert exported["baseline_step_ms"] == econ["baseline_step_ms"]
    assert out["benchmark_result_configmap"] == names(load_stack(STACK).config, STACK).result_configmap
    assert out["benchmark_job"] == names(load_stack(STACK).config, STACK).job


def test_a_losing_candidate_is_exported_as_reject():
    result = judged_result(gain=-0.2)
    run = run_program(STACK, reads=result_read(result.model_dump_json()))
    assert run.outputs["benchmark_verdict"] == result.verdict.outcome == "reject"
    assert all(lv["gain"] < 0 for lv in run.outputs["benchmark_levels"])


@pytest.mark.parametrize("summary, expected", [(None, PENDING), ("{\"not\": \"a result\"}", "invalid"),
                                                ("not json", "invalid")])
def test_outputs_say_pending_or_invalid_instead_of_failing(summary, expected):
    reads = result_read(None)
    if summary is not None:
        (state,) = reads.values()
        state["data"] = {SUMMARY_KEY: summary}
    run = run_program(STACK, reads=reads)
    assert run.error is None
    assert run.outputs["benchmark_verdict"] == expected
    assert run.outputs["benchmark_levels"] == [] and run.outputs["benchmark_break_even"] == []


def test_a_result_without_verdict_is_pending_and_keeps_its_run_id():
    result = judged_result()
    result.verdict = None
    summary = summarize_result(encode_result(result.model_dump_json()).summary)
    assert summary["verdict"] == PENDING and summary["run_id"] == result.run_id


def test_disabled_job_declares_nothing():
    run = run_program(STACK, {"benchmark-job": {"enabled": False}})
    assert run.error is None
    assert not [r for r in run.resources if (r.typ.endswith(":Job") and r.name != "preflight-job") or "rbac" in r.typ]
    assert not [k for k in run.outputs if k.startswith("benchmark_")]


def test_preview_of_a_new_job_does_not_read_a_configmap_that_does_not_exist_yet():
    """The read's id hangs on the Job's status: unknown in a preview that creates the Job, so the engine skips
    the read; once the status is known (after `up`, or an unchanged Job) the real name is read."""
    preview = run_program(STACK, preview=True, outputs={"kubernetes:batch/v1:Job": {"status": UNKNOWN}})
    assert preview.error is None
    (read,) = preview.reads()
    assert read.read_id == UNKNOWN
    assert "benchmark_verdict" not in preview.outputs  # unknown in the preview, never a stale value
    result = judged_result()
    known = run_program(STACK, preview=True, outputs={"kubernetes:batch/v1:Job": {"status": {"succeeded": 1}}},
                        reads=result_read(result.model_dump_json()))
    (read,) = known.reads()
    assert read.read_id.endswith("/" + names(load_stack(STACK).config, STACK).result_configmap)
    assert known.outputs["benchmark_verdict"] == result.verdict.outcome
