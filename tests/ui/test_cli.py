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
    (["ui", "--stack", "eagle-nccl-ll", "--users", "0"], "--users must be at least 1"),
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
