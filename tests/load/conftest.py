"""Helpers: run `sglab bench` / `locust` as real subprocesses (gevent stays out of the pytest process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.sglang.env import without_server_env

ROOT = Path(__file__).resolve().parents[2]
# A fixed, simple timing profile: no communication, no scheduler overhead, so the model is exact:
# baseline inter-token gap = 20 ms at batch 1, prefill (TTFT) = 60 ms.
FIXED_PROFILE = ("scheduler_overhead_ms=0,target_fixed_compute_ms=20,target_per_token_compute_ms=0,"
                 "target_fixed_comm_ms=0,target_per_token_comm_ms=0,prefill_fixed_ms=60,prefill_per_token_ms=0")
FIXED_ITL_MS = 20.0
FIXED_TTFT_MS = 60.0


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = without_server_env(os.environ)
    env.update(extra or {})
    return env


def bench(args: list[str], out: Path, *, timeout: float = 240, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sglab.cli", "bench", "--out", str(out), "--no-progress", *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"sglab bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def locust_stats(json_file: Path) -> dict[tuple[str, str], dict]:
    """(method, name) -> entry of `locust --json-file`: written from the final stats at exit, where `--csv` holds
    its last once-a-second snapshot (a short run's only requests can finish after it)."""
    return {(entry["method"], entry["name"]): entry for entry in json.loads(json_file.read_text())}


def run_dirs(out: Path, stack: str) -> list[Path]:
    folder = out / stack
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def load(run_dir: Path) -> dict:
    return json.loads((run_dir / "result.json").read_text())


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "results"
