"""Promotion: evidence checks, refusals, comment-preserving atomic writes, the log, and concurrency."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.cli import main
from sglab.config import baseline_arm, candidate_arm, confounds, load_stack
from sglab.core.paths import project_root
from sglab.promotion.promote import PromotionRefused, promote
from sglab.results.integrity import planned
from sglab.results.store import create_run_dir, write_result
from sglab.sglang.sim_knobs import is_sim_env

REPO_STACKS = project_root() / "stacks"
QUIET = dict(round_cv=0.005, shared_cv=0.005, request_cv=0.01)


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    (tmp_path / "stacks").mkdir()
    for name in ("eagle-nccl-ll", "eagle-default", "article-replay", "production"):
        shutil.copy(REPO_STACKS / f"Pulumi.{name}.yaml", tmp_path / "stacks")
    return tmp_path


def bench(root: Path, stack: str, *, gain: float = 0.06, run_id: str = "20260101T000000Z-aaaaaa", edit=None,
          **kw) -> Path:
    """A synthetic result for `stack` whose config hashes match the stack as it is now, measured (as its
    record says) on servers of the stack's backend: real SGLang servers, or simulators for a `sim` stack."""
    config = load_stack(stack, root).config
    arms = {"baseline": baseline_arm(config), "candidate": candidate_arm(config)}
    hashes = {name: arm.config_hash for name, arm in arms.items()}
    kw.setdefault("policy", config.policy.model_dump(mode="json"))
    kw.setdefault("producer", "simulator" if config.backend == "sim" else "sglang")
    # production asks for a crossover (policy.design): 40 rounds in two periods give 20 pairs, its strict
    # checks' floor; the second node 3% faster, which the crossover cancels
    result = synthetic_result(stack=stack, gain=gain, config_hash=hashes, run_id=run_id, levels=(1, 4),
                              **{**QUIET, "rounds": 40, "design": "crossover", "node_effect": 0.03, **kw})
    for info in result.arms:  # as the bench runner records them
        info.launch_command = arms[info.name].launch_command
    if edit is not None:  # before the seal: what the bench itself recorded
        edit(result)
    result.integrity = planned({level.concurrency: result.load_plan.rounds for level in result.levels})
    run_dir = create_run_dir(stack, run_id, root / "results")
    write_result(result, run_dir)
    return run_dir


def point_cli_at(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Point the command line at `root`'s stacks/ and results/ as a user does: through the environment."""
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(root / "stacks"))
    monkeypatch.setenv("SGLAB_RESULTS_DIR", str(root / "results"))


def serving(arm) -> tuple:
    return arm.image, arm.args, {k: v for k, v in arm.env.items() if not is_sim_env(k)}


def comment_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "#" in line]


def test_promotion_writes_the_candidate_and_keeps_everything_else(root: Path) -> None:
    target = root / "stacks" / "Pulumi.production.yaml"
    before = target.read_text()
    run_dir = bench(root, "eagle-nccl-ll")
    done = promote("eagle-nccl-ll", root=root)
    after = target.read_text()
    assert done.written and done.verdict.outcome == "promote" and after != before
    assert comment_lines(after) == comment_lines(before)
    for kept in ("kubernetes:context: prod-h200", "sglab:namespace: sglab-production", "claim-name: kimi-k2-5-weights",
                 "priority-class-name: inference-critical", "levels: [1, 4]", "pool: inference-prod"):
        assert kept in after
    production = load_stack("production", root).config
    source = load_stack("eagle-nccl-ll", root).config
    assert serving(candidate_arm(production)) == serving(candidate_arm(source))
    assert production.nccl.as_env() == source.nccl.as_env()
    assert "NCCL_PROTO: LL" in done.diff and done.next_command == "pulumi up --stack production"
    entries = [json.loads(line) for line in done.log_path.read_text().splitlines()]
    assert len(entries) == 1
    entry = entries[0]
    assert entry["run_id"] == "20260101T000000Z-aaaaaa" and entry["result"] == str(run_dir)
    assert entry["config_hash"]["candidate"] == candidate_arm(source).config_hash
    level1 = next(lv for lv in entry["levels"] if lv["concurrency"] == 1)
    assert level1["decode_ci"][0] >= 0.01 and "git_commit" in entry


def test_confounds_fold_into_the_shared_config(root: Path) -> None:
    # article-replay's NCCL env is a candidate-only confound (never promotable, tests/promote/test_evidence.py);
    # here the shared config holds the same values, so the declared block is no difference and folds away.
    stack_file = root / "stacks" / "Pulumi.article-replay.yaml"
    stack_file.write_text(stack_file.read_text().replace(
        "  sglab:candidate:\n",
        "  sglab:nccl:\n    NCCL_PROTO: LL\n    NCCL_ALGO: Ring\n    NCCL_P2P_LEVEL: SYS\n  sglab:candidate:\n", 1))
    assert confounds(load_stack("article-replay", root).config) == []
    bench(root, "article-replay")
    done = promote("article-replay", root=root, dry_run=True)
    assert "NCCL_PROTO: LL" in done.diff
    assert "confounds" not in done.diff.split("+++", 1)[1].replace("-", "")


def test_dry_run_changes_nothing(root: Path) -> None:
    target = root / "stacks" / "Pulumi.production.yaml"
    bench(root, "eagle-nccl-ll")
    listing = sorted(p.name for p in (root / "stacks").iterdir())
    before = target.read_bytes()
    done = promote("eagle-nccl-ll", root=root, dry_run=True)
    assert not done.written and done.diff
    assert target.read_bytes() == before
    assert sorted(p.name for p in (root / "stacks").iterdir()) == listing  # no log, no lock file


def test_stale_evidence_is_refused(root: Path) -> None:
    bench(root, "eagle-nccl-ll")
    stack_file = root / "stacks" / "Pulumi.eagle-nccl-ll.yaml"
    stack_file.write_text(stack_file.read_text().replace("mem-fraction-static: 0.88", "mem-fraction-static: 0.85"))
    before = (root / "stacks" / "Pulumi.production.yaml").read_bytes()
    with pytest.raises(PromotionRefused) as info:
        promote("eagle-nccl-ll", root=root)
    assert "stale evidence" in info.value.why and "sglab bench --stack eagle-nccl-ll" in info.value.fix
    assert (root / "stacks" / "Pulumi.production.yaml").read_bytes() == before


@pytest.mark.parametrize("stack, kwargs, words", [
    ("eagle-default", dict(gain=-0.08), "short of"),
    ("article-replay", dict(confounds=[{"key": "env NCCL_PROTO", "baseline": None, "candidate": "LL"}]),
     "beyond speculation"),
    ("eagle-nccl-ll", dict(error_rate={"candidate": 0.2}), "error rate"),
    ("eagle-nccl-ll", dict(live_mismatches=["candidate: --speculative-num-steps live=5 declared=2"]),
     "live servers"),
])
def test_refusals_say_why_and_how_to_fix(root: Path, stack: str, kwargs: dict, words: str) -> None:
    bench(root, stack, **kwargs)
    before = (root / "stacks" / "Pulumi.production.yaml").read_bytes()
    with pytest.raises(PromotionRefused) as info:
        promote(stack, root=root)
    assert words in info.value.why and info.value.fix
    assert (root / "stacks" / "Pulumi.production.yaml").read_bytes() == before
    assert not (root / "stacks" / "promotions.jsonl").exists()


def test_incomplete_and_missing_evidence_are_refused(root: Path) -> None:
    with pytest.raises(PromotionRefused, match="no complete A/B run"):
        promote("eagle-nccl-ll", root=root)
    run_dir = bench(root, "eagle-nccl-ll", complete=False)
    with pytest.raises(PromotionRefused, match="no complete A/B run"):
        promote("eagle-nccl-ll", root=root)
    with pytest.raises(PromotionRefused, match="incomplete run"):
        promote("eagle-nccl-ll", root=root, result_path=run_dir)


def test_cli_refusal_exits_2_with_the_fix(root: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    bench(root, "eagle-default", gain=-0.08)
    point_cli_at(monkeypatch, root)
    assert main(["promote", "--stack", "eagle-default"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refused: ") and "\n  fix: " in err and "\n  check: verdict " in err


@pytest.mark.parametrize("setup, check", [
    (lambda root: None, "evidence"),
    (lambda root: bench(root, "eagle-nccl-ll", complete=False), "evidence"),
    (lambda root: bench(root, "eagle-nccl-ll", gain=-0.08), "verdict"),
    (lambda root: (bench(root, "eagle-nccl-ll"), (root / "stacks" / "Pulumi.eagle-nccl-ll.yaml").write_text(
        (root / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text().replace("0.88", "0.85"))), "stale evidence"),
])
def test_a_refusal_names_the_check_of_the_table_that_refused(root: Path, setup, check: str) -> None:
    setup(root)
    with pytest.raises(PromotionRefused) as info:
        promote("eagle-nccl-ll", root=root)
    assert info.value.check == check
    assert info.value.as_check().model_dump() == {"name": check, "ok": False, "detail": info.value.why,
                                                  "fix": info.value.fix}


def test_a_promotion_passes_every_check_of_the_table_in_order(root: Path, capsys, monkeypatch) -> None:
    from sglab.promotion.evidence import EVIDENCE_CHECKS
    from sglab.promotion.promote import WRITE_CHECKS

    bench(root, "eagle-nccl-ll")
    done = promote("eagle-nccl-ll", root=root, dry_run=True)
    assert [c.name for c in done.checks] == [c.name for c in (*EVIDENCE_CHECKS, *WRITE_CHECKS)]
    assert all(c.ok and c.detail for c in done.checks)
    point_cli_at(monkeypatch, root)
    assert main(["promote", "--stack", "eagle-nccl-ll", "--dry-run"]) == 0
    assert f"checks passed ({len(done.checks)}): target, evidence, sweep arm, " in capsys.readouterr().out


def test_the_docs_table_of_checks_is_the_codes() -> None:
    import re

    from sglab.promotion.promote import checks_table

    text = (Path(__file__).resolve().parents[2] / "docs" / "promotion.md").read_text()
    shown = re.search(r"<!-- promotion-checks:begin -->\n(.*?)\n<!-- promotion-checks:end -->", text, re.S)
    assert shown is not None and shown.group(1) == checks_table(), "run python -m sglab.promotion.promote"


def test_cli_dry_run_prints_diff_and_next_step(root: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    bench(root, "eagle-nccl-ll")
    point_cli_at(monkeypatch, root)
    assert main(["promote", "--stack", "eagle-nccl-ll", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "+    NCCL_PROTO: LL" in out and "pulumi up --stack production" in out and "dry run" in out


WORKER = """
import sys, time
from pathlib import Path
from sglab.promotion.promote import promote, PromotionRefused
root, stack, barrier = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
Path(sys.argv[4]).touch()
while not barrier.exists():
    time.sleep(0.005)
try:
    promote(stack, root=root)
except PromotionRefused as exc:
    print(exc.why); sys.exit(2)
"""


def test_concurrent_promotions_serialise(root: Path) -> None:
    # Four different candidates, so that no promotion is a no-op (which would log nothing) whatever the order.
    for name in ("eagle-nccl-ll", "eagle-default"):
        text = (root / "stacks" / f"Pulumi.{name}.yaml").read_text()
        (root / "stacks" / f"Pulumi.{name}-mem85.yaml").write_text(
            text.replace("mem-fraction-static: 0.88", "mem-fraction-static: 0.85"))
    stacks = ["eagle-nccl-ll", "eagle-default", "eagle-nccl-ll-mem85", "eagle-default-mem85"]
    for name in stacks:
        bench(root, name)
    target = root / "stacks" / "Pulumi.production.yaml"
    original = target.read_text()
    barrier = root / "go"
    ready = [root / f"ready-{i}" for i in range(len(stacks))]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(root), s, str(barrier), str(r)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for s, r in zip(stacks, ready)]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        time.sleep(0.05)  # every process has imported sglab and waits at the barrier
    barrier.touch()
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0] * len(stacks), [p.stderr.read() for p in procs]
    final = target.read_text()
    load_stack("production", root)  # still a valid stack
    entries = [json.loads(line) for line in (root / "stacks" / "promotions.jsonl").read_text().splitlines()]
    assert len(entries) == len(stacks)
    # Serialised: each promotion started from the file the previous one wrote (no lost update).
    import hashlib
    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731
    assert entries[0]["target_sha256_before"] == sha(original)
    for prev, nxt in zip(entries, entries[1:]):
        assert nxt["target_sha256_before"] == prev["target_sha256_after"]
    assert entries[-1]["target_sha256_after"] == sha(final)
    assert not [p for p in (root / "stacks").iterdir() if p.name.startswith(".Pulumi.production.yaml.")
                and not p.name.endswith(".lock")]  # no temp files left behind
    assert os.access(target, os.R_OK)


def test_a_no_op_promotion_writes_and_logs_nothing(root: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Promoting what production already runs changes no file: no log line, no "wrote"."""
    bench(root, "eagle-nccl-ll")
    first = promote("eagle-nccl-ll", root=root)
    assert first.written
    target = root / "stacks" / "Pulumi.production.yaml"
    before, log_before = target.read_bytes(), first.log_path.read_bytes()
    again = promote("eagle-nccl-ll", root=root)
    assert not again.written and again.diff == ""
    assert target.read_bytes() == before and first.log_path.read_bytes() == log_before
    point_cli_at(monkeypatch, root)
    assert main(["promote", "--stack", "eagle-nccl-ll"]) == 0
    out = capsys.readouterr().out
    assert "wrote" not in out and "already holds this config" in out
    assert first.log_path.read_bytes() == log_before


def test_parallel_evidence_is_refused_where_the_target_asks_for_a_crossover(root: Path) -> None:
    """Servers given by URL cannot be moved by sglab, so the fix says how to swap them and join the two runs."""
    bench(root, "eagle-nccl-ll", design="parallel", rounds=20)
    with pytest.raises(PromotionRefused) as refused:
        promote("eagle-nccl-ll", root=root)
    assert "measured its arms in a parallel design, so its gain includes any difference between the two nodes" \
        in refused.value.why
    assert "policy.design: crossover in Pulumi.production.yaml" in refused.value.why
    assert refused.value.fix.startswith("sglab cannot move servers given by URL, so swap them yourself")
    assert "--crossover-of 20260101T000000Z-aaaaaa`, and promote that run" in refused.value.fix
    assert "`sglab:policy.design: parallel` there, knowingly" in refused.value.fix


def test_the_benchmark_jobs_parallel_evidence_is_told_to_let_the_job_swap_the_nodes(root: Path) -> None:
    def in_cluster(result) -> None:
        result.target.kind = "in-cluster"

    bench(root, "eagle-nccl-ll", design="parallel", rounds=20, edit=in_cluster)
    with pytest.raises(PromotionRefused) as refused:
        promote("eagle-nccl-ll", root=root)
    assert "measured its arms in a parallel design" in refused.value.why
    assert refused.value.fix.startswith("with `sglab:policy.design: crossover` in Pulumi.eagle-nccl-ll.yaml the "
                                        "benchmark Job swaps the arms' nodes between periods")


def test_parallel_evidence_promotes_where_the_target_asks_for_no_balanced_design(root: Path) -> None:
    target = root / "stacks" / "Pulumi.production.yaml"
    target.write_text(target.read_text().replace("design: crossover", "design: parallel"))
    bench(root, "eagle-nccl-ll", design="parallel", rounds=20)
    assert promote("eagle-nccl-ll", root=root).verdict.outcome == "promote"


def test_a_crossover_stopped_after_period_one_does_not_promote(root: Path) -> None:
    def first_period_only(result) -> None:
        for level in result.levels:
            for r in level.rounds:  # as if the arms had never swapped nodes
                r.period, r.node = 1, "sim-node-a" if r.arm == "baseline" else "sim-node-b"

    bench(root, "eagle-nccl-ll", edit=first_period_only)
    with pytest.raises(PromotionRefused) as refused:
        promote("eagle-nccl-ll", root=root)
    assert "period 1 alone" in refused.value.why
