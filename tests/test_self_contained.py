"""The repository stands alone: no tracked file builds a path that leaves the checkout.

A user's clone has nothing beside it (no shared folder one level up), so a test, script or Makefile target that reads
from above the repository root fails for every user but this project's CI.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sglab.core.paths import project_root

REPO = project_root()

# A `shared/` folder beside the checkout, by any spelling of the way up.
_SHARED_BESIDE = [
    re.compile(r"\.\.[/\\]+shared\b"),                                  # dot-dot, a slash, shared (either slash)
    re.compile(r"""["']\.\.["']\s*[/,]\s*["']shared["']"""),             # a quoted dot-dot joined to a quoted shared
    re.compile(r"""\.parent\s*/\s*["']shared["']"""),                    # root.parent / "shared"
]
# A step above a root-like base: REPO / "..", project_root() / "..", os.path.join(ROOT, "..").
_ABOVE_ROOT = re.compile(
    r"""(?:\b(?:REPO|ROOT|REPO_ROOT|PROJECT_ROOT)\b|project_root\(\)|\$\(CURDIR\))\s*(?:/\s*|,\s*)["']?\.\.(?:["'/]|$)""")
_PARENTS_INDEX = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")
_PARENT_CHAIN = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?((?:\.parent)+)\b")

_TEXT_SUFFIXES = {".py", ".sh", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".txt", ".json", ".jsonl", ".tpl", ""}


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60)
        names = [n for n in out.stdout.decode().split("\0") if n]
    except (OSError, subprocess.SubprocessError):  # an exported tree without .git: every file under the root
        names = [str(p.relative_to(REPO)) for p in REPO.rglob("*")
                 if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts]
    return [REPO / n for n in names if (REPO / n).suffix in _TEXT_SUFFIXES or (REPO / n).name == "Makefile"]


def path_escapes(relative: str, text: str) -> list[str]:
    """The lines of `text` (a file at `relative` in the repo) that build a path leaving the checkout."""
    depth = len(Path(relative).parts) - 1  # directories between the repo root and the file
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        why = None
        if any(p.search(line) for p in _SHARED_BESIDE):
            why = "a shared/ folder beside the checkout"
        elif _ABOVE_ROOT.search(line):
            why = "a step above the repository root"
        else:
            for m in _PARENTS_INDEX.finditer(line):
                if int(m.group(1)) > depth:
                    why = f"parents[{m.group(1)}] of a file {depth} level(s) below the root"
            for m in _PARENT_CHAIN.finditer(line):
                # Path(__file__).parent is the file's directory; n .parent steps go n-1 directories up.
                if m.group(1).count(".parent") - 1 > depth:
                    why = f"{m.group(1).count('.parent')} .parent steps from a file {depth} level(s) below the root"
        if why:
            found.append(f"{relative}:{number}: {why}: {line.strip()}")
    return found


def test_no_tracked_file_builds_a_path_outside_the_checkout():
    found = []
    for path in _tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if path.resolve() == Path(__file__).resolve():
            continue  # this file spells the patterns out
        found += path_escapes(str(path.relative_to(REPO)), text)
    assert not found, "paths that leave the checkout (vendor what they need into the repo):\n" + "\n".join(found)


def test_the_check_can_fail():
    """Each way out seen or plausible is caught; paths inside the checkout are not."""
    up, shared = "..", "shared"  # spelled apart, so this file itself reads nothing from beside the checkout
    outside = {
        "tests/deploy/test_x.py": f'SCHEMA = REPO / "{up}" / "{shared}" / "data" / "schema.json"',
        "tests/test_y.py": 'DATA = Path(__file__).resolve().parents[2] / "data"',
        "benchmarks/z.py": 'os.path.join(ROOT, "..", "other", "file")',
        "Makefile": f"\tcp {up}/{shared}/data/x.json tests/data/",
        "tools/a.sh": f'python3 "$here/{up}/{shared}/tools/import-circles.py"',
        "sglab/b.py": 'here = Path(__file__).parent.parent.parent / "x"',
        "sglab/c.py": 'p = project_root().parent / "shared" / "data"',
    }
    for relative, line in outside.items():
        assert path_escapes(relative, line), (relative, line)
    inside = {
        "tests/load/conftest.py": "ROOT = Path(__file__).resolve().parents[2]",
        "sglab/core/paths.py": "return Path(__file__).resolve().parents[1]",
        "tests/deploy/test_pulumi_project.py": 'SCHEMA = REPO / "tests" / "data" / "pulumi-project.schema.json"',
        "tests/deploy_extras/test_pull.py": 'escape = json.loads(text) | {"run_id": "../../etc"}',
        "sglab/cli/bench.py": "base_dir = loaded.path.parent.parent",
    }
    for relative, line in inside.items():
        assert not path_escapes(relative, line), (relative, line)
