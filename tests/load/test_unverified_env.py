"""What the live-flag check cannot verify is said: SGLang does not report its environment, so an arm's declared
NCCL_* settings are trusted, not checked, against a real server; the result records which and every output that
names the machines says so. sglab's simulator reports its NCCL env, so nothing is unverified there."""

from __future__ import annotations

from sglab.analysis.synthetic import synthetic_result
from sglab.config import baseline_arm, load_stack
from sglab.load.targets import unverified
from sglab.report.provenance import machine_lines
from sglab.sglang.client import ServerInfo


def test_a_server_that_reports_no_environment_leaves_the_declared_nccl_settings_unverified() -> None:
    arm = baseline_arm(load_stack("eagle-nccl-ll").config)
    declared = {k: v for k, v in arm.env.items() if k.startswith("NCCL_")}
    assert declared  # the stack tunes NCCL on both arms
    sglang = ServerInfo("http://gpu-node:30000", {"model_path": "/shared/kimi", "version": "0.5.23"})
    assert unverified(arm, sglang) == [f"{k}={v}" for k, v in sorted(declared.items())]
    simulator = ServerInfo("http://127.0.0.1:30000", {"sglab_sim": {"nccl_env": declared}})
    assert unverified(arm, simulator) == []


def test_the_machine_lines_say_what_was_trusted() -> None:
    result = synthetic_result(levels=(1,), rounds=2, producer="sglang")
    result.arms[0].unverified = ["NCCL_PROTO=LL", "NCCL_ALGO=Ring"]
    lines = machine_lines(result)
    line = next(x for x in lines if x.startswith(f"unverified {result.arms[0].name}: "))
    assert "NCCL_PROTO=LL, NCCL_ALGO=Ring" in line and "does not report" in line and "trusted" in line
    assert not [x for x in lines if x.startswith(f"unverified {result.arms[1].name}")]
