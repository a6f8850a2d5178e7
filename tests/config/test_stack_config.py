"""The shipped stacks, the effective arms and the generated key reference."""

from __future__ import annotations

import pytest

from sglab.cli import main
from sglab.config import baseline_arm, candidate_arm, confounds, load_stack
from sglab.core.paths import list_stacks
from sglab.core.paths import project_root
from sglab.config.placement import Rollout
from sglab.config.reference import generated_block, rows

STACKS = list_stacks(project_root())


@pytest.mark.parametrize("name", STACKS)
def test_every_shipped_stack_validates(name, capsys):
    assert main(["validate", "--stack", name]) == 0
    out = capsys.readouterr().out
    assert "valid" in out and "baseline: config-hash" in out and "candidate: config-hash" in out


def test_eagle_nccl_ll_is_the_article_pair_without_confounds():
    stack = load_stack("eagle-nccl-ll").config
    base, cand = baseline_arm(stack), candidate_arm(stack)
    assert confounds(stack) == []
    for arm in (base, cand):
        assert arm.env["NCCL_PROTO"] == "LL" and arm.env["NCCL_ALGO"] == "Ring" and arm.env["NCCL_P2P_LEVEL"] == "SYS"
        assert ["--tp-size", "8"] == list(arm.args[arm.args.index("--tp-size"):arm.args.index("--tp-size") + 2])
        assert "--disable-custom-all-reduce" in arm.args
    assert cand.args[len(base.args):] == (
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/shared/kimi-k2.5-eagle3",
        "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3")
    assert cand.args[: len(base.args)] == base.args
    assert base.config_hash != cand.config_hash


def test_eagle_default_uses_five_steps_and_default_nccl():
    stack = load_stack("eagle-default").config
    cand = candidate_arm(stack)
    assert not any(k.startswith("NCCL_") for k in cand.env)
    i = cand.args.index("--speculative-num-steps")
    assert cand.args[i + 1] == "5" and cand.args[cand.args.index("--speculative-num-draft-tokens") + 1] == "6"


def test_article_replay_declares_its_confounds():
    found = {c.key: c for c in confounds(load_stack("article-replay").config)}
    assert found["env NCCL_PROTO"].baseline is None and found["env NCCL_PROTO"].candidate == "LL"


def test_config_hash_is_stable_and_sensitive():
    a = load_stack("eagle-nccl-ll").config
    assert baseline_arm(a).config_hash == baseline_arm(load_stack("eagle-nccl-ll").config).config_hash
    b = load_stack("eagle-default").config
    assert baseline_arm(a).config_hash != baseline_arm(b).config_hash  # NCCL env differs


@pytest.mark.parametrize("minutes, period, expected", [(60, 10, 360), (20, 30, 40), (1, 7, 9)])
def test_startup_probe_covers_the_startup_timeout(minutes, period, expected):
    rollout = Rollout.model_validate({"startup-timeout-min": minutes, "probe-period-s": period,
                                      "pulumi-timeout-min": max(minutes, 90)})
    assert rollout.startup_failure_threshold == expected
    assert expected * period >= minutes * 60


def test_docs_key_reference_is_up_to_date():
    doc = (project_root() / "docs" / "config.md").read_text()
    assert generated_block() in doc, "docs/config.md is stale: run .venv/bin/python -m sglab.config.reference"


def test_key_reference_lists_nested_keys_with_defaults():
    table = {key: default for key, _, default, _ in rows()}
    assert table["sglab:server.port"] == "`30000`"
    assert table["sglab:rollout.readiness-path"] == "`/health_generate`"
    assert table["sglab:model.path"] == "**required**"
    assert "sglab:placement.tolerations[].operator" in table


def test_a_key_the_stack_derives_is_one_row_that_says_where_to_write_it():
    """policy.traffic is set from sglab:traffic: the reference names it once as derived, never as keys to write."""
    table = {key: kind for key, kind, _, _ in rows()}
    assert table["sglab:policy.traffic"] == "set from `sglab:traffic` (do not write it here)"
    assert not [key for key in table if key.startswith("sglab:policy.traffic.")]
    assert "sglab:traffic.levels" in table


def test_a_default_that_follows_another_key_is_said_as_it_applies():
    table = {key: default for key, _, default, _ in rows()}
    assert table["sglab:load.endpoint"] == "`chat` for prompt sources suite, sharegpt, openai; `generate` otherwise"
