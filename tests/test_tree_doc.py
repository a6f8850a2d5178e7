"""docs/architecture.md draws the tree as it is: every module of sglab/ is named under its package, every module it
names exists, and the sizes it states (modules, stack keys, command-line options) are today's."""

from __future__ import annotations

import argparse
import re

from sglab.cli import build_parser
from sglab.config.reference import rows
from sglab.core.paths import project_root

ROOT = project_root()
DOC = ROOT / "docs" / "architecture.md"


def tree_block(text: str) -> list[str]:
    """The lines of the first code block after the heading "## The tree, in import order"."""
    after = text.split("## The tree, in import order", 1)[1]
    return after.split("```", 2)[1].splitlines()


def documented_modules(lines: list[str]) -> set[str]:
    """Module paths under sglab/ the tree names: `  pkg/` opens a package (2 spaces), and the `x.py` words that
    begin a line indented 4 or more are its modules; `  program.py` is a module at the root."""
    found: set[str] = set()
    package: str | None = None
    for line in lines:
        top = re.match(r"^  ([a-z_][a-z0-9_/]*/)(\s|$)", line)
        if top:
            package = top.group(1)
            continue
        root_module = re.match(r"^  ([a-z_]+\.py)\b", line)
        if root_module:
            found.add(root_module.group(1))
            package = None
            continue
        if package and re.match(r"^ {4,}\S", line):
            for word in line.split():
                if not word.endswith(".py"):
                    break
                found.add(package + word)
        if re.match(r"^\S", line):  # a top-level name (loadtests/, charts/, ...) ends sglab/'s tree
            package = None if not line.startswith("sglab/") else package
    return found


def actual_modules() -> set[str]:
    return {str(p.relative_to(ROOT / "sglab")) for p in (ROOT / "sglab").rglob("*.py")
            if p.name != "__init__.py"}


def module_count() -> int:
    return sum(1 for _ in (ROOT / "sglab").rglob("*.py"))


def stack_key_count() -> int:
    """The key reference's rows that take a value (a section row only groups keys)."""
    return sum(1 for row in rows() if row[1] != "section")


def cli_option_count() -> int:
    """Options over every command and sub-command, --help left out."""
    def options(parser: argparse.ArgumentParser) -> int:
        n = 0
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                n += sum(options(p) for p in {id(p): p for p in action.choices.values()}.values())
            elif action.option_strings and not isinstance(action, argparse._HelpAction):
                n += 1
        return n
    return options(build_parser())


def test_the_tree_names_every_module_and_only_modules_that_exist() -> None:
    documented = documented_modules(tree_block(DOC.read_text()))
    actual = actual_modules()
    assert not actual - documented, f"modules the tree (docs/architecture.md) omits: {sorted(actual - documented)}"
    assert not documented - actual, f"modules the tree names that do not exist: {sorted(documented - actual)}"


def test_the_stated_sizes_are_todays() -> None:
    text = DOC.read_text()
    stated = {what: int(n) for n, what in re.findall(r"\*\*(\d+) (modules|stack keys|command-line options)\*\*", text)}
    assert stated == {"modules": module_count(), "stack keys": stack_key_count(),
                      "command-line options": cli_option_count()}


def test_the_tree_reader_sees_a_missing_and_a_stray_module() -> None:
    lines = ["sglab/", "  core/        the ground floor", "    errors.py paths.py  how sglab fails; where files are",
             "  program.py   the Pulumi program", "loadtests/", "    locustfile.py"]
    assert documented_modules(lines) == {"core/errors.py", "core/paths.py", "program.py"}


PACKAGES = "|".join(sorted(p.name for p in (ROOT / "sglab").iterdir() if (p / "__init__.py").exists()))


def missing_code_paths(text: str) -> list[str]:
    """The `sglab/<pkg>/<module>.py` and `<pkg>/<module>.py` paths a text names that are not in the checkout."""
    named = set(re.findall(rf"\bsglab/((?:{PACKAGES})/[a-z_]+\.py)", text))
    named |= set(re.findall(rf"(?<![\w/.-])((?:{PACKAGES})/[a-z_]+\.py)", text))
    return sorted(p for p in named if not p.split("/")[-1].startswith("test_") and not (ROOT / "sglab" / p).exists())


def test_the_docs_name_only_modules_that_exist() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    missing = {str(d.relative_to(ROOT)): found for d in docs if (found := missing_code_paths(d.read_text()))}
    assert not missing, f"docs naming modules that do not exist (moved or merged?): {missing}"


def test_the_docs_check_sees_a_module_that_does_not_exist() -> None:
    assert missing_code_paths("see sglab/load/server_info.py and config/speculative.py, not load/runner.py") == [
        "config/speculative.py", "load/server_info.py"]
