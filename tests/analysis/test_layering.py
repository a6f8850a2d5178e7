"""Import rules of the ground floor: results/ imports neither config nor deploy; metrics/ only results.schema."""

from __future__ import annotations

import ast
from pathlib import Path

SGLAB = Path(__file__).parents[2] / "sglab"


def _sglab_imports(folder: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted((SGLAB / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        out[path.name] = {n for n in names if n == "sglab" or n.startswith("sglab.")}
    return out


def test_results_imports_neither_config_nor_deploy() -> None:
    found = _sglab_imports("results")
    assert {"schema.py", "records.py", "verdict.py", "store.py", "pull.py", "sink.py"} <= set(found)
    bad = {f: sorted(n for n in names if n.startswith(("sglab.config", "sglab.deploy")))
           for f, names in found.items()}
    assert not {f: n for f, n in bad.items() if n}


def test_metrics_import_only_the_result_schema() -> None:
    found = _sglab_imports("metrics")
    allowed = {"sglab.results.schema"}
    bad = {f: sorted(n for n in names if n not in allowed and not n.startswith("sglab.metrics"))
           for f, names in found.items()}
    assert not {f: n for f, n in bad.items() if n}
