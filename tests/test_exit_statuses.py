"""One table of exit statuses: every status a command, a judge or a Job returns is in it, each number means one
thing, and docs/troubleshooting.md shows the table as the code has it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sglab.core import errors
from sglab.serving import judge, watch

ROOT = Path(__file__).resolve().parents[1]
# Entry points that return an exit status; probe/nccl.py ships alone into the server image and says why it
# writes its number.
ENTRY_POINTS = [*sorted((ROOT / "sglab" / "cli").glob("*.py")), ROOT / "sglab/deploy/naming.py",
                ROOT / "sglab/deploy/disruption_guard.py", ROOT / "sglab/sim/cli_args.py", ROOT / "sglab/ui/web_tab.py"]


def test_each_code_has_one_name_and_one_meaning() -> None:
    codes = [s.code for s in errors.EXIT_STATUSES]
    names = [s.name for s in errors.EXIT_STATUSES]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)


def test_the_judges_statuses_are_the_tables() -> None:
    table = {s.code for s in errors.EXIT_STATUSES}
    assert set(judge.EXIT_CODES.values()) <= table and set(watch.EXIT_CODES.values()) <= table
    assert judge.EXIT_CODES["promote"] == errors.OK and judge.EXIT_CODES["abort"] == errors.NO
    assert watch.EXIT_CODES["unlike-configs"] == errors.UNLIKE


def test_no_entry_point_returns_a_bare_number_other_than_0() -> None:
    """`return 2`, `sys.exit(3)` or `SystemExit(130)` hide which row of the table they mean: each names it."""
    found = []
    for path in ENTRY_POINTS:
        for node in ast.walk(ast.parse(path.read_text())):
            value = None
            if isinstance(node, ast.Return):
                value = node.value
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "exit", "SystemExit"):
                value = node.args[0] if node.args else None
            if isinstance(value, ast.Constant) and isinstance(value.value, int) and value.value != 0 \
                    and not isinstance(value.value, bool) and _is_status(path, node):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def _is_status(path: Path, node: ast.AST) -> bool:
    """A return inside a function that returns exit statuses (run/main/the command functions), not a count."""
    source = path.read_text().splitlines()
    for line in reversed(source[: node.lineno]):
        match = re.match(r"\s*def (\w+)\(.*", line)
        if match:
            return "-> int" in line and not match.group(1).startswith("_count")
    return False


def test_the_troubleshooting_table_is_the_codes_table() -> None:
    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    shown = re.search(r"<!-- exit-statuses:begin -->\n(.*?)\n<!-- exit-statuses:end -->", text, re.S)
    assert shown is not None and shown.group(1) == errors.markdown_table(), "run python -m sglab.core.errors"
