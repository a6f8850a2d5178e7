"""Token timing from an SSE stream, isolated from transport so it can be tested on recorded bytes.

Feed it lines as they arrive with their arrival time; it yields TTFT, every inter-token gap,
e2e latency, output tokens, decode tok/s and accept length. The timing rules follow SGLang's own
bench_serving: a chunk that carries k new tokens counts k gaps of Δt/k, and TTFT is the arrival of
the first chunk carrying a token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from sglab.metrics.builtin import decode_rate

Endpoint = Literal["generate", "chat"]

DONE = "[DONE]"
_META_KEY = '"meta_info":'


def _generate_fast_path(data: str) -> dict | None:
    """Parse only the trailing meta_info of a /generate chunk.

    SGLang sends cumulative text and output_ids in every chunk, so a full parse costs O(tokens so far)
    per chunk; meta_info (last key) is all we need. Inside JSON strings quotes are escaped, so the last
    `"meta_info":` is the key. Anything unusual returns None and the caller parses the whole chunk.
    """
    at = data.rfind(_META_KEY)
    if at < 0:
        return None
    tail = data[at + len(_META_KEY):].rstrip()
    if not tail.endswith("}"):
        return None
    try:
        meta = json.loads(tail[:-1])
    except json.JSONDecodeError:
        return None
    return {"meta_info": meta} if isinstance(meta, dict) else None


@dataclass
class StreamMetrics:
    """What one streamed request measured. Times are seconds relative to the request start."""

    output_tokens: int = 0
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    spec_verify_ct: int | None = None
    accept_length: float | None = None
    spec_correct_drafts: int | None = None
    # SGLang's spec_correct_drafts_histogram: h[i] = verify steps that accepted i drafts (kept only when
    # sum(h) = verify count and Σ i·h[i] = correct drafts, the identities the server guarantees)
    spec_correct_drafts_histogram: list[int] | None = None
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None
    chunks: int = 0
    bytes_received: int = 0
    text: str = ""  # the answer: chat deltas joined; /generate's last (cumulative) text

    @property
    def decode_tok_per_s(self) -> float | None:
        """The decode rate after the first token (the registry's decode_tok_per_s, sglab/metrics/builtin.py)."""
        return decode_rate(self.output_tokens, self.ttft_s, self.e2e_s)


class StreamParser:
    """Accumulates one response. Call `feed_line` per received line, then `finish`.

    `max_tokens` is what the request asked for: a server's token count sizes the gap list, so a claim past it
    ends the response as an error before anything is allocated for it."""

    def __init__(self, endpoint: Endpoint = "generate", max_tokens: int | None = None) -> None:
        self.endpoint = endpoint
        self.max_tokens = max_tokens
        self.metrics = StreamMetrics()
        self._pending: list[str] = []
        self._partial = b""
        self._last_token_s: float | None = None
        self._last_event_s: float | None = None
        self._text: list[str] = []

    def feed_bytes(self, data: bytes, at_s: float) -> None:
        """Convenience for tests and raw transports: split into lines and feed each at `at_s`."""
        self.metrics.bytes_received += len(data)
        buffer = self._partial + data
        lines = buffer.split(b"\n")
        self._partial = lines.pop()  # the unterminated tail waits for the next read
        for line in lines:
            self._line(line.decode("utf-8", errors="replace"), at_s)

    def feed_line(self, line: bytes | str, at_s: float) -> None:
        if isinstance(line, bytes):
            self.metrics.bytes_received += len(line)
            line = line.decode("utf-8", errors="replace")
        self._line(line, at_s)

    def _line(self, line: str, at_s: float) -> None:
        stripped = line.rstrip("\r\n")
        if stripped == "":
            if self._pending:
                data = "\n".join(self._pending)
                self._pending = []
                self._event(data, at_s)
            return
        if stripped.startswith(":"):
            return  # SSE comment / keep-alive
        if stripped.startswith("data:"):
            self._pending.append(stripped[5:].lstrip(" "))
        # other SSE fields (event:, id:, retry:) carry nothing we measure

    def finish(self, at_s: float) -> StreamMetrics:
        """End of body: flush a trailing event without its blank line, then validate."""
        if self._partial:
            self._line(self._partial.decode("utf-8", errors="replace"), at_s)
            self._partial = b""
        if self._pending:
            data = "\n".join(self._pending)
            self._pending = []
            self._event(data, at_s)
        m = self.metrics
        if self._text:
            m.text = "".join(self._text)
        if m.spec_verify_ct and m.output_tokens:
            m.accept_length = m.output_tokens / m.spec_verify_ct  # the details may precede the last count
        if m.e2e_s is None:
            m.e2e_s = self._last_event_s if self._last_event_s is not None else at_s
        if m.error is None and not m.done:
            m.error = "stream ended before [DONE]"
        return m

    def _event(self, data: str, at_s: float) -> None:
        m = self.metrics
        self._last_event_s = at_s
        if data.strip() == DONE:
            m.done = True
            m.e2e_s = at_s
            return
        if m.done:
            return
        chunk = _generate_fast_path(data) if self.endpoint == "generate" else None
        if chunk is not None and chunk["meta_info"].get("finish_reason"):
            chunk = None  # the last chunk is parsed whole, for its text (cumulative: the whole answer)
        try:
            chunk = chunk if chunk is not None else json.loads(data)
        except json.JSONDecodeError:
            m.error = m.error or f"unparsable stream chunk: {data[:80]!r}"
            return
        if not isinstance(chunk, dict):
            m.error = m.error or f"unexpected stream chunk: {data[:80]!r}"
            return
        m.chunks += 1
        if "error" in chunk:
            err = chunk["error"]
            message = err.get("message") if isinstance(err, dict) else err
            m.error = m.error or f"server error in stream: {message}"
            return
        if self.endpoint == "generate":
            self._generate_chunk(chunk, at_s)
        else:
            self._chat_chunk(chunk, at_s)

    def _add_tokens(self, new_tokens: int, at_s: float) -> None:
        m = self.metrics
        if new_tokens <= 0 or m.error is not None:
            return
        if self.max_tokens is not None and m.output_tokens + new_tokens > self.max_tokens:
            m.error = (f"the server claims {m.output_tokens + new_tokens} output tokens, more than the "
                       f"{self.max_tokens} asked for")
            return
        if m.ttft_s is None:
            m.ttft_s = at_s  # extra tokens in the first chunk add no gap (as bench_serving)
        else:
            assert self._last_token_s is not None
            gap = (at_s - self._last_token_s) / new_tokens
            m.itl_s.extend([gap] * new_tokens)
        m.output_tokens += new_tokens
        self._last_token_s = at_s

    def _generate_chunk(self, chunk: dict, at_s: float) -> None:
        m = self.metrics
        meta = chunk.get("meta_info") or {}
        completion = meta.get("completion_tokens")
        if isinstance(completion, int):
            self._add_tokens(completion - m.output_tokens, at_s)
        elif chunk.get("text"):
            self._add_tokens(1, at_s)
        if isinstance(chunk.get("text"), str):
            self._text = [chunk["text"]]
        if isinstance(meta.get("prompt_tokens"), int):
            m.prompt_tokens = meta["prompt_tokens"]
        finish = meta.get("finish_reason")
        if finish:
            m.finish_reason = finish.get("type") if isinstance(finish, dict) else str(finish)
            if m.finish_reason == "abort":
                message = finish.get("message") if isinstance(finish, dict) else None
                m.error = m.error or f"request aborted by the server: {message}"
            self._accept_length(meta)

    def _accept_length(self, meta: dict) -> None:
        m = self.metrics
        verify = meta.get("spec_verify_ct")
        if _count(verify) and verify > 0:
            m.spec_verify_ct = verify
            m.accept_length = m.output_tokens / verify
        elif _number(meta.get("spec_accept_length")):
            m.accept_length = float(meta["spec_accept_length"])
        correct = meta.get("spec_num_correct_drafts", meta.get("spec_accepted_drafts"))
        if _count(correct):
            m.spec_correct_drafts = correct
        histogram = meta.get("spec_correct_drafts_histogram", meta.get("spec_accept_histogram"))
        if isinstance(histogram, list) and histogram and all(_count(h) for h in histogram) \
                and m.spec_verify_ct is not None and sum(histogram) == m.spec_verify_ct \
                and (m.spec_correct_drafts is None
                     or sum(i * h for i, h in enumerate(histogram)) == m.spec_correct_drafts):
            m.spec_correct_drafts_histogram = list(histogram)
            m.spec_correct_drafts = sum(i * h for i, h in enumerate(histogram))

    def _spec_stats(self, chunk: dict) -> None:
        """Per-request speculative stats wherever a server puts them: SGLang's `sglext.spec_tokens_details`
        (its own `choices: []` chunk after the finish chunk, or the finish chunk), or the proposed
        `speculative_decoding_stats` (ordered verify/accept lengths, or a summary). Absent: nothing."""
        sglext = chunk.get("sglext")
        details = sglext.get("spec_tokens_details") if isinstance(sglext, dict) else None
        if isinstance(details, list):
            details = details[0] if details else None
        if isinstance(details, dict):
            self._accept_length(details)
        elif isinstance(sglext, dict) and "spec_verify_ct" in sglext:
            self._accept_length(sglext)  # flat, as some versions sent it
        stats = chunk.get("speculative_decoding_stats")
        if not isinstance(stats, dict) and isinstance(sglext, dict):
            stats = sglext.get("speculative_decoding_stats")
        if isinstance(stats, dict):
            self._decoding_stats(stats)

    def _decoding_stats(self, stats: dict) -> None:
        m = self.metrics
        accepts = stats.get("accept_lengths")
        if isinstance(accepts, list) and accepts and all(_number(a) for a in accepts):
            m.spec_verify_ct = len(accepts)
            m.accept_length = sum(accepts) / len(accepts)
            return
        verify = stats.get("verify_ct", stats.get("spec_verify_ct"))
        if _count(verify) and verify > 0:
            m.spec_verify_ct = verify
        accept = stats.get("accept_length", stats.get("spec_accept_length"))
        if _number(accept):
            m.accept_length = float(accept)

    def _chat_chunk(self, chunk: dict, at_s: float) -> None:
        """OpenAI chat chunks; exact counts come from usage (continuous or final) when the server sends it."""
        m = self.metrics
        usage = chunk.get("usage") or None
        choices = chunk.get("choices") or []
        content = ""
        finish = None
        if choices and isinstance(choices[0], dict):
            delta = choices[0].get("delta") or {}
            content = delta.get("content") or ""
            finish = choices[0].get("finish_reason")
        if usage and isinstance(usage.get("completion_tokens"), int):
            if isinstance(usage.get("prompt_tokens"), int):
                m.prompt_tokens = usage["prompt_tokens"]
            self._add_tokens(usage["completion_tokens"] - m.output_tokens, at_s)
        elif content:
            self._add_tokens(1, at_s)
        if isinstance(content, str) and content:
            self._text.append(content)
        if finish:
            m.finish_reason = str(finish)
            meta = chunk.get("meta_info")
            if isinstance(meta, dict):
                self._accept_length(meta)
        self._spec_stats(chunk)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_recorded(body: bytes, timestamps: list[float] | None = None,
                   endpoint: Endpoint = "generate") -> StreamMetrics:
    """Parse a whole recorded body; `timestamps` gives one arrival time per line (default: line index)."""
    parser = StreamParser(endpoint)
    lines = body.splitlines(keepends=True)
    last = 0.0
    for i, line in enumerate(lines):
        last = timestamps[i] if timestamps is not None else float(i)
        parser.feed_line(line, last)
    return parser.finish(last)
