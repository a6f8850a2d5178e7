"""Grid expansion: SGLang's rules applied, invalid combinations skipped with the reason, stable arms."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.config import load_stack
from sglab.config.arms import baseline_arm, confounds
from sglab.core.errors import ConfigError
from sglab.sweep.confirm import winner_stack
from sglab.sweep.grid import QUICK_REASON, expand, quick_subset
from .conftest import write_stack


def test_shipped_grid_has_32_arms_all_against_the_stack_baseline() -> None:
    loaded = load_stack("eagle-sweep")
    grid = expand(loaded)
    # 40 combinations; SGLang 0.5.23 refuses --speculative-adaptive at num-steps 2 and 4 (not an adaptive tier)
    assert len(grid.arms) == 32
    assert sorted(s.name for s in grid.skipped) == sorted(f"s{n}-k1-d{n + 1}{v}-adaptive" for n in (2, 4)
                                                          for v in ("", "-LL", "-Ring", "-SYS"))
    assert all("not one of the adaptive candidate steps [0, 1, 3, 5, 7]" in s.reason for s in grid.skipped)
    assert grid.baseline.config_hash == baseline_arm(loaded.config).config_hash
    assert len({a.config_hash for a in grid.arms}) == 32
    ll = grid.arm("s5-k1-d6-LL")
    assert ll.arm.env["NCCL_PROTO"] == "LL" and "NCCL_PROTO" not in grid.baseline.env
    assert ll.arm.args[-6:] == ("--speculative-num-steps", "5", "--speculative-eagle-topk", "1",
                                "--speculative-num-draft-tokens", "6")
    assert "--speculative-adaptive" in grid.arm("s3-k1-d4-adaptive").arm.args
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
    assert "not one of the adaptive candidate steps" in reasons["s2-k1-d3-adaptive"]
    assert not names & set(reasons)
    for arm in grid.arms:  # every arm runs exactly the shape its name says
        assert (arm.num_steps, arm.eagle_topk, arm.num_draft_tokens) == \
            tuple(int(arm.arm.args[arm.arm.args.index(f)+1]) for f in
                  ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"))


def test_a_variant_identical_to_the_stack_nccl_is_skipped_as_the_same_server(root: Path) -> None:
    write_stack(root, "dup", {"num-steps": [2], "num-draft-tokens": "steps+1",
                              "nccl-variants": {"default": {}, "LL": {"NCCL_PROTO": "LL"},
                                                "ll2": {"NCCL_PROTO": "ll"}}})
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
    assert sum(s.reason == QUICK_REASON for s in grid.skipped) == 27
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
    arm = expand(loaded).arm("s5-k1-d6-LL-adaptive")
    assert [c.key for c in confounds(arm_stack_config(loaded, arm))] == ["env NCCL_PROTO"]
    confirm = winner_stack(loaded, arm.record())
    assert confounds(confirm.config) == []
    assert confirm.config.nccl.as_env() == {"NCCL_PROTO": "LL"}
    spec = confirm.config.candidate.speculative
    assert (spec.num_steps, spec.eagle_topk, spec.num_draft_tokens) == (5, 1, 6)


def arm_stack_config(loaded, arm):
    from sglab.sweep.grid import arm_stack

    return arm_stack(loaded, num_steps=arm.num_steps, eagle_topk=arm.eagle_topk,
                     num_draft_tokens=arm.num_draft_tokens, adaptive=arm.adaptive, nccl=arm.nccl,
                     shared_nccl=False).config


def test_the_algorithm_is_a_factor_with_each_algorithms_own_shape(root: Path) -> None:
    write_stack(root, "algos", {"num-steps": [1, 3], "eagle-topk": [1], "num-draft-tokens": "steps+1",
                                "speculative-algorithm": ["EAGLE3", "STANDALONE", "NGRAM"],
                                "draft-model-path": {"STANDALONE": "/shared/small-draft"}})
    grid = expand(load_stack("algos", root))
    names = [a.name for a in grid.arms]
    # the stack's own algorithm keeps its names; the others are prefixed; NGRAM takes only num-draft-tokens
    assert names == ["s1-k1-d2", "s3-k1-d4", "standalone-s1-k1-d2", "standalone-s3-k1-d4", "ngram-d2", "ngram-d4"]
    standalone = grid.arm("standalone-s3-k1-d4").arm.args
    assert standalone[standalone.index("--speculative-algorithm") + 1] == "STANDALONE"
    assert standalone[standalone.index("--speculative-draft-model-path") + 1] == "/shared/small-draft"
    ngram = grid.arm("ngram-d4")
    assert "--speculative-draft-model-path" not in ngram.arm.args and "--speculative-num-steps" not in ngram.arm.args
    assert ngram.arm.args[ngram.arm.args.index("--speculative-ngram-max-bfs-breadth") + 1] == "10"
    # the record says what SGLang runs (topk = max BFS breadth) and rebuilds the same server for the confirmation
    assert (ngram.num_steps, ngram.eagle_topk, ngram.num_draft_tokens) == (0, 10, 4)
    confirm = winner_stack(load_stack("algos", root), ngram.record()).config.candidate.speculative
    assert confirm.algorithm == "NGRAM" and confirm.num_draft_tokens == 4


def test_an_algorithm_factor_without_its_draft_is_skipped_with_the_stacks_reason(root: Path) -> None:
    write_stack(root, "nodraft", {"num-steps": [2], "eagle-topk": [1], "num-draft-tokens": "steps+1",
                                  "speculative-algorithm": ["STANDALONE"]})
    grid = expand(load_stack("nodraft", root))
    assert not grid.arms and "needs draft-model-path" in grid.skipped[0].reason


def test_an_algorithm_whose_shape_is_not_the_grid_is_refused_as_a_factor(root: Path) -> None:
    with pytest.raises(ConfigError) as err:
        write_stack(root, "dflash", {"speculative-algorithm": ["DFLASH"]})
        load_stack("dflash", root)
    assert "DFLASH cannot be a sweep factor" in str(err.value)
