"""`sglab rollback`: a promote + rollback leaves the file as before the promotion and the log saying so."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from filelock import FileLock

from sglab.analysis.synthetic import synthetic_result
from sglab.cli import main
from sglab.config import baseline_arm, candidate_arm, load_stack
from sglab.core.paths import project_root
from sglab.promotion.promote import PromotionRefused, promote, rollback
from sglab.results.integrity import planned
from sglab.results.store import create_run_dir, write_result
from sglab.promotion.log import sealed
from tests.promote.test_promote import point_cli_at

REPO_STACKS = project_root() / "stacks"


def bench(root: Path, stack: str, *, run_id: str = "20260101T000000Z-aaaaaa") -> Path:
    """A synthetic winning result of `stack` as it is now (as in the promotion tests)."""
    config = load_stack(stack, root).config
    arms = {"baseline": baseline_arm(config), "candidate": candidate_arm(config)}
    result = synthetic_result(stack=stack, gain=0.06, config_hash={n: a.config_hash for n, a in arms.items()},
                              run_id=run_id, levels=(1, 4), rounds=40, policy=config.policy.model_dump(mode="json"),
                              round_cv=0.005, shared_cv=0.005, request_cv=0.01, producer="sglang",
                              design="crossover")
    for info in result.arms:
        info.launch_command = arms[info.name].launch_command
    result.integrity = planned({level.concurrency: 40 for level in result.levels})
    run_dir = create_run_dir(stack, run_id, root / "results")
    write_result(result, run_dir)
    return run_dir


@pytest.fixture(autouse=True)
def _result_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from sglab.results.integrity import KEY_ENV

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(KEY_ENV, "sglab-test-result-key")


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    (tmp_path / "stacks").mkdir()
    for name in ("eagle-nccl-ll", "eagle-default", "production"):
        shutil.copy(REPO_STACKS / f"Pulumi.{name}.yaml", tmp_path / "stacks")
    return tmp_path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _log(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "stacks" / "promotions.jsonl").read_text().splitlines()]


def test_promote_then_rollback_restores_the_file_and_logs_it(root: Path, capsys, monkeypatch) -> None:
    target = root / "stacks" / "Pulumi.production.yaml"
    original = target.read_text()
    bench(root, "eagle-nccl-ll")
    first = promote("eagle-nccl-ll", root=root)
    after_first = target.read_text()
    bench(root, "eagle-default", run_id="20260102T000000Z-bbbbbb")
    second = promote("eagle-default", root=root)
    assert first.written and second.written and target.read_text() != after_first

    point_cli_at(monkeypatch, root)
    assert main(["rollback", "--stack", "production", "--reason", "watch: gain below zero"]) == 0
    out = capsys.readouterr().out
    assert "next: pulumi up --stack production" in out
    assert "20260102T000000Z-bbbbbb" in out and "20260101T000000Z-aaaaaa" in out
    # the file: byte for byte what the first promotion wrote
    assert target.read_text() == after_first
    production = load_stack("production", root).config
    assert candidate_arm(production).args == candidate_arm(load_stack("eagle-nccl-ll", root).config).args
    # the log: two promotions and the rollback that undid the second, with the file's hashes around it
    entries = _log(root)
    assert [e["action"] for e in entries] == ["promote", "promote", "rollback"]
    undo = entries[-1]
    assert undo["undoes"]["run_id"] == "20260102T000000Z-bbbbbb" and undo["undoes"]["line"] == 2
    assert undo["restores"]["run_id"] == "20260101T000000Z-aaaaaa"
    assert undo["target_sha256_before"] == second.log_entry["target_sha256_after"]
    assert undo["target_sha256_after"] == second.log_entry["target_sha256_before"] == _sha(target)
    assert undo["reason"] == "watch: gain below zero"

    # again: back to the file before any promotion; then there is nothing left to roll back
    again = rollback("production", root=root)
    assert again.written and again.restored is None and target.read_text() == original
    with pytest.raises(PromotionRefused, match="no promotion into 'production'"):
        rollback("production", root=root)
    assert target.read_text() == original and len(_log(root)) == 4


def test_dry_run_changes_nothing(root: Path, capsys, monkeypatch) -> None:
    bench(root, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=root)
    target, log = root / "stacks" / "Pulumi.production.yaml", root / "stacks" / "promotions.jsonl"
    before, log_before = target.read_bytes(), log.read_bytes()
    point_cli_at(monkeypatch, root)
    assert main(["rollback", "--stack", "production", "--dry-run"]) == 0
    assert "dry run: nothing written" in capsys.readouterr().out
    assert target.read_bytes() == before and log.read_bytes() == log_before


def test_a_hand_edit_since_the_promotion_is_not_discarded(root: Path, capsys, monkeypatch) -> None:
    bench(root, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=root)
    target = root / "stacks" / "Pulumi.production.yaml"
    edited = target.read_text().replace("mem-fraction-static: 0.88", "mem-fraction-static: 0.85")
    assert edited != target.read_text()
    target.write_text(edited)
    point_cli_at(monkeypatch, root)
    assert main(["rollback", "--stack", "production"]) == 2
    err = capsys.readouterr().err
    assert "sglab:server" in err and "fix:" in err
    assert target.read_text() == edited and len(_log(root)) == 1


def test_an_older_log_entry_without_the_previous_config_is_refused(root: Path) -> None:
    bench(root, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=root)
    log = root / "stacks" / "promotions.jsonl"
    entry = _log(root)[0]
    del entry["previous"]
    log.write_text(json.dumps(sealed(entry)) + "\n")  # as an older sglab logged it (sealed here: it is read)
    with pytest.raises(PromotionRefused, match="does not record the config it replaced") as info:
        rollback("production", root=root)
    assert "git log -p" in info.value.fix


def test_rollback_waits_for_the_promotion_lock(root: Path) -> None:
    bench(root, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=root)
    target = root / "stacks" / "Pulumi.production.yaml"
    before = target.read_bytes()
    with FileLock(str(target.parent / f".{target.name}.lock")):
        with pytest.raises(PromotionRefused, match="held its lock"):
            rollback("production", root=root, lock_timeout_s=0.2)
    assert target.read_bytes() == before
