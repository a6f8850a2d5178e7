"""What a server streams back is bounded where it enters the load generator: one SSE line, the whole stream and a
non-200 body each have a byte limit; past one the request ends as an error that names it, and the rest is never
read into memory. Real HTTP on 127.0.0.1 through sglab's own Locust user (geventhttpclient), every server bounded
in what it sends."""

from __future__ import annotations

import gzip
import json
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from locust.env import Environment
from locust.event import Events

from sglab.config.loadplan import MAX_OUTPUT_TOKENS
from sglab.load import users
from sglab.load.collector import Ticket
from sglab.load.prompts import Prompt
from sglab.load.settings import GENERATE_PATH, LoadSettings
from sglab.load.stream_parser import StreamMetrics, StreamParser
from sglab.load.users import BaselineUser, set_settings

pytestmark = pytest.mark.timeout(60)

Answer = Callable[[BaseHTTPRequestHandler], None]
MB = 1_000_000
BLOCK = b"x" * 65_536  # what the servers send over and over: allocated once, not per write
TOKENS = 8
GAP_S = 0.03  # between two token chunks of the normal stream


def _head(handler: BaseHTTPRequestHandler, status: int = 200, content_type: str = "text/event-stream") -> None:
    """Chunked, like SGLang's (uvicorn's) streamed answers."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()


def _chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(b"%x\r\n" % len(data))
    handler.wfile.write(data)
    handler.wfile.write(b"\r\n")
    handler.wfile.flush()


def _end(handler: BaseHTTPRequestHandler) -> None:
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def _event(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _generate_chunk(tokens: int, finished: bool) -> bytes:
    """An SGLang /generate chunk: cumulative text and output_ids, meta_info last."""
    finish = {"type": "length", "length": tokens} if finished else None
    return _event({"text": " tok" * tokens, "output_ids": list(range(1000, 1000 + tokens)),
                   "meta_info": {"prompt_tokens": 5, "completion_tokens": tokens, "finish_reason": finish}})


def _normal(handler: BaseHTTPRequestHandler) -> None:
    """TOKENS chunks GAP_S apart, then [DONE]."""
    _head(handler)
    for n in range(1, TOKENS + 1):
        time.sleep(GAP_S)
        _chunk(handler, _generate_chunk(n, n == TOKENS))
    _chunk(handler, b"data: [DONE]\n\n")
    _end(handler)


def _long_line(size: int) -> Answer:
    """One SSE line of `size` bytes (a valid chunk once whole), then [DONE]."""
    def answer(handler: BaseHTTPRequestHandler) -> None:
        _head(handler)
        _chunk(handler, b'data: {"text": "')
        for _ in range(size // len(BLOCK)):
            _chunk(handler, BLOCK)
        _chunk(handler, b'"}\n\n')
        _chunk(handler, b"data: [DONE]\n\n")
        _end(handler)
    return answer


def _endless(at_most: int) -> Answer:
    """Well-formed token chunks of ~4 KB, never [DONE], until `at_most` bytes are sent."""
    def answer(handler: BaseHTTPRequestHandler) -> None:
        _head(handler)
        sent, n = 0, 0
        while sent < at_most:
            n += 1
            data = _event({"text": BLOCK[:4000].decode(), "meta_info": {"completion_tokens": n}})
            _chunk(handler, data)
            sent += len(data)
        _end(handler)
    return answer


def _error_body(size: int) -> Answer:
    """A 500 whose JSON message is followed by `size` bytes of padding (Content-Length: the whole body)."""
    def answer(handler: BaseHTTPRequestHandler) -> None:
        head = b'{"object": "error", "message": "out of memory", "pad": "'
        handler.send_response(500)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(head) + size // len(BLOCK) * len(BLOCK) + 2))
        handler.end_headers()
        handler.wfile.write(head)
        for _ in range(size // len(BLOCK)):
            handler.wfile.write(BLOCK)
        handler.wfile.write(b'"}')
    return answer


def _gzip_error_body(size: int) -> Answer:
    """A 502 whose gzip body (~50 KB) inflates to `size` bytes after its message."""
    packed = gzip.compress(b'{"object": "error", "message": "bad gateway"}' + b" " * size)

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(502)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(packed)))
        handler.end_headers()
        handler.wfile.write(packed)
    return answer


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], str]]:
    """serve(answer) -> the URL of a server that answers every POST with `answer`."""
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Answer) -> str:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.close_connection = True
                try:
                    answer(self)
                except OSError:
                    pass  # the client hung up: what a bounded reader does

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _stream(url: str) -> tuple[str | None, StreamMetrics, int]:
    """One streamed /generate request as sglab sends it: (error, metrics, peak traced bytes while it ran).

    No token cap is passed, so the stream's bound is MAX_STREAM_BYTES itself."""
    env = Environment(events=Events())
    set_settings(env, LoadSettings(endpoint="generate", max_new_tokens=TOKENS, request_timeout_s=30.0, prompts=[],
                                   urls={"baseline": url}))
    user = BaselineUser(env)
    parser = StreamParser("generate")
    tracemalloc.start()
    try:
        start = time.perf_counter()
        with user.client.post(GENERATE_PATH, json={"text": "hi", "stream": True}, stream=True,
                              catch_response=True, name="bounds") as resp:
            error = users._read_stream(resp, parser, start)
            resp.success()
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return error, parser.finish(time.perf_counter() - start), peak_bytes


def test_a_normal_stream_parses_with_each_line_timed_at_its_arrival(serve) -> None:
    error, metrics, _ = _stream(serve(_normal))
    assert error is None and metrics.error is None and metrics.done
    assert metrics.output_tokens == TOKENS and metrics.prompt_tokens == 5
    assert metrics.text == " tok" * TOKENS
    assert GAP_S * 0.8 <= metrics.ttft_s < GAP_S + 1.0
    assert len(metrics.itl_s) == TOKENS - 1
    assert all(gap < GAP_S + 1.0 for gap in metrics.itl_s), metrics.itl_s
    # Timed as each line arrives, not when the stream ends (all gaps ~0 then): a typical gap is the server's pacing.
    # The median, because a loaded machine may read two chunks in one go: one long gap, then one near 0.
    assert statistics.median(metrics.itl_s) >= GAP_S * 0.5, metrics.itl_s


def test_a_line_exactly_at_the_bound_is_read_one_byte_more_is_an_error(serve, monkeypatch) -> None:
    monkeypatch.setattr(users, "MAX_SSE_LINE_BYTES", 20_000, raising=False)
    line = _generate_chunk(TOKENS, True).split(b"\n")[0]
    head, tail = line[:-2] + b', "pad": "', b'"}}\n'  # the pad goes in meta_info; the line's own b"\n" counts
    at_bound = head + b"p" * (20_000 - len(head) - len(tail)) + tail
    assert len(at_bound) == 20_000

    def answer(extra: int) -> Answer:
        def send(handler: BaseHTTPRequestHandler) -> None:
            _head(handler)
            body = at_bound[:-4] + b"p" * extra + at_bound[-4:] + b"\ndata: [DONE]\n\n"
            for at in range(0, len(body), 3000):  # split across reads
                _chunk(handler, body[at:at + 3000])
            _end(handler)
        return send

    error, metrics, _ = _stream(serve(answer(0)))
    assert error is None and metrics.error is None and metrics.output_tokens == TOKENS
    error, metrics, _ = _stream(serve(answer(1)))
    assert error is not None and "MAX_SSE_LINE_BYTES" in error and "20000" in error
    assert metrics.output_tokens == 0


def test_a_10_mb_line_ends_the_request_without_being_held(serve) -> None:
    error, metrics, peak_bytes = _stream(serve(_long_line(10 * MB)))
    assert error is not None and "MAX_SSE_LINE_BYTES" in error
    limit = users.MAX_SSE_LINE_BYTES
    assert f"{limit}" in error
    assert peak_bytes < limit + 2 * MB, peak_bytes  # the line up to the bound, never the 10 MB
    assert metrics.bytes_received == 0


def test_a_stream_past_the_total_bound_ends_as_an_error(serve, monkeypatch) -> None:
    monkeypatch.setattr(users, "MAX_STREAM_BYTES", 256 * 1024, raising=False)
    error, metrics, _ = _stream(serve(_endless(at_most=32 * MB)))
    assert error is not None and "MAX_STREAM_BYTES" in error and f"{256 * 1024}" in error
    assert 0 < metrics.bytes_received <= 256 * 1024
    assert metrics.output_tokens > 0  # the chunks before the bound were measured


def test_an_error_status_keeps_its_message_and_reads_a_few_kb_of_a_huge_body(serve) -> None:
    error, metrics, peak_bytes = _stream(serve(_error_body(20 * MB)))
    assert error is not None and error.startswith('HTTP 500: {"object": "error", "message": "out of memory"')
    assert len(error) == len("HTTP 500: ") + 200
    assert peak_bytes < 1 * MB, peak_bytes
    assert metrics.bytes_received == 0


def test_a_gzip_error_body_is_inflated_to_a_few_kb_only(serve) -> None:
    error, _, peak_bytes = _stream(serve(_gzip_error_body(50 * MB)))
    assert error == 'HTTP 502: {"object": "error", "message": "bad gateway"}'
    assert peak_bytes < 1 * MB, peak_bytes


def test_the_bounds_admit_the_longest_real_answers() -> None:
    """/generate repeats the text and ids so far in every chunk: 4,096 tokens stream ~84 MB, past the 64 MiB floor."""
    total_bytes = sum(len(_generate_chunk(n, n == 4096)) for n in range(1, 4097))
    assert users.MAX_STREAM_BYTES < total_bytes <= users.max_stream_bytes(4096)
    assert len(_generate_chunk(MAX_OUTPUT_TOKENS, True)) < users.MAX_SSE_LINE_BYTES / 2


def _claiming(completion_tokens: int, endpoint: str = "generate") -> bytes:
    """One chunk that claims `completion_tokens` in one event, finished, then [DONE]."""
    if endpoint == "generate":
        return _event({"text": " tok", "meta_info": {"completion_tokens": completion_tokens,
                                                      "finish_reason": {"type": "length"}}}) + b"data: [DONE]\n\n"
    return (_event({"choices": [{"delta": {"content": " tok"}, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": completion_tokens}})
            + b"data: [DONE]\n\n")


@pytest.mark.parametrize("endpoint", ["generate", "chat"])
def test_a_token_count_past_the_requested_cap_is_an_error_and_allocates_nothing(endpoint) -> None:
    """The server's claimed completion_tokens sizes the gap list: a claim past what was asked is refused unread."""
    first = _claiming(1, endpoint).split(b"data: [DONE]")[0]
    parser = StreamParser(endpoint, max_tokens=TOKENS)
    parser.feed_bytes(first, 0.1)
    tracemalloc.start()
    try:
        parser.feed_bytes(_claiming(10**9, endpoint), 0.2)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    metrics = parser.finish(0.3)
    assert metrics.error == f"the server claims 1000000000 output tokens, more than the {TOKENS} asked for"
    assert metrics.output_tokens == 1 and metrics.itl_s == []
    assert peak_bytes < MB, peak_bytes


@pytest.mark.parametrize("endpoint", ["generate", "chat"])
def test_a_token_count_at_the_requested_cap_is_measured(endpoint) -> None:
    parser = StreamParser(endpoint, max_tokens=TOKENS)
    parser.feed_bytes(_claiming(1, endpoint).split(b"data: [DONE]")[0], 0.1)
    parser.feed_bytes(_claiming(TOKENS, endpoint), 0.8)
    metrics = parser.finish(0.9)
    assert metrics.error is None and metrics.output_tokens == TOKENS
    assert metrics.itl_s == pytest.approx([0.1] * (TOKENS - 1))


def test_the_locust_user_passes_each_requests_token_cap_to_its_parser(serve) -> None:
    """End to end through sglab's user: a server claiming more tokens than asked fails the request, naming it."""
    first = _claiming(1).split(b"data: [DONE]")[0]
    url = serve(lambda handler: (_head(handler), _chunk(handler, first), _chunk(handler, _claiming(10**7)),
                                 _end(handler)))
    env = Environment(events=Events())
    failures: list[str] = []
    env.events.request.add_listener(lambda exception=None, **_: failures.append(str(exception)) if exception else None)
    set_settings(env, LoadSettings(endpoint="generate", max_new_tokens=TOKENS, request_timeout_s=30.0,
                                   prompts=[Prompt(0, "hi", 1)], urls={"baseline": url}))
    user = BaselineUser(env)
    sample = user.run_request(Ticket(arm="baseline", level=1, round_index=0, warmup=False, prompt_index=0,
                                     started_epoch=time.time(), serial=0))
    assert sample.error is not None and "10000000" in sample.error and "asked for" in sample.error
    assert failures and "asked for" in failures[0]
