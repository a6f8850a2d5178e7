"""The rehearsal's traffic reads at most MAX_REPLY_BYTES of a reply: a server answering a huge body makes that
request a failure, the rest unread, as the bench's own bounds do (tests/load/test_stream_bounds.py)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sglab.serving import rehearsal
from sglab.serving.rehearsal import Traffic, TrafficPlan

pytestmark = pytest.mark.timeout(60)


def _server(body_bytes: int):
    block = b"x" * 65_536

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(body_bytes))
            self.end_headers()
            sent = 0
            try:
                while sent < body_bytes:
                    chunk = block[: body_bytes - sent]
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("body_bytes, failing", [(2_000, False), (20_000_000, True)])
def test_a_reply_past_the_bound_is_a_failure_and_is_not_read_whole(monkeypatch, body_bytes: int,
                                                                   failing: bool) -> None:
    monkeypatch.setattr(rehearsal, "MAX_REPLY_BYTES", 100_000, raising=False)
    server = _server(body_bytes)
    try:
        plan = TrafficPlan.suite({"stable": (f"http://127.0.0.1:{server.server_address[1]}", 100.0)})
        with Traffic(plan, 1):
            deadline = time.monotonic() + 20
            while plan.sent.get("stable", 0) < 3 and time.monotonic() < deadline:
                time.sleep(0.1)
        assert plan.sent.get("stable", 0) >= 3
        assert (plan.failed.get("stable", 0) >= 3) if failing else not plan.failed.get("stable")
    finally:
        server.shutdown()
        server.server_close()
