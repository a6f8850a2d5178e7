"""The server-side accept length of one arm segment, and which method measured it.

Preferred: the `/metrics` counters (Δ generation tokens / Δ verify calls over the segment): exact,
and it needs no `/flush_cache`, which refuses while requests run and empties the radix cache of a
shared server. Fallback, only when a speculative arm lacks the counters: flush before the segment
(resets avg_spec_accept_length) and read `/get_server_info` after it. The method is chosen once per
run for every arm alike, so both arms see the same cache treatment (flushed every segment, or never).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from sglab.sglang.client import flush_cache, read_accept_length, spec_counters

Method = Literal["metrics", "flush_cache"]
PROBE_TIMEOUT_S = 3.0


def accept_method(urls: Mapping[str, str], speculative: Mapping[str, bool]) -> Method:
    """'metrics' when every speculative arm serves both counters, else 'flush_cache' (today's method)."""
    arms = [arm for arm, spec in speculative.items() if spec and arm in urls]
    if arms and all(spec_counters(urls[arm], timeout_s=PROBE_TIMEOUT_S) is not None for arm in arms):
        return "metrics"
    return "flush_cache"


class AcceptWindow:
    """Open before a segment's first request, close after its last; `close()` gives the accept length."""

    def __init__(self, url: str, method: Method, *, speculative: bool) -> None:
        self.url = url
        self.method: Method = method
        self.speculative = speculative
        self._start: tuple[float, float] | None = None
        self._flushed = False
        if method == "metrics":
            self._start = spec_counters(url) if speculative else None
        else:
            self._flushed = flush_cache(url)

    def close(self) -> float | None:
        """The segment's accept length (None: not speculative, or the server could not say)."""
        if not self.speculative:
            return None
        if self.method == "metrics":
            end = spec_counters(self.url)
            if self._start is None or end is None:
                return None
            tokens, verifies = end[0] - self._start[0], end[1] - self._start[1]
            return tokens / verifies if verifies > 0 else None
        return read_accept_length(self.url) if self._flushed else None
