"""The import rules of docs/architecture.md, and "one declaration in one file" shown end to end."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

from sglab.paths import project_root

ROOT = project_root()


def imported_modules(directory: Path, root: Path = ROOT) -> dict[str, set[str]]:
    """file (relative) -> every absolute module name it imports (top level or inside functions)."""
    out: dict[str, set[str]] = {}
    for path in sorted(directory.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        out[str(path.relative_to(root))] = names
    return out


def offenders(directory: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = (), root: Path = ROOT) -> list[str]:
    found = []
    for file, names in imported_modules(root / directory, root).items():
        for name in sorted(names):
            if name.startswith(forbidden) and not name.startswith(allowed):
                found.append(f"{file} imports {name}")
    return found


def test_the_sglang_contract_imports_nothing_else_from_sglab():
    assert offenders("sglab/sglang", ("sglab",), allowed=("sglab.sglang",)) == []


def test_results_import_neither_config_nor_deploy():
    assert offenders("sglab/results", ("sglab.config", "sglab.deploy")) == []


def test_analysis_imports_neither_the_sweep_nor_the_report():
    """Statistics and the verdict sit below the sweep and the report (issue 18): the console table is
    sglab.report.table, the bench's sequential runner sglab.load.sequential."""
    assert offenders("sglab/analysis", ("sglab.sweep", "sglab.report", "sglab.cli")) == []


def test_the_bench_sequential_runner_lives_with_the_load_runner():
    assert not (ROOT / "sglab" / "sweep" / "sequential.py").exists()
    assert (ROOT / "sglab" / "load" / "sequential.py").is_file()
    assert offenders("sglab/load", ("sglab.sweep", "sglab.report")) == []


def test_loadtests_do_not_import_the_ui():
    assert offenders("loadtests", ("sglab.ui",)) == []


def test_no_module_under_sglab_is_over_about_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "sglab").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}


def test_the_forbidden_import_check_can_fail(tmp_path):
    """The checker above sees imports inside functions too, so a passing rule means something."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    from sglab.config import loader\n")
    assert offenders("pkg", ("sglab.config",), root=tmp_path) == ["pkg/m.py imports sglab.config", "pkg/m.py imports sglab.config.loader"]


STACK = """config:
  sglab:backend: sim
  sglab:model: {path: /models/m}
  sglab:server: {max-running-requests: 8}
  sglab:nccl: {NCCL_PROTO: LL, NCCL_FAKE_KNOB: %s}
  sglab:candidate:
    speculative: {algorithm: EAGLE3, draft-model-path: /models/d, num-steps: 2, eagle-topk: 1, num-draft-tokens: 3}
  sglab:placement: {gpus-per-node: 0}
"""


def test_a_new_nccl_key_is_one_declaration(tmp_path, monkeypatch):
    """Declared once in sglab/sglang/nccl.py: validated, normalised, rendered, documented, read by the sim."""
    from sglab.config import baseline_arm, candidate_arm, load_stack
    from sglab.config.loader import ConfigError, UnknownNcclKeyWarning
    from sglab.config.reference import nccl_rows
    from sglab.sglang import nccl
    from sglab.sim.cli_args import parse_sim_args

    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    (tmp_path / "Pulumi.fake.yaml").write_text(STACK % "maybe")
    loaded = load_stack("fake")  # not declared yet: passed through with a warning
    assert any("NCCL_FAKE_KNOB" in w for w in loaded.warnings)

    monkeypatch.setattr(nccl, "NCCL_VARS", nccl.NCCL_VARS + (nccl.NcclVar("NCCL_FAKE_KNOB", "choice", ("On", "Off")),))
    with pytest.raises(ConfigError) as refused:
        load_stack("fake")
    assert "sglab:nccl.NCCL_FAKE_KNOB" in str(refused.value) and "'On', 'Off'" in str(refused.value)

    (tmp_path / "Pulumi.fake.yaml").write_text(STACK % "on")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownNcclKeyWarning)
        loaded = load_stack("fake")
    assert loaded.warnings == []
    stack = loaded.config
    for arm in (baseline_arm(stack), candidate_arm(stack)):
        assert arm.env["NCCL_FAKE_KNOB"] == "On"  # normalised to the declared spelling, in both arms
        assert "NCCL_FAKE_KNOB=On" in arm.launch_command
        assert parse_sim_args(list(arm.args), env=arm.env).nccl_env["NCCL_FAKE_KNOB"] == "On"
    assert ("NCCL_FAKE_KNOB", "`On` \\| `Off` (any case; written as shown)") in nccl_rows()


def test_a_new_sglang_flag_is_one_declaration(tmp_path, monkeypatch):
    """Declared once in sglab/sglang/flags.py: aliases and abbreviations resolve, managed flags are refused."""
    from sglab.cli import main
    from sglab.config import confounds, load_stack
    from sglab.sglang import flags

    monkeypatch.setattr(flags, "FLAGS", flags.FLAGS + (
        flags.Flag("--fake-window-size", int, aliases=("--fake-window",), nargs="+"),
        flags.Flag("--fake-managed-knob", int, managed_by="server.fake-managed-knob")))
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    text = STACK % "on"
    (tmp_path / "Pulumi.fake.yaml").write_text(text.replace(
        "{max-running-requests: 8}", "{max-running-requests: 8, extra-args: [--fake-window-s, '1']}").replace(
        "num-draft-tokens: 3}", "num-draft-tokens: 3}\n    confounds: {server: {extra-args: [--fake-window, '1', '2']}}"))
    found = {c.key: (c.baseline, c.candidate) for c in confounds(load_stack("fake").config)}
    assert found == {"server --fake-window-size": ("1", "1 2")}

    (tmp_path / "Pulumi.bad.yaml").write_text(text.replace(
        "{max-running-requests: 8}", "{max-running-requests: 8, extra-args: [--fake-managed, '3']}"))
    assert main(["validate", "--stack", "bad"]) == 2
