"""Where the checkout and its stack files are; shared by config, results, promotion and the CLI."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The directory holding Pulumi.yaml (the checkout), found from this file."""
    return Path(__file__).resolve().parents[2]


def stacks_dir(root: Path | None = None) -> Path:
    """stacks/ of the checkout; SGLAB_STACKS_DIR overrides it (the in-cluster Job mounts its stack file there)."""
    env = os.environ.get("SGLAB_STACKS_DIR")
    if env and root is None:
        return Path(env)
    return (root or project_root()) / "stacks"


def stack_path(name: str, root: Path | None = None) -> Path:
    return stacks_dir(root) / f"Pulumi.{name}.yaml"


def list_stacks(root: Path | None = None) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir(root).glob("Pulumi.*.yaml"))
