"""What Prometheus and an SGLang server answer is bounded where it enters: a size cap after decompression, an
overall deadline per query, JSON depth and shape checks, each one refusal (never a traceback, never a hang),
and a URL's credentials never in a message. Real HTTP on 127.0.0.1, every server loop bounded in time."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from sglab.serving.prometheus import MAX_ANSWER_BYTES, Prometheus, PrometheusError
from sglab.sglang.client import MAX_INFO_BYTES, ServerInfoError, get_server_info

Answer = Callable[[http.server.BaseHTTPRequestHandler], None]


def _json(body: object, *, status: int = 200) -> Answer:
    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else \
            json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    return answer


def _gzip_bomb(size: int) -> Answer:
    """A small gzip body that decompresses to `size` bytes of JSON (no Content-Length of the decompressed size)."""
    raw = b'{"status": "success", "data": {"resultType": "vector", "result": [], "pad": "' + b" " * size + b'"}}'
    packed = gzip.compress(raw, compresslevel=9)

    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(packed)))
        handler.end_headers()
        handler.wfile.write(packed)
    return answer


def _trickle(*, headers_too: bool, every_s: float = 0.2, at_most_s: float = 8.0) -> Answer:
    """One byte every `every_s`, for at most `at_most_s` (the test's server never outlives it)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    body = b'{"status": "success", "data": {"resultType": "vector", "result": [' + b" " * 99_000

    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        stop = time.monotonic() + at_most_s
        if not headers_too:
            handler.wfile.write(head)
            handler.wfile.flush()
        for byte in (head if headers_too else b"") + body:
            if time.monotonic() > stop:
                return
            try:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(every_s)
    return answer


class _Server:
    def __init__(self, answers: dict[str, Answer]) -> None:
        routes = answers

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                answer = routes.get(self.path.split("?", 1)[0])
                if answer is None:
                    self.send_error(404)
                else:
                    answer(self)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, Answer]], _Server]]:
    servers: list[_Server] = []

    def start(answers: dict[str, Answer]) -> _Server:
        servers.append(_Server(answers))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _vector(result: object, kind: str = "vector") -> Answer:
    return _json({"status": "success", "data": {"resultType": kind, "result": result}})


def test_a_well_formed_answer_still_reads(serve):
    server = serve({"/api/v1/query": _vector([{"metric": {"pod": "a"}, "value": [1700000000.5, "2.5"]}])})
    with Prometheus(server.url) as prom:
        series = prom.query("up", 1.0)
    assert [(s.labels, s.samples) for s in series] == [({"pod": "a"}, [(1700000000.5, 2.5)])]


def test_an_answer_over_the_cap_after_decompression_is_refused(serve):
    server = serve({"/api/v1/query": _gzip_bomb(MAX_ANSWER_BYTES + 1024)})
    with Prometheus(server.url) as prom, pytest.raises(PrometheusError, match="MiB"):
        prom.query("up", 1.0)


@pytest.mark.parametrize("headers_too", [False, True], ids=["slow-body", "slow-headers"])
def test_a_server_answering_one_byte_at_a_time_cannot_hang_a_query(serve, headers_too):
    server = serve({"/api/v1/query": _trickle(headers_too=headers_too)})
    started = time.monotonic()
    with Prometheus(server.url, deadline_s=1.0) as prom, pytest.raises(PrometheusError, match="1 s"):
        prom.query("up", 1.0)
    assert time.monotonic() - started < 4.0


DEEP = "[" * 5000 + "]" * 5000
MALFORMED = {
    "non-numeric-timestamp": _vector([{"metric": {}, "value": ["soon", "1"]}]),
    "boolean-timestamp": _vector([{"metric": {}, "value": [True, "1"]}]),
    "short-pair": _vector([{"metric": {}, "value": [1.0]}]),
    "pair-not-a-list": _vector([{"metric": {}, "value": "1.0 2"}]),
    "metric-not-an-object": _vector([{"metric": ["pod", "a"], "value": [1.0, "1"]}]),
    "label-not-a-string": _vector([{"metric": {"pod": {"x": 1}}, "value": [1.0, "1"]}]),
    "result-item-not-an-object": _vector([["up", 1]]),
    "matrix-values-not-pairs": _vector([{"metric": {}, "values": [[1.0, "1", 3]]}], "matrix"),
    "deep-nesting": _json('{"status": "success", "data": {"resultType": "vector", "result": ' + DEEP + "}}"),
    "scalar-not-a-pair": _vector("3", "scalar"),
    "not-utf8": _json(b'{"status": "\xff"}'),
    "duplicate-key": _json('{"status": "error", "status": "success", "data": {"resultType": "vector", '
                           '"result": []}}'),
    "huge-number": _json('{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, '
                         '"value": [1e400, "1"]}]}}'),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_answer_is_one_refusal_never_a_traceback(serve, case):
    range_query = case == "matrix-values-not-pairs"
    server = serve({"/api/v1/query": MALFORMED[case], "/api/v1/query_range": MALFORMED[case]})
    with Prometheus(server.url) as prom, pytest.raises(PrometheusError) as refused:
        if range_query:
            prom.query_range("up", 1.0, 2.0, 1.0)
        else:
            prom.query("up", 1.0)
    assert server.url in str(refused.value) and refused.value.fix


def test_credentials_in_the_prometheus_url_are_never_printed(serve):
    server = serve({"/api/v1/query": _json("<html>login</html>", status=500)})
    url = server.url.replace("http://", "http://judge:hunter2@")
    with Prometheus(url) as prom, pytest.raises(PrometheusError) as refused:
        prom.query("up", 1.0)
    assert "hunter2" not in str(refused.value) and "***@127.0.0.1" in str(refused.value)
    closed = url.rsplit(":", 1)[0] + ":1"  # nothing listens on port 1
    with Prometheus(closed, timeout_s=2.0) as prom, pytest.raises(PrometheusError) as unreachable:
        prom.query("up", 1.0)
    assert "hunter2" not in str(unreachable.value)


def test_server_info_over_the_cap_is_refused(serve):
    server = serve({"/get_server_info": _gzip_bomb(MAX_INFO_BYTES + 1024)})
    with pytest.raises(ServerInfoError, match="MiB"):
        get_server_info(server.url)


@pytest.mark.parametrize("body", [DEEP, '{"a": 1, "a": 2}', '{"x": NaN}'])
def test_server_info_that_is_not_acceptable_json_is_refused(serve, body):
    server = serve({"/get_server_info": _json(body)})
    with pytest.raises(ServerInfoError, match="get_server_info"):
        get_server_info(server.url)


def test_server_info_that_trickles_is_refused_within_the_deadline(serve):
    server = serve({"/get_server_info": _trickle(headers_too=False)})
    started = time.monotonic()
    with pytest.raises(ServerInfoError):
        get_server_info(server.url, timeout_s=1.0)
    assert time.monotonic() - started < 4.0


def test_well_formed_server_info_still_reads(serve):
    server = serve({"/get_server_info": _json({"version": "0.5.23", "internal_states": [{"avg_spec_accept_length":
                                                                                          2.5}]})})
    info = get_server_info(server.url)
    assert (info.version, info.accept_length) == ("0.5.23", 2.5)
