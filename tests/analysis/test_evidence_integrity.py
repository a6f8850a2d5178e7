"""Evidence is recomputed and checked against the result's own plan, never trusted.

Each tampering below is tried twice: as is (the digest catches it) and with the integrity record
recomputed as a plain digest afterwards (an attacker who can write the file can do that), where only
the plan-consistency checks stand between the edit and a promotion.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.analysis.checks import evidence_problems, launch_confounds
from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.results import integrity
from sglab.schema.result import RunResult
from sglab.results.store import create_run_dir, load_result, write_result

DATA = Path(__file__).parents[1] / "data" / "results"
QUIET = dict(round_cv=0.005, shared_cv=0.005, request_cv=0.01)
POLICY = {"min_gain": 0.005, "metric": "decode_tok_per_s", "levels": [1], "ttft_p99_max_increase": 0.5,
          "itl_p99_max_increase": None, "error_cap": 0.01, "min_rounds": 3, "min_requests": 20,
          "confidence": 0.95, "method": "paired-t"}
BASE_CMD = "python3 -m sglang.launch_server --model-path /m --host 0.0.0.0 --port 30000 --tp-size 8"
SPEC = " --speculative-algorithm EAGLE3 --speculative-num-steps 2"


@pytest.fixture(autouse=True)
def _machine_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(integrity.KEY_ENV, "test-machine-key")


def run_like(*, gain=0.06, levels=(1, 4), rounds=6, **kw) -> RunResult:
    """A result shaped like the bench runner's: request samples, the plan, the policy, the schedule."""
    result = synthetic_result(stack="s", gain=gain, levels=levels, rounds=rounds, **{"policy": POLICY, **QUIET, **kw})
    result.arms[0].launch_command = BASE_CMD
    result.arms[1].launch_command = BASE_CMD + SPEC
    result.integrity = integrity.planned({level: rounds for level in levels})
    return result


def saved(result: RunResult, tmp_path: Path) -> RunResult:
    return load_result(write_result(result, create_run_dir(result.stack, result.run_id, tmp_path / "results")))


def reseal_plain(result: RunResult) -> RunResult:
    """What an attacker without the key can do after an edit: recompute a plain SHA-256 record."""
    again = RunResult.model_validate(result.model_dump(mode="json"))
    return integrity.seal(again, key=None)


def names(result: RunResult) -> list[str]:
    return [b.name for b in judge(result).blockers]


def test_a_sealed_bench_result_verifies_and_promotes(tmp_path: Path) -> None:
    result = saved(run_like(), tmp_path)
    assert result.integrity is not None and result.integrity.algorithm == "hmac-sha256"
    assert result.integrity.schedule == {1: 6, 4: 6}
    assert integrity.verify(result) is None and evidence_problems(result) == []
    assert judge(result).outcome == "promote"


def test_an_edit_breaks_the_seal(tmp_path: Path) -> None:
    result = saved(run_like(), tmp_path)
    result.levels[0].rounds[0].decode_tok_per_s_mean = 1e9
    assert "changed after the run" in integrity.verify(result)
    wrong_key = saved(run_like(), tmp_path / "other")
    assert "key this machine does not hold" in integrity.verify(wrong_key, key=b"another machine")


def test_complete_flipped_on_an_interrupted_run_is_caught(tmp_path: Path) -> None:
    # Interrupted in level 1's 5th round: level 4 never ran, level 1 has 4 of 6 rounds.
    result = saved(run_like(levels=(1, 4), complete=False), tmp_path)
    result.levels = [result.levels[0]]
    lv = result.levels[0]
    lv.rounds = [r for r in lv.rounds if r.round_index < 4]
    lv.requests = [s for s in lv.requests if s.round_index < 4]
    result.complete, result.incomplete_reason = True, None
    for forged in (result, reseal_plain(result)):
        problems = evidence_problems(forged)
        text = " ".join(p.detail for p in problems)
        assert "level 4" in text and "round 5" in text, text
        assert all(p.fix for p in problems)
        assert judge(forged).outcome != "promote"


def test_a_segment_cut_short_cannot_be_called_complete(tmp_path: Path) -> None:
    result = saved(run_like(), tmp_path)
    result.levels[0].rounds[-1].complete = False
    assert "cut short" in " ".join(p.detail for p in evidence_problems(reseal_plain(result)))


def test_deleting_a_losing_level_is_caught(tmp_path: Path) -> None:
    result = saved(run_like(gain={1: 0.08, 4: -0.06}, levels=(1, 4), policy={**POLICY, "levels": [1, 4]}), tmp_path)
    assert judge(result).outcome == "reject"
    result.levels = [lv for lv in result.levels if lv.concurrency != 4]
    forged = reseal_plain(result)
    assert any("level 4" in p.detail for p in evidence_problems(forged))
    assert judge(forged).outcome != "promote"


def test_deleting_error_samples_is_caught(tmp_path: Path) -> None:
    result = saved(run_like(error_rate={"candidate": 0.08}), tmp_path)
    assert judge(result).outcome == "reject"
    for lv in result.levels:
        lv.requests = [s for s in lv.requests if s.error is None]
    forged = reseal_plain(result)
    problems = evidence_problems(forged)
    assert problems and "error" in problems[0].detail and "level 1" in problems[0].detail
    assert judge(forged).outcome != "promote"
    # ... also when the rounds' counts are edited to match: the level summaries still count the errors
    for lv in forged.levels:
        for r in lv.rounds:
            r.requests, r.errors = r.requests - r.errors, 0
    assert evidence_problems(reseal_plain(forged))


def test_a_round_short_of_its_request_quota_is_caught(tmp_path: Path) -> None:
    result = saved(run_like(), tmp_path)
    result.load_plan = result.load_plan.model_copy(update={"round_requests": 10 ** 6})
    text = " ".join(p.detail for p in evidence_problems(reseal_plain(result)))
    assert "round-requests" in text


def test_schedule_must_agree_with_the_recorded_plan(tmp_path: Path) -> None:
    result = saved(run_like(levels=(1, 4)), tmp_path)
    result.levels = [result.levels[0]]
    result.integrity.schedule = {1: 6}  # also edit the schedule: the plan still names level 4
    assert any("load plan" in p.detail for p in evidence_problems(reseal_plain(result)))


# ---- confounds: recomputed from the recorded launch commands -------------------------------------

def _with_commands(base: str, cand: str) -> RunResult:
    result = run_like()
    result.arms[0].launch_command, result.arms[1].launch_command = base, cand
    return result


def test_an_emptied_confound_list_does_not_hide_the_article_replays_nccl_env() -> None:
    data = json.loads((DATA / "v1-article-replay.json").read_text())
    data["confounds"] = []
    result = RunResult.model_validate(data)
    keys = [c.key for c in launch_confounds(result)]
    assert keys == ["env NCCL_ALGO", "env NCCL_P2P_LEVEL", "env NCCL_PROTO"]
    assert "confounds" in names(result)


def test_every_value_of_a_list_valued_flag_is_compared() -> None:
    result = _with_commands(BASE_CMD + " --cuda-graph-bs-decode 1", BASE_CMD + " --cuda-graph-bs-decode 1 2 4 8" + SPEC)
    found = launch_confounds(result)
    assert [(c.key, c.baseline, c.candidate) for c in found] == [("server --cuda-graph-bs-decode", "1", "1 2 4 8")]
    assert "confounds" in names(result)


def test_aliases_and_prefix_abbreviations_are_the_same_flag() -> None:
    same = _with_commands(BASE_CMD + " --max-running-requests 64", BASE_CMD.replace("--tp-size", "--tp")
                          + " --max-running-req 64" + SPEC)
    assert launch_confounds(same) == []
    differ = _with_commands(BASE_CMD + " --max-running-requests 48", BASE_CMD + " --max-running-req 64" + SPEC)
    assert [c.key for c in launch_confounds(differ)] == ["server --max-running-requests"]


def test_env_differs_and_host_port_do_not_count() -> None:
    result = _with_commands("A=1 " + BASE_CMD, "A=2 " + BASE_CMD.replace("30000", "30001") + SPEC)
    assert [c.key for c in launch_confounds(result)] == ["env A"]


def test_an_unreadable_launch_command_is_a_blocker() -> None:
    result = _with_commands(BASE_CMD, BASE_CMD + " --max-" + SPEC)  # ambiguous prefix: SGLang refuses it
    assert "confounds" in names(result)


# ---- live-flag check --------------------------------------------------------------------------------

def test_a_skipped_live_flag_check_is_a_blocker(tmp_path: Path) -> None:
    result = run_like()
    result.arms[1].live_flags_checked = False
    blockers = judge(result).blockers
    found = [b for b in blockers if b.name == "live-flags"]
    assert found and "candidate" in found[0].detail and "not checked" in found[0].detail
    assert judge(result).outcome != "promote"


# ---- old files ----------------------------------------------------------------------------------------

def test_compare_still_reads_an_old_result_and_says_it_has_no_integrity_record() -> None:
    out = subprocess.run([sys.executable, "-m", "sglab.cli", "compare", str(DATA / "v1-article-replay.json")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "no integrity record" in out.stdout + out.stderr
    assert "verdict:" in out.stdout


def test_an_interactive_run_is_not_held_to_the_stacks_round_quota() -> None:
    """Pseudo-rounds of the web UI have no planned levels, rounds or quotas, only consistent counts."""
    result = run_like()
    result.kind = "interactive"
    result.integrity = None
    result.load_plan = result.load_plan.model_copy(update={"round_requests": 10 ** 6, "interactive": True,
                                                           "rounds": 50})
    assert evidence_problems(result) == []
    result.levels[0].requests = result.levels[0].requests[1:]
    assert [p.name for p in evidence_problems(result)] == ["evidence-counts"]


def test_a_seal_survives_a_newer_sglab_that_adds_a_field(tmp_path: Path) -> None:
    """A result written before a schema gained an optional field must still verify: the seal covers the
    document as stored, not what today's model would dump (which adds the new field's default)."""
    path = write_result(run_like(), create_run_dir("s", "r-old", tmp_path / "results"))
    document = json.loads(path.read_text())
    dropped = 0
    for sample in (s for level in document["levels"] for s in level["requests"]):
        dropped += "category" in sample
        sample.pop("category", None)  # as an older sglab wrote it, before RequestSample.category existed
    assert dropped
    key = integrity.machine_key()
    document["integrity"] = {**document["integrity"], "digest": integrity._digest(document, key)}
    path.write_text(json.dumps(document))
    older = load_result(path)
    assert integrity.verify(older) is None
    older.complete = not older.complete  # and an edit after loading is still caught
    assert integrity.verify(older) is not None
