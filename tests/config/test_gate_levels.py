"""policy.levels must be levels the stack's load profile measures (concurrency or requests/s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.core.errors import ConfigError
from sglab.config.loader import load_stack
from sglab.core.paths import project_root

BASE = (project_root() / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text().split("  sglab:load:")[0]  # its own load


def stack_with(tmp_path: Path, extra: str):
    path = tmp_path / "Pulumi.lab.yaml"
    path.write_text(BASE + extra)
    return load_stack("lab", path=path)


RATE = "  sglab:load:\n    profile: rate\n    rate:\n      levels: [2, 8]\n"


def test_a_rate_stack_gates_on_its_request_rates(tmp_path):
    loaded = stack_with(tmp_path, RATE + "  sglab:policy:\n    levels: [2]\n")
    assert loaded.config.policy.levels == [2]


def test_a_rate_stack_cannot_gate_on_a_rate_it_never_runs(tmp_path):
    with pytest.raises(ConfigError) as exc:
        stack_with(tmp_path, RATE + "  sglab:policy:\n    levels: [1]\n")
    assert exc.value.key == "sglab:policy.levels" and "load.rate.levels" in str(exc.value)
