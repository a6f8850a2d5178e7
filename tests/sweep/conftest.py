"""A sweep stack in a temporary project: the shipped eagle-sweep stack with a test grid, and production."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from sglab.core.paths import project_root

REPO_STACKS = project_root() / "stacks"
# What makes a sweep stack a simulator stack, like the production of `root` (simulator evidence promotes only there).
SIM_STACK = {"backend": "sim", "placement": {"gpus-per-node": 0}}
# The TTFT p99 guard off: a confirmation of ~80 requests per arm gives the p99 ratio an interval about ±30% wide
# (measured [-2.1%, +63.3%] around +17.6%, and [+17.8%, +48.5%]), so a +20% or +50% cap is undecided by chance;
# these tests are about the sweep, the guard's decisions have their own (tests/analysis/test_guards.py).
NO_TTFT_GUARD = None


def write_stack(root: Path, name: str, sweep: dict | None, **keys) -> Path:
    """stacks/Pulumi.<name>.yaml: eagle-sweep with `sweep` as its sglab:sweep (None: no section)."""
    yaml = YAML()
    doc = yaml.load((REPO_STACKS / "Pulumi.eagle-sweep.yaml").read_text())
    config = doc["config"]
    if sweep is None:
        del config["sglab:sweep"]
    else:
        config["sglab:sweep"] = sweep
    for key, value in keys.items():
        config[f"sglab:{key}"] = value
    path = root / "stacks" / f"Pulumi.{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        yaml.dump(doc, fh)
    return path


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """With a production target that gates at concurrency 1 only, on output tok/s (the shipped one also gates
    at 4, where the simulator's speculation loses, so it would rightly refuse every arm of these grids), and
    runs the simulator (`sim_stack` keys make a sweep stack one too)."""
    (tmp_path / "stacks").mkdir()
    yaml = YAML()
    doc = yaml.load((REPO_STACKS / "Pulumi.production.yaml").read_text())
    doc["config"]["sglab:policy"]["levels"] = [1]
    doc["config"]["sglab:policy"]["metric"] = "output_tok_per_s"
    doc["config"]["sglab:policy"]["ttft-p99-max-increase"] = NO_TTFT_GUARD
    # The quick grid's confirmation is sized for the standard checks; the shipped production's strict ones promote
    # from round 20 only (docs/verdict.md (f)).
    doc["config"]["sglab:policy"]["checks"] = "standard"
    # A sweep's confirmation measures its arms in parallel (its slots are nodes of their own); the shipped production
    # asks for a crossover (policy.design), which these tests of the sweep do not carry out.
    doc["config"]["sglab:policy"]["design"] = "parallel"
    # A simulator production: sweep evidence measured on simulators promotes only into one (docs/promotion.md)
    doc["config"]["sglab:backend"] = "sim"
    doc["config"]["sglab:placement"] = {"gpus-per-node": 0}
    with open(tmp_path / "stacks" / "Pulumi.production.yaml", "w") as fh:
        yaml.dump(doc, fh)
    return tmp_path
