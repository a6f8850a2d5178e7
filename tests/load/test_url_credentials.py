"""A server URL given on the command line with credentials in it is refused before it is used, recorded in the
result (target.urls) or printed."""

from __future__ import annotations

import subprocess

import pytest

from sglab.load.targets import TargetError, given_urls

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


@pytest.mark.parametrize("url, words", [
    ("http://127.0.0.1:9/\x1bx", "control"),
    ("http://127.0.0.1:9/a b", "control"),
    ("ftp://127.0.0.1:9", "http://HOST:PORT"),
    ("127.0.0.1:30000", "http://HOST:PORT"),
    ("http://", "http://HOST:PORT"),
    ("http://127.0.0.1:9/" + "x" * 3000, "at most"),
])
def test_a_server_url_that_is_not_a_plain_http_url_is_refused_naming_the_arm(url: str, words: str) -> None:
    with pytest.raises(TargetError, match=words) as info:
        given_urls({"baseline": url, "candidate": "http://127.0.0.1:9"}, timeout_s=0.1)
    assert "baseline" in str(info.value) and "\x1b" not in str(info.value)
