"""The import rules of docs/architecture.md, and "one declaration in one file" shown end to end."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

from sglab.core.paths import project_root

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


def offenders(directory: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = (),
              root: Path = ROOT) -> list[str]:
    found = []
    for file, names in imported_modules(root / directory, root).items():
        for name in sorted(names):
            if name.startswith(forbidden) and not name.startswith(allowed):
                found.append(f"{file} imports {name}")
    return found


FEATURES = ("sglab.bench", "sglab.sweep", "sglab.serving", "sglab.probe", "sglab.promotion", "sglab.ui",
            "sglab.cli", "sglab.program")
# deploy/'s assembly: the modules that put the features' objects into one Pulumi program. Every other deploy
# module is a primitive the features build on (names and the image, objects and Jobs, the namespace).
DEPLOY_ASSEMBLY = ("plan.py", "render.py", "values.py", "capacity.py", "benchmark_job.py")


def test_the_ground_floor_imports_nothing_above_it():
    assert offenders("sglab/core", ("sglab",), allowed=("sglab.core",)) == []
    # sglang/client.py reads a server's answer through the one bounded JSON reader, which imports only core.
    assert offenders("sglab/sglang", ("sglab",), allowed=("sglab.sglang", "sglab.core.untrusted_json")) == []


def test_the_result_document_stands_on_the_ground_floor_only():
    assert offenders("sglab/schema", ("sglab",), allowed=("sglab.schema", "sglab.core", "sglab.sglang")) == []


def test_the_metric_registry_reads_only_the_result_document():
    assert offenders("sglab/metrics", ("sglab",), allowed=("sglab.metrics", "sglab.schema.result")) == []


def test_the_layers_import_no_feature_package():
    """Config, load, analysis, results, report and the simulator sit below every feature that spans layers."""
    for layer in ("config", "load", "metrics", "analysis", "results", "report", "sim", "schema", "core", "sglang"):
        assert offenders(f"sglab/{layer}", FEATURES + ("sglab.deploy",)) == [], layer


def test_only_the_deploy_assembly_reads_the_features():
    found = [line for line in offenders("sglab/deploy", FEATURES)
             if line.split(" imports ")[0].rsplit("/", 1)[1] not in DEPLOY_ASSEMBLY]
    assert found == []


def test_the_package_root_holds_no_feature_module():
    assert sorted(p.name for p in (ROOT / "sglab").glob("*.py")) == ["__init__.py", "program.py"]


def test_loadtests_do_not_import_the_ui():
    assert offenders("loadtests", ("sglab.ui",)) == []


def test_the_forbidden_import_check_can_fail(tmp_path):
    """The checker above sees imports inside functions too, so a passing rule means something."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    from sglab.config import loader\n")
    assert offenders("pkg", ("sglab.config",), root=tmp_path) == ["pkg/m.py imports sglab.config",
                                                                  "pkg/m.py imports sglab.config.loader"]


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
    from sglab.core.errors import ConfigError
    from sglab.config.loader import UnknownNcclKeyWarning
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
        "num-draft-tokens: 3}",
        "num-draft-tokens: 3}\n    confounds: {server: {extra-args: [--fake-window, '1', '2']}}"))
    found = {c.key: (c.baseline, c.candidate) for c in confounds(load_stack("fake").config)}
    assert found == {"server --fake-window-size": ("1", "1 2")}

    (tmp_path / "Pulumi.bad.yaml").write_text(text.replace(
        "{max-running-requests: 8}", "{max-running-requests: 8, extra-args: [--fake-managed, '3']}"))
    assert main(["validate", "--stack", "bad"]) == 2
