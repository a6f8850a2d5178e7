"""Where the checkout and its stack files are, and how sglab writes a file: atomically (results, state, stacks)
or as a generated file (docs tables, charts' values.yaml) rewritten or checked against the model it comes from."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str, *, overwrite: bool = True) -> Path:
    """Write `text` to a temporary file beside `path`, fsync it, then move it into place, so a reader sees the old
    file or the new one, never part of one. `overwrite=False` refuses a file that exists (also one that appears
    meanwhile: FileExistsError). A replaced file keeps its permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not overwrite and path.exists():
        raise FileExistsError(f"{path} exists")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if overwrite:
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o777)
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if path appeared meanwhile
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_or_check(files: dict[Path, str] | dict[str, str], command: str, argv: list[str] | None = None) -> int:
    """With --check: exit status 1 and a hint when any file differs; otherwise rewrite the ones that differ."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for path, text in files.items():
        path = Path(path)
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if check:
            stale.append(path)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    for path in stale:
        print(f"{path} is out of date; run: {command}", file=sys.stderr)
    return 1 if stale else 0


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
