"""The pinned SGLang's real parser, in its own virtualenv (.venv-sglang, built by tools/sglang-contract-venv.sh).

`make test` builds it first (target sglang-contract-venv); run alone, the fixture builds it (a few minutes,
once; the stamp keeps it between runs).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from sglab.config.arms import ArmSpec
from sglab.core.paths import project_root

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
VENV = project_root() / ".venv-sglang"
BUILD = project_root() / "tools" / "sglang-contract-venv.sh"
TARGET_FIXTURE = FIXTURES / "kimi-k2.5"
DRAFT_FIXTURE = FIXTURES / "kimi-k2.5-eagle3"
# The device SGLang detects on the GPU node (this machine has none; `--device` is the one flag added).
DEVICE = "cuda"

Run = Callable[[Iterable[dict[str, Any]]], list[dict[str, Any]]]


def fixture_args(args: Iterable[str], draft: Path = DRAFT_FIXTURE) -> list[str]:
    """The launch args with the model and draft paths pointing at the checkpoint configs of fixtures/."""
    out = list(args)
    for i, token in enumerate(out[:-1]):
        if token == "--model-path":
            out[i + 1] = str(TARGET_FIXTURE)
        elif token == "--speculative-draft-model-path":
            out[i + 1] = str(draft)
    return out


def command(name: str, arm: ArmSpec | None = None, *, args: Iterable[str] | None = None,
            env: dict[str, str] | None = None, draft: Path = DRAFT_FIXTURE) -> dict[str, Any]:
    return {"name": name, "args": fixture_args(arm.args if arm else args or (), draft),
            "env": dict(arm.env) if arm else dict(env or {})}


def _driver(request: dict[str, Any]) -> Any:
    python = VENV / "bin" / "python"
    done = subprocess.run([str(python), str(HERE / "sglang_driver.py")], input=json.dumps(request),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"the SGLang driver failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def sglang_venv() -> Path:
    built = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=1800)
    if built.returncode != 0:
        sys.stderr.write(built.stderr[-4000:])
    assert built.returncode == 0, "could not build .venv-sglang (tools/sglang-contract-venv.sh)"
    return VENV


@pytest.fixture(scope="session")
def sglang_launch(sglang_venv: Path) -> Run:
    """Parse + resolve commands with the pinned SGLang: one process for all of them."""
    def run(commands: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return _driver({"mode": "launch", "commands": list(commands), "device": DEVICE})
    return run


@pytest.fixture(scope="session")
def sglang_parser(sglang_venv: Path) -> dict[str, Any]:
    return _driver({"mode": "parser"})
