"""`sglab ui` refuses bad input with one message and exit 2, before starting anything."""

from __future__ import annotations

import socket

import pytest

from sglab.cli import main


@pytest.mark.parametrize("argv, message", [
    (["ui", "--stack", "no-such-stack"], "stack file not found"),
    (["ui", "--stack", "eagle-nccl-ll", "--target", "sim", "--baseline-url", "http://x", "--candidate-url",
      "http://y"], "--target sim starts its own simulators"),
    (["ui", "--stack", "eagle-nccl-ll", "--baseline-url", "http://x"], "give both --baseline-url and --candidate-url"),
    (["ui", "--stack", "eagle-nccl-ll", "--users", "0"], "argument --users: '0': must be at least 1"),
])
def test_bad_input_exits_2(argv, message, capsys, monkeypatch):
    monkeypatch.delenv("SGLAB_UI_PASSWORD", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_busy_port_is_refused(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["ui", "--stack", "eagle-nccl-ll", "--web-port", str(port)]) == 2
    assert f"port {port}" in capsys.readouterr().err


def test_unreachable_urls_are_refused(capsys):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    web_port = free.getsockname()[1]
    free.close()
    assert main(["ui", "--stack", "eagle-nccl-ll", "--baseline-url", url, "--candidate-url", url,
                 "--web-port", str(web_port)]) == 2
    err = capsys.readouterr().err
    assert "did not become healthy" in err and "Traceback" not in err


def _busy_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.mark.parametrize("profile, extra", [("rate", []), ("trace", ["--trace", "tests/data/trace_small.jsonl"])])
def test_open_loop_profiles_are_accepted(profile, extra, capsys):
    """rate and trace run in the UI now (sglab/ui/open_loop.py): the profile check passes, the port is next."""
    with _busy_port() as sock:
        port = sock.getsockname()[1]
        assert main(["ui", "--stack", "eagle-nccl-ll", "--profile", profile, *extra, "--web-port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"port {port}" in err and "open loop" not in err and "Traceback" not in err


def test_unknown_profile_is_refused(capsys):
    assert main(["ui", "--stack", "eagle-nccl-ll", "--profile", "bursty"]) == 2
    err = capsys.readouterr().err
    assert "no such load profile" in err and "concurrency" in err and "Traceback" not in err


def _rate_stack(tmp_path, monkeypatch) -> str:
    """eagle-nccl-ll with load.profile rate, in a stacks dir of its own."""
    from ruamel.yaml import YAML

    from sglab.core.paths import project_root

    yaml = YAML()
    doc = yaml.load((project_root() / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text())
    doc["config"]["sglab:load"] = {"profile": "rate"}
    (tmp_path / "stacks").mkdir()
    with open(tmp_path / "stacks" / "Pulumi.ui-rate.yaml", "w") as fh:
        yaml.dump(doc, fh)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path / "stacks"))
    return "ui-rate"


def test_a_stack_declaring_an_open_loop_profile_runs_it_or_closed_loop_when_asked(tmp_path, monkeypatch, capsys):
    stack = _rate_stack(tmp_path, monkeypatch)
    for argv in ([], ["--profile", "concurrency"]):  # both pass the profile check and get as far as the port
        with _busy_port() as sock:
            port = sock.getsockname()[1]
            assert main(["ui", "--stack", stack, *argv, "--web-port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"port {port}" in err and "open loop" not in err
    assert main(["ui", "--stack", stack, "--users", "4"]) == 2  # the rate profile's users are its in-flight cap
    assert "load.rate.max-in-flight" in capsys.readouterr().err


def test_profile_override_is_what_the_users_run_and_the_run_records(tmp_path, monkeypatch):
    """`--profile concurrency` on a rate stack: the Locust child's tab records and runs the concurrency profile."""
    from types import SimpleNamespace

    from sglab.ui.session import BOUND_ENV, PROFILE_ENV, Binding, StackContext, UiSession

    stack = _rate_stack(tmp_path, monkeypatch)
    assert StackContext.load(stack).load_plan["profile"] == "rate"
    assert StackContext.load(stack).plan_override is None
    context = StackContext.load(stack, "concurrency")
    assert context.load_plan["profile"] == "concurrency" and context.plan_override.profile == "concurrency"

    urls = {"baseline": "http://127.0.0.1:1", "candidate": "http://127.0.0.1:2"}
    monkeypatch.setenv(BOUND_ENV, Binding(stack, urls).to_env())
    monkeypatch.setenv(PROFILE_ENV, "concurrency")
    environment = SimpleNamespace(parsed_options=SimpleNamespace(stack=stack, baseline_url=urls["baseline"],
                                                                 candidate_url=urls["candidate"], model="m"))
    session = UiSession.from_environment(environment)
    assert session.stack.load_plan["profile"] == "concurrency"
    settings = session.profile_settings()  # web_tab installs these for the users (no Locust import here)
    assert settings.profile.name == "concurrency" and settings.plan["profile"] == "concurrency"
    assert settings.urls == urls and settings.model == "m"
    monkeypatch.delenv(PROFILE_ENV)
    assert UiSession.from_environment(environment).profile_settings() is None  # the stack's own: options decide
