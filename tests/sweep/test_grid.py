"""Grid expansion: SGLang's rules applied, invalid combinations skipped with the reason, stable arms."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.config import load_stack
from sglab.config.arms import baseline_arm, confounds
from sglab.config.loader import ConfigError
from sglab.sweep.confirm import winner_stack
from sglab.sweep.grid import QUICK_REASON, expand, quick_subset
from .conftest import write_stack


def test_shipped_grid_has_forty_arms_all_against_the_stack_baseline() -> None:
    loaded = load_stack("eagle-sweep")
    grid = expand(loaded)
    assert len(grid.arms) == 40 and not grid.skipped
    assert grid.baseline.config_hash == baseline_arm(loaded.config).config_hash
    assert len({a.config_hash for a in grid.arms}) == 40
    ll = grid.arm("s5-k1-d6-LL")
    assert ll.arm.env["NCCL_PROTO"] == "LL" and "NCCL_PROTO" not in grid.baseline.env
    assert ll.arm.args[-6:] == ("--speculative-num-steps", "5", "--speculative-eagle-topk", "1",
                                "--speculative-num-draft-tokens", "6")
    assert "--speculative-adaptive" in grid.arm("s2-k1-d3-adaptive").arm.args
    assert "--speculative-adaptive" not in grid.arm("s2-k1-d3").arm.args
    # names and hashes are stable: a second expansion gives the same arms
    assert [(a.name, a.config_hash) for a in expand(load_stack("eagle-sweep")).arms] == \
        [(a.name, a.config_hash) for a in grid.arms]


def test_invalid_combinations_are_listed_with_reasons_never_adjusted(root: Path) -> None:
    write_stack(root, "grid", {"num-steps": [2, 3], "eagle-topk": [1, 2], "num-draft-tokens": [3, 4, 8],
                               "speculative-adaptive": [False, True]})
    grid = expand(load_stack("grid", root))
    reasons = {s.name: s.reason for s in grid.skipped}
    names = {a.name for a in grid.arms}
    # topk 1: SGLang would run num-draft-tokens = steps + 1 whatever is written
    assert "s2-k1-d3" in names and "s3-k1-d4" in names
    assert "SGLang would silently run num-draft-tokens 3" in reasons["s2-k1-d4"]
    assert "num-draft-tokens 8 exceeds num-steps * eagle-topk + 1 = 5" in reasons["s2-k2-d8"]
    assert "s3-k2-d4" in names and "s3-k2-d4-adaptive" not in names
    assert "eagle-topk is 2, not 1" in reasons["s3-k2-d4-adaptive"]
    assert "s3-k1-d4-adaptive" in names
    assert not names & set(reasons)
    for arm in grid.arms:  # every arm runs exactly the shape its name says
        assert (arm.num_steps, arm.eagle_topk, arm.num_draft_tokens) == \
            tuple(int(arm.arm.args[arm.arm.args.index(f)+1]) for f in
                  ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"))


def test_a_variant_identical_to_the_stack_nccl_is_skipped_as_the_same_server(root: Path) -> None:
    write_stack(root, "dup", {"num-steps": [2], "num-draft-tokens": "steps+1",
                              "nccl-variants": {"default": {}, "LL": {"NCCL_PROTO": "LL"}, "ll2": {"NCCL_PROTO": "ll"}}})
    grid = expand(load_stack("dup", root))
    assert [a.name for a in grid.arms] == ["s2-k1-d3", "s2-k1-d3-LL"]
    assert grid.skipped[0].name == "s2-k1-d3-ll2" and "same server as arm s2-k1-d3-LL" in grid.skipped[0].reason


def test_probe_pruned_variants_are_skipped_with_the_probe_reason(root: Path) -> None:
    write_stack(root, "pr", {"num-steps": [2, 3], "num-draft-tokens": "steps+1",
                             "nccl-variants": {"default": {}, "Ring": {"NCCL_ALGO": "Ring"}}})
    grid = expand(load_stack("pr", root), skip_variants={"Ring": "slower than nccl-default in probe p1"})
    assert [a.name for a in grid.arms] == ["s2-k1-d3", "s3-k1-d4"]
    assert {s.name for s in grid.skipped} == {"s2-k1-d3-Ring", "s3-k1-d4-Ring"}
    assert all("NCCL variant Ring: slower than nccl-default" in s.reason for s in grid.skipped)


def test_quick_subset_and_unknown_names() -> None:
    loaded = load_stack("eagle-sweep")
    grid = quick_subset(expand(loaded), loaded.config.sweep)
    assert [a.name for a in grid.arms] == ["s1-k1-d2", "s3-k1-d4", "s3-k1-d4-LL", "s5-k1-d6-LL", "s2-k1-d3-SYS"]
    assert sum(s.reason == QUICK_REASON for s in grid.skipped) == 35
    bad = loaded.config.sweep.model_copy(update={"quick_arms": ["s9-k1-d10"]})
    with pytest.raises(ValueError, match="s9-k1-d10"):
        quick_subset(expand(loaded), bad)


@pytest.mark.parametrize("sweep, key, words", [
    ({"num-steps": [2, 2]}, "sweep.num-steps", "lists a value twice"),
    ({"nccl-variants": {"default": {"NCCL_PROTO": "LL"}}}, "sweep.nccl-variants.default", "stack's own"),
    ({"nccl-variants": {"bad name": {}}}, "sweep.nccl-variants.bad name", "letters, digits"),
    ({"max-rounds": 1}, "sweep.max-rounds", "greater than or equal to 2"),
    ({"num-draft-tokens": "steps+2"}, "sweep.num-draft-tokens", "or 'steps+1'"),
])
def test_bad_sweep_sections_name_the_key(root: Path, sweep: dict, key: str, words: str) -> None:
    write_stack(root, "bad", sweep)
    with pytest.raises(ConfigError) as info:
        load_stack("bad", root)
    assert info.value.key == f"sglab:{key}" and words in str(info.value)


def test_the_confirmation_stack_shares_the_variant_so_it_has_no_confound() -> None:
    loaded = load_stack("eagle-sweep")
    arm = expand(loaded).arm("s4-k1-d5-LL-adaptive")
    assert [c.key for c in confounds(arm_stack_config(loaded, arm))] == ["env NCCL_PROTO"]
    confirm = winner_stack(loaded, arm.record())
    assert confounds(confirm.config) == []
    assert confirm.config.nccl.as_env() == {"NCCL_PROTO": "LL"}
    spec = confirm.config.candidate.speculative
    assert (spec.num_steps, spec.eagle_topk, spec.num_draft_tokens) == (4, 1, 5)


def arm_stack_config(loaded, arm):
    from sglab.sweep.grid import arm_stack

    return arm_stack(loaded, num_steps=arm.num_steps, eagle_topk=arm.eagle_topk,
                     num_draft_tokens=arm.num_draft_tokens, adaptive=arm.adaptive, nccl=arm.nccl,
                     shared_nccl=False).config
