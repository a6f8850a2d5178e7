"""Locust users that stream one request at a time and measure it token by token.

`BaselineUser` and `CandidateUser` target one arm each (URL from the locustfile's custom arguments
or SGLAB_BASELINE_URL / SGLAB_CANDIDATE_URL): that is what `locust -f loadtests/locustfile.py` and
the web UI run, both arms side by side. `ArmUser` follows whichever arm the bench runner's phase
names, so one pool of users serves A/B, A/A and the four attribution arms, interleaved.

Locust's `response_time` of each request is the full stream time; TTFT, ITL and decode tok/s go in
as extra Locust request rows (request_type "TOKENS") so they show in Locust's stats, CSV and HTML,
and every request also becomes a raw `RequestSample` in the collector.

How many users run and when each sends is the run's load profile (sglab/load/profiles.py): the runner
sets the users per level, and `SegmentPacing` tells a user when the n-th request of a segment may start
(closed loop: at once).
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field

import gevent
from gevent.event import Event
from geventhttpclient.response import HTTPConnectionClosed
from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser
from locust.exception import StopUser

from sglab.config.loadplan import MAX_OUTPUT_TOKENS
from sglab.core.untrusted import printable
from sglab.core.untrusted_json import MiB
from sglab.load.collector import SampleCollector, Ticket, get_collector, text_sha256
from sglab.load.profiles import CLOSED_LOOP, Pacing
from sglab.load.settings import LoadSettings
from sglab.load.stream_parser import StreamMetrics, StreamParser
from sglab.load.targets import on_wire, touch
from sglab.schema.result import RequestSample
from sglab.sglang.client import auth_headers

TOKENS_REQUEST_TYPE = "TOKENS"
IDLE_SLEEP_S = 0.01
# After a request that could not connect, a user waits before its next one, doubling up to the cap:
# a dead server must not be hot-looped (one refused connection takes microseconds).
CONNECT_BACKOFF_S = (0.05, 2.0)
CONNECT_ERROR_PREFIX = "connection failed"

# What a server streams back is bounded as it is read (a broken or hostile server must not fill the load
# generator's memory). A /generate chunk repeats the whole text and output_ids so far (~12 B a token on SGLang and
# the simulator), so chunks grow with the answer: SSE_BYTES_PER_TOKEN is over twice that.
SSE_BYTES_PER_TOKEN = 32
# One SSE line is held whole: 4 MiB, where the last chunk of the longest answer a plan may ask for is ~1.5 MB.
MAX_SSE_LINE_BYTES = SSE_BYTES_PER_TOKEN * MAX_OUTPUT_TOKENS
# The whole stream, plus SSE_BYTES_PER_TOKEN x tokens² / 2 for the request's token cap (max_stream_bytes): chat
# and short answers fit 64 MiB (a few hundred bytes a chunk), but /generate's cumulative chunks add up to the
# square of the answer's length (4,096 tokens, one chunk each: ~100 MB).
MAX_STREAM_BYTES = 64 * MiB
# A non-200 answer's body: its first 200 characters are kept in the error.
MAX_ERROR_BODY_BYTES = 4096
# Every status is an answer _read_stream reads (bounded) itself: geventhttpclient reads a refused status's whole
# body into memory, for its debug log, before Locust sees the response.
EVERY_STATUS = frozenset(range(100, 600))


class RequestTimeout(Exception):
    pass


def get_settings(environment) -> LoadSettings:
    """The run's settings: set by the runner, or built from the locustfile's options (see plugin.py)."""
    settings = getattr(environment, "sglab_settings", None)
    if settings is None:
        from sglab.load.settings import settings_from_options

        settings = settings_from_options(environment)
    return settings


def set_settings(environment, settings: LoadSettings) -> None:
    environment.sglab_settings = settings


@dataclass(frozen=True)
class SegmentPacing:
    """The profile's schedule for the segment with phase `serial`, opened at `opened_epoch`.

    `closed` is set by the runner when the segment's gate closes: requests still waiting for their
    start time wake up at once and are not sent.
    """

    serial: int
    opened_epoch: float
    pacing: Pacing = CLOSED_LOOP
    closed: Event = field(default_factory=Event, compare=False)


def set_pacing(environment, pacing: SegmentPacing) -> None:
    environment.sglab_pacing = pacing


def get_pacing(environment) -> SegmentPacing | None:
    return getattr(environment, "sglab_pacing", None)


def arm_url(environment, arm: str) -> str | None:
    from sglab.load.settings import url_from_options

    settings = get_settings(environment)
    return settings.urls.get(arm) or url_from_options(environment, arm)


class StreamingUser(FastHttpUser):
    """One request at a time (closed loop): N users = concurrency N."""

    abstract = True
    wait_time = constant(0)
    arm: str | None = None

    def __init__(self, environment) -> None:
        self.settings = get_settings(environment)
        self.collector: SampleCollector = get_collector(environment)
        self.missing_url = False
        if self.arm is not None:
            url = arm_url(environment, self.arm)
            self.missing_url = not url
            self.host = (url or "http://url-not-set.invalid").rstrip("/")
        elif self.host is None:
            self.host = "http://127.0.0.1"  # ArmUser always sends absolute URLs
        self.default_headers = auth_headers()  # servers run with --api-key (serving.api-keys)
        # the whole generation must fit in a socket read: raise geventhttpclient's 60 s default
        self.network_timeout = self.settings.request_timeout_s
        self.connect_backoff_s = 0.0
        super().__init__(environment)
        self.client.client.valid_response_codes = EVERY_STATUS  # type: ignore[misc]  # this user's agent, not the class

    def on_start(self) -> None:
        if self.missing_url:
            _warn_once(self.environment, f"{type(self).__name__}: no URL for arm '{self.arm}' (set --{self.arm}-url "
                       f"or SGLAB_{self.arm.upper()}_URL); this user does not run")
            raise StopUser()

    def current_arm(self) -> str | None:
        return self.arm

    def current_level(self) -> int:
        runner = self.environment.runner
        if runner is None:
            return 0
        users = runner.user_classes_count.get(type(self).__name__, 0)
        profile = self.settings.profile
        return profile.level_for_users(users) if profile is not None else users

    @task
    def stream_one(self) -> None:
        arm = self.current_arm()
        index = self.collector.issued(arm) if arm else 0  # nothing yields between this and next_ticket
        ticket = self.collector.next_ticket(arm, len(self.settings.prompts), self.current_level()) if arm else None
        if ticket is None:
            gevent.sleep(IDLE_SLEEP_S)
            return
        try:
            started = self.wait_for_start(ticket, index)
            sample = self.run_request(started) if started is not None else None
        finally:
            self.collector.release(ticket)
        if sample is not None:
            self.back_off(sample.error)

    def back_off(self, error: str | None) -> None:
        """Bounded exponential wait after connection failures; reset by any answer."""
        if not (error or "").startswith(CONNECT_ERROR_PREFIX):
            self.connect_backoff_s = 0.0
            return
        low, high = CONNECT_BACKOFF_S
        self.connect_backoff_s = min(high, max(low, 2 * self.connect_backoff_s))
        gevent.sleep(self.connect_backoff_s)

    def wait_for_start(self, ticket: Ticket, index: int) -> Ticket | None:
        """Hold the request until the profile's start time for it (closed loop: no wait).

        None: the segment's gate closed while it waited (its arrival fell after the round), so it is not sent.
        """
        pacing = get_pacing(self.environment)
        if pacing is None or pacing.serial != ticket.serial:
            return ticket
        offset = pacing.pacing.start_offset_s(index)
        if offset is None:
            return ticket
        delay = pacing.opened_epoch + offset - time.time()
        if delay > 0:
            pacing.closed.wait(delay)
        phase = self.collector.phase
        if phase.serial != ticket.serial or not phase.open:
            return None
        from dataclasses import replace

        return replace(ticket, started_epoch=time.time())

    def base_url(self, arm: str) -> str:
        return self.host

    def run_request(self, ticket: Ticket) -> RequestSample:
        on_wire(self.environment, ticket.arm, +1)
        try:
            return self._run_request(ticket)
        finally:
            on_wire(self.environment, ticket.arm, -1)

    def _run_request(self, ticket: Ticket) -> RequestSample:
        settings = self.settings
        prompt = settings.prompts[ticket.prompt_index]
        expected = settings.token_cap(prompt)  # natural stopping: the cap, not a required count
        url = self.base_url(ticket.arm) + settings.path
        name = f"{ticket.arm} {settings.path}" + (" [warm-up]" if ticket.warmup else "")
        parser = StreamParser(settings.endpoint, max_tokens=expected)
        error: str | None = None
        start = time.perf_counter()
        timeout = gevent.Timeout(settings.request_timeout_s, RequestTimeout)
        timeout.start()
        try:
            with self.client.post(url, json=settings.payload(prompt), stream=True, catch_response=True,
                                  name=name) as resp:
                try:
                    error = _read_stream(resp, parser, start, lambda: touch(self.environment, ticket.arm),
                                         max_tokens=expected)
                except RequestTimeout:
                    error = f"timeout: no complete response within {settings.request_timeout_s:g} s"
                except Exception as exc:  # transport errors: broken connection, reset, parse error
                    error = f"broken stream: {type(exc).__name__}: {exc}".rstrip(": ")
                metrics = parser.finish(time.perf_counter() - start)
                if error is None:
                    error = metrics.error
                if error is None:
                    error = settings.token_count_error(prompt, metrics.output_tokens)
                resp.request_meta["response_time"] = (time.perf_counter() - start) * 1000
                resp.request_meta["response_length"] = metrics.bytes_received
                if error:
                    resp.failure(error)
                else:
                    resp.success()
        except RequestTimeout:
            metrics = parser.finish(time.perf_counter() - start)
            error = f"timeout: no response within {settings.request_timeout_s:g} s"
            self.environment.events.request.fire(
                request_type="POST", name=name, response_time=(time.perf_counter() - start) * 1000,
                response_length=0, exception=RequestTimeout(error), context={})
        finally:
            timeout.close()
        sample = _sample(ticket, prompt.index, metrics, expected, error, self.collector)
        sample.category = prompt.category  # per-category results (sglab/analysis/attribution.py)
        sample.temperature = settings.temperature
        text = metrics.text if not error else None
        if text is not None:  # output parity (sglab/analysis/provenance.py)
            sample.output_sha256 = text_sha256(text)
        if not error and not ticket.warmup:
            self._fire_token_rows(ticket.arm, metrics)
        touch(self.environment, ticket.arm)
        self.collector.record(sample, forward=_on_worker(self.environment), text=text)
        return sample

    def _fire_token_rows(self, arm: str, m: StreamMetrics) -> None:
        fire = self.environment.events.request.fire
        rows = [("ttft_ms", (m.ttft_s or 0.0) * 1000)]
        if m.itl_s:
            rows.append(("itl_ms mean/request", 1000 * sum(m.itl_s) / len(m.itl_s)))
        if m.decode_tok_per_s is not None:
            rows.append(("decode tok/s", m.decode_tok_per_s))
        if m.accept_length is not None:
            rows.append(("accept_length x1000", m.accept_length * 1000))
        for metric, value in rows:
            fire(request_type=TOKENS_REQUEST_TYPE, name=f"{arm} {metric}", response_time=value,
                 response_length=m.output_tokens, exception=None, context={})


class StreamTooLarge(Exception):
    """A line or a whole stream past its bound: the request ends as this error, the rest unread."""


def max_stream_bytes(max_tokens: int) -> int:
    """The most a real stream of up to `max_tokens` tokens sends (see MAX_STREAM_BYTES)."""
    return MAX_STREAM_BYTES + SSE_BYTES_PER_TOKEN * max_tokens * max_tokens // 2


def _read_stream(resp, parser: StreamParser, start: float, on_line=None, max_tokens: int = 0) -> str | None:
    """Feed SSE lines to `parser` as each arrives (its arrival is its time), within MAX_SSE_LINE_BYTES a line and
    max_stream_bytes(max_tokens) in all; past either bound the request ends as an error naming it, the rest unread."""
    status = resp.status_code
    if not status:
        return f"connection failed: {getattr(resp, 'error', None)}"
    if status != 200:
        return f"HTTP {status}: {_error_text(resp).strip()[:200]}"
    raw = resp._response
    bound_bytes = max_stream_bytes(max_tokens)
    received_bytes = 0
    try:
        while line := _read_line(raw, MAX_SSE_LINE_BYTES):
            received_bytes += len(line)
            if received_bytes > bound_bytes:
                raise StreamTooLarge(f"stream over {bound_bytes} bytes (MAX_STREAM_BYTES for {max_tokens} tokens)")
            parser.feed_line(line, time.perf_counter() - start)
            if on_line is not None:
                on_line()
            if parser.metrics.done:
                break
    except StreamTooLarge as exc:
        raw.release()  # the connection is closed, not read on
        return str(exc)
    return None


def _read_line(raw, max_line_bytes: int) -> bytes:
    """The next line as soon as its b"\\n" is in (read(n) would wait for n bytes), b"" at the end of the body.

    geventhttpclient's readline is this loop without the bound: each socket read adds at most raw.block_size bytes
    to the body buffer, and a line whose b"\\n" is not within max_line_bytes is refused before more is read: at
    most max_line_bytes + block_size are held.
    """
    searched = 0
    while True:
        buffer = raw._body_buffer
        end = buffer.find(b"\n", searched, max_line_bytes)
        if end >= 0:
            line = bytes(buffer[:end + 1])
            del buffer[:end + 1]
            return line
        if len(buffer) >= max_line_bytes:
            raise StreamTooLarge(f"an SSE line over {max_line_bytes} bytes (MAX_SSE_LINE_BYTES)")
        if raw.message_complete:
            return b""  # as readline: an unterminated tail is dropped
        searched = len(buffer)
        _receive(raw)


def _receive(raw) -> None:
    """One socket read into the response's parser (readline's own step)."""
    sock = raw._sock
    if sock is None:
        raise HTTPConnectionClosed("connection closed.")
    try:
        raw.feed(sock.recv(raw.block_size))
    except BaseException:
        raw.release()
        raise


def _error_text(resp) -> str:
    """At most MAX_ERROR_BODY_BYTES of a non-200 body, decompressed to at most as much, as text."""
    raw = resp._response
    try:
        body = raw.read(MAX_ERROR_BODY_BYTES)
        if str(resp.headers.get("content-encoding") or "").lower() in ("gzip", "deflate"):
            body = zlib.decompressobj(32 + zlib.MAX_WBITS).decompress(body, MAX_ERROR_BODY_BYTES)
    except Exception:  # a broken body: the status alone is the message
        body = b""
    finally:
        raw.release()
    return body.decode("utf-8", "replace")


def _sample(ticket: Ticket, prompt_index: int, m: StreamMetrics, expected: int, error: str | None,
            collector: SampleCollector) -> RequestSample:
    return RequestSample(
        arm=ticket.arm,
        level=ticket.level,
        round_index=ticket.round_index,
        warmup=ticket.warmup,
        start_s=round(ticket.started_epoch - collector.run_started_epoch, 6),
        prompt_index=prompt_index,
        prompt_tokens=m.prompt_tokens,
        output_tokens=m.output_tokens,
        expected_output_tokens=expected,
        ttft_ms=None if m.ttft_s is None else m.ttft_s * 1000,
        e2e_ms=None if m.e2e_s is None else m.e2e_s * 1000,
        itl_ms=[g * 1000 for g in m.itl_s],
        decode_tok_per_s=m.decode_tok_per_s,
        spec_verify_ct=m.spec_verify_ct,
        spec_correct_drafts=m.spec_correct_drafts,
        accept_length=m.accept_length,
        error=None if error is None else printable(error, newlines=True, limit=None),  # a server's words
    )


def _warn_once(environment, message: str) -> None:
    seen = environment.__dict__.setdefault("sglab_warned", set())
    if message not in seen:
        seen.add(message)
        from sglab.core.untrusted import printable_logger

        printable_logger("sglab.load").warning(message)


def _on_worker(environment) -> bool:
    runner = environment.runner
    return runner is not None and type(runner).__name__ == "WorkerRunner"


class BaselineUser(StreamingUser):
    arm = "baseline"


class CandidateUser(StreamingUser):
    arm = "candidate"


class ArmUser(StreamingUser):
    """Serves whichever arm the runner's phase names; URLs come from the run's settings."""

    def current_arm(self) -> str | None:
        return self.collector.phase.arm

    def current_level(self) -> int:
        return self.collector.phase.level

    def base_url(self, arm: str) -> str:
        url = self.settings.urls.get(arm)
        if not url:
            raise StopUser()
        return url.rstrip("/")
