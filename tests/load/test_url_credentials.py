"""A server URL given on the command line with credentials in it is refused before it is used, recorded in the
result (target.urls) or printed."""

from __future__ import annotations

import subprocess

from .conftest import run_dirs
from .test_reaping import STACK, kill_group, start_bench, stderr_of


def test_a_server_url_with_credentials_is_refused_and_never_recorded(tmp_path):
    out = tmp_path / "results"
    url = "http://alice:hunter2pw@127.0.0.1:9"
    proc = start_bench(out, "--baseline-url", url, "--candidate-url", url)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError("the bench did not refuse a URL with credentials") from None
    stderr = stderr_of(out) + (out.parent / "bench.out").read_text()
    assert proc.returncode == 2 and "credentials" in stderr, stderr[-3000:]
    assert "hunter2pw" not in stderr and "Traceback" not in stderr
    assert not run_dirs(out, STACK)
