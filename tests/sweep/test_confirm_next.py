"""After a sweep's confirmation, the `next:` command is the one that can work: a confirmation run is only promoted
with `--result` (sglab/sweep/confirm.py refuses it as the newest run), so that is what it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.bench.sequential import judge_and_report
from sglab.schema.result import SweepConfirmation

RECORD = SweepConfirmation.model_validate({
    "sweep_run_id": "20260101T000000Z-sweep",
    "arm": {"name": "s5-k1-d6-LL", "num_steps": 5, "eagle_topk": 1, "num_draft_tokens": 6, "adaptive": False,
            "variant": "LL", "nccl": {"NCCL_PROTO": "LL"}, "config_hash": "c" * 64}})


def confirmation(sweep: SweepConfirmation | None, producer: str = "sglang"):
    result = synthetic_result(levels=(1,), rounds=20, gain=0.10, round_cv=0.01, stack="eagle-sweep",
                              producer=producer)
    result.sweep = sweep
    return result


def test_a_confirmations_next_step_names_its_result(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert judge_and_report(confirmation(RECORD), tmp_path) == "promote"
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("next: ")]
    assert lines == [f"next: sglab promote --stack eagle-sweep --result {tmp_path} --dry-run"]
    assert f"--result {tmp_path} --dry-run" in (tmp_path / "report.html").read_text()


def test_a_plain_ab_keeps_its_next_step(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert judge_and_report(confirmation(None), tmp_path) == "promote"
    assert "next: sglab promote --stack eagle-sweep --dry-run" in capsys.readouterr().out.splitlines()


def test_a_simulator_confirmation_names_real_evidence(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """eagle-sweep promotes into production, a GPU stack, which refuses simulator evidence: next names real
    evidence, not that promotion."""
    assert judge_and_report(confirmation(RECORD, "simulator"), tmp_path) == "promote"
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("next: ")]
    assert line.startswith("next: measure the real servers: `pulumi up --stack eagle-sweep`")
    assert "sglab promote --stack eagle-sweep --result" not in line
