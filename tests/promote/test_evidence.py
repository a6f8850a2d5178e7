"""Promotion only on evidence that is what it claims: recomputed confounds, a verified
result checked against its own plan, the recorded policy not weakened, the live-flag check done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglab.cli import main
from sglab.promotion.promote import PromotionRefused, promote
from sglab.results import integrity
from sglab.schema.result import RunResult
from sglab.results.store import load_result, write_json_atomic

from .test_promote import bench, root  # noqa: F401  (the fixture)

STACK = "eagle-nccl-ll"
PRODUCTION = "Pulumi.production.yaml"


def edit(run_dir: Path, change, *, reseal: bool = False) -> None:
    """Edit result.json in place; `reseal` recomputes a plain digest as an attacker without the key can."""
    path = run_dir / "result.json"
    data = json.loads(path.read_text())
    change(data)
    if reseal:
        data = integrity.seal(RunResult.model_validate(data), key=None).model_dump(mode="json")
    write_json_atomic(path, data, overwrite=True)


def refused(root: Path, stack: str = STACK, **kw) -> PromotionRefused:  # noqa: F811
    before = (root / "stacks" / PRODUCTION).read_bytes()
    with pytest.raises(PromotionRefused) as info:
        promote(stack, root=root, **kw)
    assert (root / "stacks" / PRODUCTION).read_bytes() == before
    assert not (root / "stacks" / "promotions.jsonl").exists()
    assert info.value.fix
    return info.value


def test_a_clean_run_promotes_and_its_integrity_record_is_logged(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, STACK)
    record = load_result(run_dir).integrity
    assert record is not None and record.algorithm == "hmac-sha256"
    done = promote(STACK, root=root)
    entry = json.loads(done.log_path.read_text().splitlines()[0])
    assert entry["integrity"]["digest"] == record.digest and entry["integrity"]["key_id"] == record.key_id


def test_an_emptied_confound_list_in_an_article_replay_result_does_not_promote(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, "article-replay")
    edit(run_dir, lambda d: d.update(confounds=[]), reseal=True)
    assert load_result(run_dir).confounds == []
    why = refused(root, "article-replay").why
    assert "beyond speculation" in why and "NCCL_PROTO" in why


def test_a_list_valued_extra_arg_is_a_confound(root: Path) -> None:  # noqa: F811
    stack_file = root / "stacks" / f"Pulumi.{STACK}.yaml"
    text = stack_file.read_text()
    assert "  sglab:candidate:\n" in text and "extra-args" not in text
    stack_file.write_text(text.replace("max-running-requests: 48", "max-running-requests: 48\n    extra-args: "
                                       "[--cuda-graph-bs-decode, '1']", 1).replace(
        "  sglab:candidate:\n", "  sglab:candidate:\n    confounds:\n      server:\n        extra-args: "
        "[--cuda-graph-bs-decode, '1', '2', '4', '8']\n", 1))
    run_dir = bench(root, STACK)
    edit(run_dir, lambda d: d.update(confounds=[]), reseal=True)
    why = refused(root).why
    assert "--cuda-graph-bs-decode" in why


def test_an_edited_launch_command_is_refused(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, "article-replay")

    def hide(d):
        d["confounds"] = []
        d["arms"][1]["launch_command"] = d["arms"][1]["launch_command"].replace(
            "NCCL_ALGO=Ring NCCL_P2P_LEVEL=SYS NCCL_PROTO=LL ", "")
    edit(run_dir, hide, reseal=True)
    why = refused(root, "article-replay").why
    assert "launch command" in why or "beyond speculation" in why


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(integrity=None), "no integrity record"),
    (lambda d: d["levels"][0]["rounds"][0].update(decode_tok_per_s_mean=1e6), "changed after the run"),
])
def test_missing_or_broken_integrity_is_refused(root: Path, change, words: str) -> None:  # noqa: F811
    run_dir = bench(root, STACK)
    edit(run_dir, change)
    found = refused(root)
    assert words in found.why
    assert "re-run" in found.fix and f"sglab bench --stack {STACK}" in found.fix


def test_a_result_without_request_samples_is_refused(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, STACK)
    edit(run_dir, lambda d: [lv.update(requests=[]) for lv in d["levels"]], reseal=True)
    assert "request samples" in refused(root).why


def test_interrupted_run_flipped_to_complete_is_refused(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, STACK, complete=False)

    def flip(d):
        d["levels"] = d["levels"][:1]
        d["complete"], d["incomplete_reason"], d["finished_at"] = True, None, "2026-01-01T00:00:18+00:00"
    edit(run_dir, flip, reseal=True)
    assert "level 4" in refused(root).why


def test_a_weakened_policy_is_refused_naming_the_key(root: Path) -> None:  # noqa: F811
    bench(root, STACK, gain=0.002)  # inconclusive under the recorded policy (min-gain 0.5%)
    with pytest.raises(PromotionRefused):
        promote(STACK, root=root, dry_run=True)
    stack_file = root / "stacks" / f"Pulumi.{STACK}.yaml"
    original = stack_file.read_text()
    for block, key in (("  sglab:policy:\n    min-gain: 0.0\n", "policy.min-gain"),
                       ("  sglab:policy:\n    error-cap: 1.0\n", "policy.error-cap"),
                       ("  sglab:policy:\n    ttft-p99-max-increase: null\n", "policy.ttft-p99-max-increase")):
        stack_file.write_text(original + block)
        found = refused(root)
        assert key in found.why and "weaker" in found.why
        assert key.removeprefix("policy.") in found.fix and "re-run" in found.fix


def test_the_recorded_policy_judges_not_the_stacks(root: Path) -> None:  # noqa: F811
    """A run recorded under a lax policy is not promoted by a stricter stack policy either: both must pass."""
    bench(root, STACK, gain=0.02, policy={"min_gain": 0.005, "levels": [1]})
    stack_file = root / "stacks" / f"Pulumi.{STACK}.yaml"
    stack_file.write_text(stack_file.read_text() + "  sglab:policy:\n    min-gain: 0.2\n")
    found = refused(root)
    assert "stack's policy" in found.why


def test_a_run_without_a_recorded_policy_is_refused(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, STACK)
    edit(run_dir, lambda d: d.update(policy=None), reseal=True)
    assert "policy" in refused(root).why


def test_a_skipped_live_flag_check_is_refused(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, STACK)
    edit(run_dir, lambda d: d["arms"][1].update(live_flags_checked=False), reseal=True)
    assert "live" in refused(root).why


def test_an_interactive_run_with_urls_from_the_form_is_refused(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, STACK)
    edit(run_dir, lambda d: d.update(kind="interactive", target={"kind": "urls", "urls": {
        "baseline": "http://127.0.0.1:1", "candidate": "http://127.0.0.1:2"}, "urls_source": "form"}), reseal=True)
    assert "form" in refused(root).why


def test_compare_recomputes_confounds_and_reports_integrity(root: Path, capsys) -> None:  # noqa: F811
    run_dir = bench(root, "article-replay")
    edit(run_dir, lambda d: d.update(confounds=[]), reseal=True)
    assert main(["compare", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "NCCL_PROTO" in out and "verdict: inconclusive" in out
