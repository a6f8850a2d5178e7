"""The promotion policy refuses values that would make any run promotable."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from sglab.analysis.checks import policy_weakenings
from sglab.config.policy import PromotionPolicy
from sglab.core.paths import project_root

ROOT = project_root()


@pytest.mark.parametrize("field, value", [
    ("min_gain", math.nan), ("min_gain", math.inf), ("min_gain", -0.6), ("min_gain", -math.inf),
    ("confidence", math.nan), ("error_cap", math.nan), ("ttft_p99_max_increase", math.nan),
    ("ttft_p99_max_increase", math.inf), ("itl_p99_max_increase", math.nan), ("itl_p99_max_increase", -math.inf),
    ("levels", []),
])
def test_policy_refuses_values_that_disable_the_gate(field: str, value) -> None:
    with pytest.raises(ValidationError):
        PromotionPolicy.model_validate({field: value})


def test_policy_accepts_the_defaults_and_zero_min_gain() -> None:
    assert PromotionPolicy.model_validate({"min_gain": 0.0}).min_gain == 0.0


@pytest.mark.parametrize("change, key", [
    ({"min_gain": 0.0}, "min-gain"), ({"confidence": 0.9}, "confidence"), ({"min_rounds": 2}, "min-rounds"),
    ({"min_requests": 5}, "min-requests"), ({"error_cap": 0.5}, "error-cap"),
    ({"ttft_p99_max_increase": 0.9}, "ttft-p99-max-increase"),
    ({"ttft_p99_max_increase": None}, "ttft-p99-max-increase"),
    ({"levels": [4]}, "levels"), ({"metric": "output_tok_per_s"}, "metric"), ({"method": "bootstrap"}, "method"),
])
def test_every_weaker_dimension_is_named(change: dict, key: str) -> None:
    recorded = PromotionPolicy(levels=[1, 4], itl_p99_max_increase=0.5)
    now = recorded.model_copy(update=change)
    found = policy_weakenings(recorded, now)
    assert [w.split(":")[0] for w in found] == [f"policy.{key}"], found


def test_a_stricter_policy_is_not_a_weakening() -> None:
    recorded = PromotionPolicy()
    stricter = PromotionPolicy(min_gain=0.05, levels=[1, 4], confidence=0.99, min_rounds=5, min_requests=40,
                               error_cap=0.0, ttft_p99_max_increase=0.1, itl_p99_max_increase=0.2)
    assert policy_weakenings(recorded, stricter) == []


def test_bench_refuses_a_concurrency_override_that_drops_the_gated_level(tmp_path: Path) -> None:
    """`--concurrency 64` on a stack gating level 1 would be inconclusive by construction: exit 2 before running."""
    out = subprocess.run([sys.executable, "-m", "sglab.cli", "bench", "--stack", "eagle-nccl-ll", "--concurrency", "64",
                          "--out", str(tmp_path / "results"), "--no-progress"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "policy.levels" in out.stderr and "64" in out.stderr and "--concurrency" in out.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("result.json"))


def test_the_stack_refuses_gated_levels_the_plan_does_not_measure(tmp_path: Path) -> None:
    from sglab.core.errors import ConfigError
    from sglab.config.loader import load_stack

    stacks = tmp_path / "stacks"
    stacks.mkdir()
    text = (ROOT / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text()
    (stacks / "Pulumi.gated.yaml").write_text(text + "  sglab:policy:\n    levels: [64]\n")
    with pytest.raises(ConfigError) as err:
        load_stack("gated", tmp_path)
    assert "policy.levels" in str(err.value) and "64" in str(err.value)
    shutil.rmtree(stacks)
