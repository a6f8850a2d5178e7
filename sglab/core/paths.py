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


# Stack files named by path on the command line (`--stack ./my-stack.yaml`): name -> file.
_STACK_FILES: dict[str, Path] = {}


def stack_path(name: str, root: Path | None = None) -> Path:
    if root is None and name in _STACK_FILES:
        return _STACK_FILES[name]
    return stacks_dir(root) / f"Pulumi.{name}.yaml"


def is_stack_file(value: str) -> bool:
    """Whether a `--stack` value names a file (a path or a .yaml name) rather than a stack under stacks/."""
    return "/" in value or os.sep in value or value.endswith((".yaml", ".yml"))


def use_stack_file(value: str) -> str:
    """`--stack PATH`: the stack's name (the file name without `Pulumi.` and `.yaml`, as Pulumi names stacks),
    with PATH registered as that stack's file for this process; a name is returned as it is. The loader
    reports a missing file or a name that is no stack name."""
    if not is_stack_file(value):
        return value
    path = Path(value).expanduser().resolve()
    name = path.name
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    name = name.removeprefix("Pulumi.")
    _STACK_FILES[name] = path
    return name


def list_stacks(root: Path | None = None) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir(root).glob("Pulumi.*.yaml"))
