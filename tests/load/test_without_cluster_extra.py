"""`make install` leaves out the cluster tools (Pulumi, Helm, the Kubernetes clients: about half of the install):
everything `make demo` runs works without them, and a command that needs them says how to install them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sglab.cli import CLUSTER_MODULES

from .conftest import ROOT, child_env, run_dirs

# Imported first by the child (sitecustomize): any import of a cluster module fails as if it were not installed.
BLOCKER = f"""
import sys
BLOCKED = {sorted(CLUSTER_MODULES)!r}
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
"""


def sglab(args: list[str], blocker: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = child_env({"PYTHONPATH": f"{blocker}:{ROOT}"})
    return subprocess.run([sys.executable, "-m", "sglab.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_the_demo_runs_without_the_cluster_tools(tmp_path):
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    assert "needs the cluster tools" in sglab(["render", "--stack", "eagle-nccl-ll"], blocker).stderr  # it blocks

    validate = sglab(["validate", "--stack", "eagle-nccl-ll"], blocker)
    assert validate.returncode == 0, validate.stderr
    assert "pod security:" in validate.stdout and "cluster-scoped objects" in validate.stdout

    out = tmp_path / "results"
    bench = sglab(["bench", "--stack", "eagle-nccl-ll", "--target", "sim", "--out", str(out), "--no-progress",
                   "--prompts", "random", "--concurrency", "1", "--rounds", "2", "--round-s", "0.5",
                   "--warmup-requests", "1", "--max-new-tokens", "16", "--time-scale", "5", "--design", "parallel",
                   "--own-gate-only"], blocker, timeout=180)
    assert bench.returncode in (0, 1, 3), bench.stderr
    (run_dir,) = run_dirs(out, "eagle-nccl-ll")
    assert (run_dir / "report.html").is_file()

    dry_run = sglab(["promote", "--stack", "eagle-nccl-ll", "--result", str(run_dir), "--dry-run"], blocker)
    assert dry_run.returncode == 2 and "comes from simulators" in dry_run.stderr, dry_run.stderr
    assert "--help" not in sglab(["--help"], blocker).stderr


def test_a_command_that_needs_the_cluster_tools_says_how_to_install_them(tmp_path):
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    render = sglab(["render", "--stack", "eagle-nccl-ll"], blocker)
    assert render.returncode == 2
    assert render.stderr.startswith("error: sglab render needs the cluster tools")
    assert "make install-cluster" in render.stderr and "Traceback" not in render.stderr


def test_the_cluster_modules_are_what_the_cluster_extra_installs():
    """The CLI's list (by import name) and pyproject.toml's `cluster` extra (by distribution) name the same
    packages, so a package moved into the extra is also one the CLI explains."""
    import re
    import tomllib
    from importlib.metadata import packages_distributions

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cluster"]
    wanted = {re.split(r"[<>=!~ \[]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in extra}
    provided = {module: {d.lower().replace("_", "-") for d in dists}
                for module, dists in packages_distributions().items() if module in CLUSTER_MODULES}
    assert set(provided) == set(CLUSTER_MODULES)
    assert set().union(*provided.values()) == wanted
