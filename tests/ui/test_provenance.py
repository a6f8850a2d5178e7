"""Where an interactive run's arm URLs came from decides whether it can be evidence (no processes)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from sglab.schema.result import ArmInfo, RunResult
from sglab.ui.live import LiveRun

from .harness import LOCUSTFILE, ROOT

URLS = {"baseline": "http://127.0.0.1:30000", "candidate": "http://127.0.0.1:30001"}


def _result(**target) -> RunResult:
    arms = [ArmInfo(name=name, role=name, speculative=name == "candidate", config_hash=name, launch_command=name,
                    url=URLS[name]) for name in URLS]
    run = LiveRun(run_id="20260101T000000Z-abcdef", stack="eagle-nccl-ll", arms=arms,
                  started_at="2026-01-01T00:00:00+00:00", started_monotonic_s=100.0, **target)
    return run.to_result()


def test_urls_fixed_by_sglab_are_evidence():
    from sglab.report.provenance import refusal

    for kind in ("sim", "urls"):
        result = _result(target_kind=kind, urls_source="sglab")
        assert result.target.urls == URLS and result.target.urls_source == "sglab"
        assert refusal(result) is None


def test_urls_from_the_form_are_not_evidence():
    from sglab.report.provenance import refusal

    found = refusal(_result(target_kind="urls", urls_source="form"))
    assert found is not None and "form" in found.problem and "sglab ui" in found.fix


def test_an_interactive_result_without_a_url_source_is_not_evidence():
    """Results written before the source was recorded cannot show their URLs were not swapped."""
    from sglab.report.provenance import refusal

    legacy = json.loads(_result(target_kind="sim").model_dump_json())
    legacy["target"].pop("urls_source", None)
    loaded = RunResult.model_validate(legacy)  # old files still load
    assert loaded.target.urls_source is None
    found = refusal(loaded)
    assert found is not None and "where its arm URLs came from" in found.problem
    assert refusal(loaded.model_copy(update={"kind": "ab"})) is None  # bench runs are not this check's business


def test_in_cluster_urls_must_be_the_stacks_services():
    from sglab.report.provenance import refusal

    result = _result(target_kind="in-cluster", urls_source="locust")
    assert refusal(result, stack_urls=URLS) is None
    found = refusal(result, stack_urls={**URLS, "candidate": "http://sglab-candidate.x.svc:30000"})
    assert found is not None and "candidate" in found.problem
    assert refusal(result) is not None  # no stack URLs to compare with: not evidence


def test_locustfile_does_not_import_the_ui():
    tree = ast.parse(LOCUSTFILE.read_text())
    modules = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    modules += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [m for m in modules if m.startswith("sglab.ui")], modules
    # nor anything it imports, at run time
    probe = ("import runpy, sys; runpy.run_path(sys.argv[1]); "
             "print(sorted(m for m in sys.modules if m.startswith('sglab.ui')))")
    out = subprocess.run([sys.executable, "-c", probe, str(LOCUSTFILE)], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("value", ["sglab", "locust", "form", None])
def test_url_source_round_trips(value):
    result = _result(target_kind="urls", urls_source=value)
    assert RunResult.model_validate_json(result.model_dump_json()).target.urls_source == value


def test_a_url_from_the_form_is_recorded_printable_so_its_result_loads(monkeypatch):
    """Locust's options and the web-UI form are untrusted text: the run records the URL with its control
    characters escaped, since a result refuses them where it is built and read."""
    from types import SimpleNamespace

    from sglab.ui.session import UiSession

    monkeypatch.delenv("SGLAB_BASELINE_URL", raising=False)
    monkeypatch.setenv("SGLAB_CANDIDATE_URL", "http://127.0.0.1:30001")
    options = SimpleNamespace(baseline_url="http://127.0.0.1:30000\x1b[2K\u202e", candidate_url=None)
    session = SimpleNamespace(environment=SimpleNamespace(parsed_options=options),
                              stack=SimpleNamespace(arms={"baseline": None, "candidate": None}))
    urls = UiSession.arm_urls(session)
    assert urls == {"baseline": "http://127.0.0.1:30000\\x1b[2K\\u202e", "candidate": "http://127.0.0.1:30001"}
    arms = [ArmInfo(name=name, role=name, speculative=name == "candidate", config_hash=name, launch_command=name,
                    url=urls[name]) for name in urls]
    run = LiveRun(run_id="20260101T000000Z-abcdef", stack="eagle-nccl-ll", arms=arms,
                  started_at="2026-01-01T00:00:00+00:00", started_monotonic_s=100.0, target_kind="urls",
                  urls_source="form")
    assert RunResult.model_validate_json(run.to_result().model_dump_json()).target.urls == urls
