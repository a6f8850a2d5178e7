"""The SGLang collective facts live once, in sglab/sglang/collectives.py; the lints and the probe read them there."""

from __future__ import annotations

import pytest

from sglab.config import lints
from sglab.probe import plan
from sglab.sglang import collectives
from sglab.sglang.collectives import sglang_nccl_env

from .test_lints import ARGS_ON, arm


@pytest.mark.parametrize("flags, env", [
    ({}, {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}),
    ({"--enable-nccl-nvls": "true"}, {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "1"}),
    ({"--enable-symm-mem": "true"}, {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1"}),  # symm-mem implies NVLS
])
def test_the_values_sglang_gives_its_nccl_variables(flags, env):
    assert sglang_nccl_env(flags) == env
    assert plan.sglang_forced_env([flag for flag in flags]) == env


def test_lints_and_the_probe_read_the_facts_from_the_contract(monkeypatch):
    """Change a fact in sglab/sglang/collectives.py and both consumers follow."""
    monkeypatch.setattr(collectives, "CUSTOM_ALL_REDUCE_WORLD_SIZES", (2, 4, 6, 8, 16))
    monkeypatch.setattr(collectives, "CUSTOM_ALL_REDUCE_MAX_BYTES", 2 * 1024 * 1024)
    (lint,) = lints.lint_arms([arm({"NCCL_PROTO": "LL"}, ("--model-path", "/m", "--tp-size", "16"))])
    assert "2 MiB" in lint.message
    monkeypatch.setattr(collectives, "SGLANG_OWNED_NCCL_ENV", {**collectives.SGLANG_OWNED_NCCL_ENV,
                                                             "NCCL_FAKE_OWNED": "--enable-fake"})
    codes = {x.key: x
             for x in lints.lint_arms([arm({"NCCL_FAKE_OWNED": "1"}, ARGS_ON + ("--disable-custom-all-reduce",))])}
    assert "--enable-fake" in codes["nccl.NCCL_FAKE_OWNED"].fix
    assert plan.sglang_forced_env(["--enable-fake"])["NCCL_FAKE_OWNED"] == "1"


def test_no_second_copy_of_the_facts():
    """The lints and the probe plan name no SGLang fact themselves."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "sglab"
    for path in (root / "config" / "lints.py", root / "probe" / "plan.py"):
        text = path.read_text()
        for literal in ("8192 * 1024", '"--enable-symm-mem"', '"--enable-nccl-nvls"', "(2, 4, 6, 8)"):
            assert literal not in text, (path.name, literal)
