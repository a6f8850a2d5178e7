"""Promotion is refused when the evidence fails the target (production) stack's own gate."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import target_gate_refusal
from sglab.config import baseline_arm, candidate_arm, load_stack
from sglab.core.paths import project_root
from sglab.promotion.promote import PromotionRefused, promote
from sglab.results.store import create_run_dir, write_result

QUIET = dict(round_cv=0.005, shared_cv=0.005, request_cv=0.01)


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    (tmp_path / "stacks").mkdir()
    for name in ("eagle-nccl-ll", "production"):
        shutil.copy(project_root() / "stacks" / f"Pulumi.{name}.yaml", tmp_path / "stacks")
    return tmp_path


def _evidence(root: Path, gain: dict[int, float], levels=(1, 4, 16), rounds: int = 40, design: str = "crossover"):
    """A crossover (production's policy.design) of 40 rounds a level: 20 pairs, where production's strict checks
    promote from (`design` parallel: 20 rounds are 20 estimates; target_gate_refusal reads no design)."""
    config = load_stack("eagle-nccl-ll", root).config
    arms = {"baseline": baseline_arm(config), "candidate": candidate_arm(config)}
    result = synthetic_result(stack="eagle-nccl-ll", gain=gain, levels=levels, rounds=rounds,
                              config_hash={n: a.config_hash for n, a in arms.items()},
                              policy=config.policy.model_dump(mode="json"), producer="sglang", design=design,
                              **QUIET)
    for info in result.arms:
        info.launch_command = arms[info.name].launch_command
    try:
        from sglab.results.integrity import planned

        result.integrity = planned({lv.concurrency: rounds for lv in result.levels})
    except ImportError:  # before evidence integrity records
        pass
    run_dir = create_run_dir("eagle-nccl-ll", result.run_id, root / "results")
    write_result(result, run_dir)
    return result


def test_a_win_at_1_that_loses_at_4_is_refused_for_production(root: Path) -> None:
    """eagle-nccl-ll gates on concurrency 1 only; production gates on [1, 4] with min-gain +2%."""
    result = _evidence(root, {1: 0.06, 4: -0.05, 16: -0.19})
    reason, fix = target_gate_refusal(result, load_stack("production", root), "eagle-nccl-ll")
    assert "production stack's own gate (policy.levels: concurrency 1, concurrency 4" in reason
    assert "loses" in reason and "concurrency 4" in fix and "sglab:traffic" in fix
    before = (root / "stacks" / "Pulumi.production.yaml").read_bytes()
    with pytest.raises(PromotionRefused) as info:
        promote("eagle-nccl-ll", root=root, results_base=root / "results", dry_run=True)
    assert "production stack's own gate" in str(info.value)
    assert (root / "stacks" / "Pulumi.production.yaml").read_bytes() == before


def test_evidence_that_passes_production_gate_is_not_refused(root: Path) -> None:
    result = _evidence(root, {1: 0.06, 4: 0.06, 16: 0.03})
    assert target_gate_refusal(result, load_stack("production", root), "eagle-nccl-ll") is None


def test_production_judges_with_its_strict_checks_what_the_stack_promotes_with_its_standard_ones(root: Path) -> None:
    """stacks/Pulumi.production.yaml sets policy.checks strict: 12 rounds of a clear win decide the source stack's
    gate (standard checks, from 10 rounds) but not production's, and the refusal says why."""
    result = _evidence(root, {1: 0.06, 4: 0.06, 16: 0.03}, rounds=12, design="parallel")
    from sglab.analysis.verdict import judge

    assert judge(result, load_stack("eagle-nccl-ll", root).config.policy).outcome == "promote"
    reason, fix = target_gate_refusal(result, load_stack("production", root), "eagle-nccl-ll")
    assert "no promotion before 20 rounds (12 so far; strict checks)" in reason + fix


def test_a_level_production_gates_on_but_nobody_measured(root: Path) -> None:
    result = _evidence(root, {1: 0.06}, levels=(1,))
    reason, fix = target_gate_refusal(result, load_stack("production", root), "eagle-nccl-ll")
    assert "was not measured" in reason and "add [4]" in fix


def test_a_level_measured_ungated_names_its_too_few_rounds_not_a_bystander(root: Path) -> None:
    """Concurrency 4 ran its 4 ungated rounds; production gates it, where 4 rounds give the sequence no
    bounds ('95% CI n/a to n/a' before), and the refusal blamed something else."""
    result = _evidence(root, {1: 0.06, 4: 0.06, 16: 0.03}, rounds=20, design="parallel")
    level = result.level(4)
    level.rounds = [r for r in level.rounds if r.round_index < 4]
    level.requests = [q for q in level.requests if q.round_index < 4]
    reason, fix = target_gate_refusal(result, load_stack("production", root), "eagle-nccl-ll")
    assert "n/a to n/a" not in reason and "no bounds yet: 4 rounds are too few for the confidence sequence" in reason
    assert "concurrency 4 has only 4 rounds, too few for the confidence sequence" in fix
    assert "runs the levels production gates sequentially" in fix
