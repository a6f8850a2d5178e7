"""The probe's own code path on CPU: gloo, 2 processes, eager (the same worker, runner, result and table as on GPUs).

Also runs it the way the cluster Job does: from the modules the probe ConfigMap ships, on PYTHONPATH, with
the spec rendered for the stack, so a probe module importing anything the server image lacks fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.config.loader import load_stack
from sglab.probe.job import SOURCE_MOUNT, SPEC_KEY, probe_command, probe_plan
from sglab.probe.result import load_probe
from sglab.probe.spec import ProbeRunSpec

STACK = "eagle-nccl-ll"
SMOKE_ARGS = ["--backend", "gloo", "--world-size", "2", "--samples", "8"]


def require_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("torch is missing in CI: the test extra pins torch==2.13.0 (pip install -e '.[test]')")
        pytest.skip("torch is not installed here: pip install torch==2.13.0 (the test extra) runs this smoke test")


def _check(result_path: Path, spec: ProbeRunSpec) -> None:
    result = load_probe(result_path)
    assert result.complete and result.backend == "gloo" and result.mode == "eager" and result.world_size == 2
    assert [v.name for v in result.variants] == [v.name for v in spec.variants]
    for v in result.variants:
        assert v.env == spec.variant(v.name).env and v.env["NCCL_NVLS_ENABLE"] == "0"
        assert [s.bytes for s in v.sizes] == [s.bytes for s in spec.sizes]
        for s in v.sizes:
            assert s.correct and s.samples == 8 and len(s.times_us) == 8
            assert 0 < s.ci_low_us <= s.median_us <= s.ci_high_us


def test_probe_runs_on_gloo_with_two_processes(tmp_path):
    require_torch()
    out = tmp_path / "probe.json"
    proc = subprocess.run([sys.executable, "-m", "sglab.probe.nccl", "--stack", STACK, *SMOKE_ARGS, "--out", str(out)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from sglab.probe.plan import probe_spec

    spec = probe_spec(load_stack(STACK).config, STACK, backend="gloo", world_size=2)
    _check(out, spec)
    assert "| 14 KiB" in proc.stdout and "nccl-default" in proc.stdout and "arms" in proc.stdout
    assert "NCCL settings have no effect" in proc.stdout


def test_the_jobs_configmap_holds_a_self_sufficient_probe(tmp_path):
    """Materialize the probe ConfigMap as the kubelet would (items -> paths) and run the Job's command there."""
    require_torch()
    plan = probe_plan(load_stack(STACK).config, STACK)
    mount = tmp_path / "mount"
    items = next(v for v in plan.job["spec"]["template"]["spec"]["volumes"] if v["name"] == "probe-src")
    for item in items["configMap"]["items"]:
        target = mount / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(plan.source_configmap["data"][item["key"]])
    command = probe_command(load_stack(STACK).config)
    assert command[:3] == ["python3", "-m", "sglab.probe.nccl"]
    out = tmp_path / "results" / "probe.json"
    argv = [sys.executable, *command[1:]]
    argv[argv.index("--spec") + 1] = str(mount / SPEC_KEY)
    argv[argv.index("--out") + 1] = str(out)
    env = {**os.environ, "PYTHONPATH": str(mount)}
    # The test venv installs sglab editable, whose finder would serve any sglab.* module the mount lacks; the
    # server image has no sglab at all. Drop that finder, then run the Job's module as `python -m` would.
    bootstrap = ("import runpy, sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
                 "repr(f).lower()]; import sglab.probe.nccl as m; assert m.__file__.startswith(sys.argv[1]), "
                 "m.__file__; del sys.modules['sglab.probe.nccl']; sys.argv = ['nccl'] + sys.argv[2:]; "
                 "runpy.run_module('sglab.probe.nccl', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", bootstrap, str(mount), *argv[3:], *SMOKE_ARGS], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    broken = mount / "sglab" / "probe" / "result.py"
    broken.write_text(broken.read_text() + "\nfrom sglab.config.loader import load_stack\n")
    proc = subprocess.run([sys.executable, "-c", bootstrap, str(mount), *argv[3:], *SMOKE_ARGS], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode != 0 and "sglab.config" in proc.stderr  # the isolation itself can fail
    spec = ProbeRunSpec.model_validate_json(plan.source_configmap["data"][SPEC_KEY])
    assert spec.backend == "nccl" and spec.world_size == 8  # what the Job runs; here overridden to gloo x 2
    _check(out, spec)
    assert json.loads(out.read_text())["stack"] == STACK
    assert SOURCE_MOUNT in plan.job["spec"]["template"]["spec"]["initContainers"][0]["env"][0]["value"]
