"""`sglab canary --stack production --target sim`: simulators, a real Prometheus, Locust split by weight, the judge.

Each run takes well under a minute on two cores: simulators at 4x, 5 s windows, Prometheus scraping every 1 s.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sglab.core.paths import project_root
from sglab.serving.prometheus import prometheus_binary
from sglab.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _prometheus_installed():
    prometheus_binary()  # the rehearsal needs the real server: make test installs it (tools/install-prometheus.sh)


def failing_stack(monkeypatch, tmp_path: Path, fault: str) -> None:
    """The checkout's stacks copied into a directory the command line is pointed at (SGLAB_STACKS_DIR, as a user
    does), with stack `failing`: the tuned config whose simulators inject `fault`."""
    root = tmp_path / "root"
    shutil.copytree(project_root() / "stacks", root / "stacks")
    tuned = (root / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text()
    (root / "stacks" / "Pulumi.failing.yaml").write_text(
        tuned.replace("  sglab:sim:\n", f"  sglab:sim:\n    faults:\n      {fault}\n", 1))
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(root / "stacks"))
    monkeypatch.setenv("SGLAB_RESULTS_DIR", str(root / "results"))


def rehearse(capsys, tmp_path: Path, *args: str) -> tuple[int, list[str], list[dict]]:
    log = tmp_path / "decisions.jsonl"
    code = main(["canary", "--stack", "production", "--target", "sim", "--log", str(log), *args])
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return code, lines, records


def test_a_better_canary_is_promoted(capsys, tmp_path):
    """Production runs the article's 5-step EAGLE-3; the candidate is the tuned 2-step one."""
    code, lines, records = rehearse(capsys, tmp_path, "--stable", "eagle-default", "--canary", "eagle-nccl-ll",
                                    "--users", "8", "--max-windows", "20")
    assert lines[-1].startswith("canary: promote"), "\n".join(lines[-6:])
    assert code == 0
    assert any(line.startswith("prometheus: http://127.0.0.1:") for line in lines)
    assert any(line.startswith("windows: ") and "paired" in line for line in lines)
    last = records[-1]
    assert last["outcome"] == "promote" and last["gain_low"] > 0
    # the numbers came from Prometheus: both revisions' windows hold the simulators' counters
    for arm in ("stable", "canary"):
        window = last["newest_window"][arm]
        assert window["requests"] > 0 and window["decode_tok_per_s"] > 0 and window["accept_length"] > 1


def test_a_worse_canary_is_never_promoted_and_its_windows_show_the_loss(capsys, tmp_path):
    """The article's 5-step EAGLE-3 (stacks/Pulumi.eagle-default.yaml) at concurrency 16 per pod, against the
    same server without speculation (what production served before it). Whether 20 windows of live timing on a
    shared machine suffice to abort is the judge's power, measured by benchmarks/canary_error_rates.py and on
    recorded windows in test_judge.py; here: it is never promoted, and it ends as the judge's exit code says."""
    code, lines, records = rehearse(capsys, tmp_path, "--stable", "eagle-default:baseline", "--canary",
                                    "eagle-default", "--users", "32", "--time-scale", "1.5", "--max-windows", "20")
    assert lines[-1].startswith(("canary: abort", "canary: continue")), "\n".join(lines[-6:])
    assert code == (1 if lines[-1].startswith("canary: abort") else 3)
    assert all(r["outcome"] != "promote" for r in records)
    assert records[-1]["gain"] < 0 and records[-1]["gain_low"] is not None


def test_an_aa_canary_is_not_promoted(capsys, tmp_path):
    code, lines, records = rehearse(capsys, tmp_path, "--stable", "production", "--canary", "production",
                                    "--users", "8", "--max-windows", "10")
    assert not lines[-1].startswith("canary: promote"), "\n".join(lines[-6:])
    assert lines[-1].startswith(("canary: abort", "canary: continue"))
    assert code in (1, 3)
    assert all(r["outcome"] != "promote" for r in records)


def test_a_canary_answering_30_percent_5xx_is_aborted(capsys, tmp_path, monkeypatch):
    """The tuned config, faster on the requests it serves, answers 30% of them with HTTP 500: SGLang's counters
    see none of those (its aborted count stays 0), the HTTP response counter the stack declares does."""
    failing_stack(monkeypatch, tmp_path, "error-rate: 0.3")
    code, lines, records = rehearse(capsys, tmp_path, "--stable", "eagle-default",
                                    "--canary", "failing", "--users", "8", "--max-windows", "20")
    assert lines[-1].startswith("canary: abort") and "error-rate" in lines[-1], "\n".join(lines[-6:])
    assert code == 1
    assert any(line.startswith("http errors: the simulators' sglab_sim_http_responses_total") for line in lines)
    canary = records[-1]["newest_window"]["canary"]
    assert canary["errors"] == 0 and canary["http_errors"] > 0 and 0.15 < canary["error_rate"] < 0.45


def test_a_canary_that_fails_every_request_in_half_its_windows_is_aborted(capsys, tmp_path, monkeypatch):
    """Down every other 5 s (the windows' length), up and faster in between: a window whose every request failed
    has no token to time, and it counts as the failure it is, never as a window skipped."""
    failing_stack(monkeypatch, tmp_path, "error-period-s: 5")
    code, lines, records = rehearse(capsys, tmp_path, "--stable", "eagle-default",
                                    "--canary", "failing", "--users", "8", "--max-windows", "20")
    assert lines[-1].startswith("canary: abort") and "error-rate" in lines[-1], "\n".join(lines[-6:])
    assert code == 1
    assert all(r["outcome"] != "promote" for r in records)
