"""Servers that run with `--api-key` (serving.api-keys) are measured with it: the load's requests, the server
info it checks and the cache flush carry the key from SGLAB_API_KEY / SGLAB_ADMIN_API_KEY, the env the benchmark
Job reads from the stack's Secret; without it, the refusal says which variable to set."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sglab.config.arms import candidate_arm
from sglab.config.loader import load_stack
from sglab.sglang.client import ServerInfoError, auth_headers, flush_cache, get_server_info
from sglab.sim.testing import running_sim

from .conftest import ROOT, child_env, locust_stats

KEYS = ["--api-key", "user-key", "--admin-api-key", "admin-key"]


def test_the_headers_come_from_the_env_and_the_admin_key_falls_back_to_the_api_key() -> None:
    assert auth_headers(env={}) == {}
    assert auth_headers(env={"SGLAB_API_KEY": "k"}) == {"Authorization": "Bearer k"}
    assert auth_headers(admin=True, env={"SGLAB_API_KEY": "k"}) == {"Authorization": "Bearer k"}
    assert auth_headers(admin=True, env={"SGLAB_API_KEY": "k", "SGLAB_ADMIN_API_KEY": "a"}) == \
        {"Authorization": "Bearer a"}


@pytest.mark.slow
def test_server_info_and_flush_use_the_keys_and_a_refusal_names_the_variable(monkeypatch) -> None:
    with running_sim(["--model-path", "m", *KEYS]) as url:
        monkeypatch.delenv("SGLAB_API_KEY", raising=False)
        monkeypatch.delenv("SGLAB_ADMIN_API_KEY", raising=False)
        with pytest.raises(ServerInfoError, match="HTTP 401 .*export SGLAB_API_KEY"):
            get_server_info(url)
        assert not flush_cache(url)
        monkeypatch.setenv("SGLAB_API_KEY", "user-key")
        assert get_server_info(url).args["model_path"] == "m"
        assert not flush_cache(url)  # the control endpoints take the admin key
        monkeypatch.setenv("SGLAB_ADMIN_API_KEY", "admin-key")
        assert flush_cache(url)


@pytest.mark.parametrize("env, failing", [({"SGLAB_API_KEY": "user-key"}, False), ({}, True)])
@pytest.mark.slow
def test_locust_sends_the_api_key(tmp_path, env: dict[str, str], failing: bool) -> None:
    cand = candidate_arm(load_stack("eagle-nccl-ll").config)
    with running_sim([*cand.args, *KEYS], env={**cand.env, "SGLAB_SIM_TIME_SCALE": "5"}) as url:
        stats = tmp_path / "keyed.json"
        proc = subprocess.run(
            [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "-u", "2", "-r", "10",
             "-t", "3s", "--stop-timeout", "30", "--only-summary", "--json-file", str(tmp_path / "keyed"),
             "--endpoint", "chat", "--max-new-tokens", "8", "--candidate-url", url, "CandidateUser"],
            cwd=ROOT, env=child_env(env), capture_output=True, text=True, timeout=60)
    main = locust_stats(stats)[("POST", "candidate /v1/chat/completions")]
    # how many requests fit in the 3 s is the machine's business (a loaded one started Locust late and sent one);
    # what is tested is that every one of them carried the key, or failed without it
    assert main["num_requests"] >= 1
    assert (main["num_failures"] == main["num_requests"]) if failing else \
        (main["num_failures"] == 0 and proc.returncode == 0), proc.stderr[-2000:]
    assert "user-key" not in proc.stdout + proc.stderr
