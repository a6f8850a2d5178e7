"""Pulumi.yaml is a valid Pulumi project file and points Pulumi at our stacks and venv."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from sglab.core.paths import project_root

REPO = project_root()
# Vendored into the repository (tests/data/README.md says from where): a clone needs nothing beside it.
SCHEMA = REPO / "tests" / "data" / "pulumi-project.schema.json"


def test_pulumi_yaml_matches_the_published_schema():
    assert SCHEMA.is_file(), f"missing {SCHEMA} (vendored test data, tests/data/README.md)"
    schema = json.loads(SCHEMA.read_text())
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    jsonschema.validate(project, schema)


def test_schema_check_can_fail():
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert list(validator.iter_errors({"name": "sglab", "runtime": 3}))
    errors = list(validator.iter_errors({"runtime": "python"}))
    assert errors


def test_project_layout():
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert project["name"] == "sglab"
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == ".venv"
    stacks = REPO / project["stackConfigDir"]
    assert stacks.is_dir() and list(stacks.glob("Pulumi.*.yaml"))
    main = (REPO / "__main__.py").read_text()
    assert "sglab.program" in main and "run()" in main
    assert Path(REPO / "charts" / "sglang-server" / "Chart.yaml").is_file()
