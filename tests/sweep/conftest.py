"""A sweep stack in a temporary project: the shipped eagle-sweep stack with a test grid, and production."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from sglab.config import project_root

REPO_STACKS = project_root() / "stacks"


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
    (tmp_path / "stacks").mkdir()
    shutil.copy(REPO_STACKS / "Pulumi.production.yaml", tmp_path / "stacks")
    return tmp_path
