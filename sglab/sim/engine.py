"""The continuous-batching scheduler: one asyncio task running prefill and decode iterations.

Each iteration's duration comes from the timing model; the loop sleeps to an absolute deadline (the
previous deadline + duration), so delivered timing does not drift with sleep overshoot. Like SGLang
without mixed chunking, waiting requests are prefilled first (as one extend iteration) while the running
batch waits; `max_running_requests` caps the batch and the rest queue in arrival order.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
import zlib
from dataclasses import dataclass, field

from sglab.sim import timing
from sglab.sim.acceptance import acceptance_rng, natural_tokens, position_factor, repetition
from sglab.sim.adaptive import SpecTiers
from sglab.sim.cli_args import SimConfig
from sglab.sim.metrics import Metrics
from sglab.sim.tokens import RANDOM, OutputTokens, classify, prompt_content

log = logging.getLogger("sglab.sim")

EOS_TOKEN_ID = 163586
# Behind schedule (the process was not scheduled in time), iterations run back to back until the
# absolute schedule is met again, so the delivered mean rate stays the model's; beyond this much lag
# (e.g. a suspended process) the schedule restarts from now instead and `lag_resyncs` counts it.
MAX_CATCH_UP_S = 0.5
STEP_TIMES_KEPT = 1000
SPIN_FRACTION = 0.1


@dataclass(frozen=True)
class TokenEvent:
    """Delivered after an iteration: the request's cumulative output and whether it is done."""

    completion_tokens: int
    new_tokens: int
    finished: bool
    at: float
    verify_ct: int = 0
    accepted_drafts: int = 0
    accept_histogram: tuple[int, ...] = ()
    text: str = ""
    ids_json: str = ""
    proposed_drafts: int = 0  # Σ (num_draft_tokens - 1) over its verify passes (the tier may change)


@dataclass
class SimRequest:
    rid: str
    prompt_tokens: int
    max_new_tokens: int
    ignore_eos: bool
    prompt_key: str
    internal: bool = False
    output_len: int = 0
    finish_type: str = "length"
    category: str = RANDOM  # read from the prompt's content (sglab.sim.tokens.classify)
    repetition: float = 0.0  # share of the prompt's word 3-grams seen before in it (NGRAM's matches, sim/acceptance.py)
    templated: bool = False
    tokens: OutputTokens = field(default_factory=lambda: OutputTokens(0))
    completion_tokens: int = 0
    verify_ct: int = 0
    accepted_drafts: int = 0
    proposed_drafts: int = 0
    accept_histogram: list[int] = field(default_factory=list)
    metric_labels: tuple[tuple[str, str], ...] = ()  # SGLang custom labels (x-custom-labels) of its request series
    arrival: float = 0.0
    arrival_wall: float = 0.0
    admitted_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    finished_at: float | None = None
    aborted: bool = False
    rng: random.Random | None = None
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    last_event: TokenEvent | None = None
    text: str = ""
    ids_json: str = ""

    def snapshot(self, new_tokens: int, now: float) -> TokenEvent:
        """What a client may see now; streams render events, never the live (possibly later) state.

        The cumulative text and ids are extended here once, not rebuilt per chunk (cost matters at
        hundreds of streams per process)."""
        if new_tokens:
            start = self.completion_tokens - new_tokens
            self.text += self.tokens.text(start, self.completion_tokens)
            more = self.tokens.ids_json(start, self.completion_tokens)
            self.ids_json = f"{self.ids_json},{more}" if self.ids_json else more
        event = TokenEvent(self.completion_tokens, new_tokens, self.finished, now, self.verify_ct,
                           self.accepted_drafts, tuple(self.accept_histogram), self.text, self.ids_json,
                           self.proposed_drafts)
        self.last_event = event
        return event

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def finish_reason(self) -> dict | None:
        if not self.finished:
            return None
        if self.aborted:
            return {"type": "abort", "message": "client disconnected"}
        if self.finish_type == "stop":
            return {"type": "stop", "matched": EOS_TOKEN_ID}
        return {"type": "length", "length": self.max_new_tokens}


class Engine:
    def __init__(self, config: SimConfig, metrics: Metrics) -> None:
        self.config = config
        self.profile = config.profile
        self.metrics = metrics
        self.spec = config.spec  # the launch shape; the cycle runs self.tiers.active (adaptive moves it)
        self.tiers = SpecTiers(self.profile, self.spec, config.adaptive) if self.spec else None
        self.acceptance = self.tiers.default_model() if self.tiers else None
        self.waiting: list[SimRequest] = []
        self.running: list[SimRequest] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.failure: str | None = None
        self._seq = itertools.count()
        self._deadline: float | None = None
        self.iterations = 0
        self.lag_resyncs = 0
        self.wake_late_s_sum = 0.0
        self.wake_late_s_max = 0.0
        # cumulative since start or the last /flush_cache (SGLang's avg_spec_accept_length)
        self.spec_tokens_sum = 0
        self.spec_verify_sum = 0
        self.spec_accepted_drafts_sum = self.spec_proposed_drafts_sum = 0
        self.last_gen_throughput = 0.0
        # SGLANG_RECORD_STEP_TIME=1: seconds per decode iteration by batch size (bench_speculative reads it)
        self.step_times: dict[str, list[float]] | None = {} if config.record_step_time else None
        self._log_tokens = 0
        self._log_iterations = 0
        self._log_started = time.monotonic()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sglab-sim-scheduler")
        self._task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is None:
            return
        self.failure = repr(task.exception())
        log.error("scheduler loop died: %s", self.failure, exc_info=task.exception())
        now = asyncio.get_running_loop().time()
        for request in self.waiting + self.running:  # end every stream instead of leaving it hanging
            request.aborted = True
            self._finish(request, now)
        self.waiting, self.running = [], []

    @property
    def alive(self) -> bool:
        """False once the scheduler loop has died (then /health answers 503, like a crashed scheduler)."""
        return self.failure is None

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    def prepare(self, request: SimRequest) -> SimRequest:
        """Fix the request's output length and seeded streams before it is queued."""
        seq = next(self._seq)
        seed = self.config.seed
        request.tokens = OutputTokens(zlib.crc32(f"{seed}:{request.prompt_key}".encode()))
        request.rng = acceptance_rng(seed, self.config.run_seed, seq)
        content, request.templated = prompt_content(request.prompt_key)
        request.category = classify(content)
        if self.spec is not None and self.spec.kind == "ngram":
            request.repetition = repetition(content)
        length = request.max_new_tokens
        if not request.ignore_eos:
            eos_rng = random.Random(f"eos:{seed}:{request.prompt_key}")
            low, high = natural_tokens(request.category, (self.profile.eos_min_tokens, self.profile.eos_max_tokens))
            natural = eos_rng.randint(low, max(low, high))
            if natural < length:
                length, request.finish_type = natural, "stop"
        request.output_len = length
        if self.tiers is not None:
            request.accept_histogram = [0] * (self.tiers.max_depth + 1)
        return request

    def submit(self, request: SimRequest) -> None:
        loop = asyncio.get_running_loop()
        request.arrival = loop.time()
        request.arrival_wall = time.time()
        if not request.internal:
            self.metrics.of(request.metric_labels).counters["num_requests_total"] += 1
            self.metrics.of(request.metric_labels).counters["prompt_tokens_total"] += request.prompt_tokens
        self.waiting.append(request)
        self._wake.set()

    def abort(self, request: SimRequest) -> None:
        if request.finished:
            return
        request.aborted = True
        if request in self.waiting:
            self.waiting.remove(request)
            self._finish(request, asyncio.get_running_loop().time())

    def flush_cache(self) -> bool:
        """Reset the cumulative speculative counters; refused (False) while requests are in flight."""
        if self.busy:
            return False
        self.spec_tokens_sum = self.spec_verify_sum = self.spec_accepted_drafts_sum = self.spec_proposed_drafts_sum = 0
        return True

    @property
    def avg_spec_accept_length(self) -> float | None:
        if self.spec is None or self.spec_verify_sum == 0:
            return None
        return self.spec_tokens_sum / self.spec_verify_sum

    async def _sleep_until(self, deadline: float, duration_s: float) -> None:
        """Sleep, then busy-wait the last spin_ms (event-loop sleeps wake up to 1 ms late).

        The spin is capped at SPIN_FRACTION of the iteration, so a large time scale does not turn the
        simulator into a busy loop; there, late wake-ups are absorbed by the absolute schedule."""
        loop = asyncio.get_running_loop()
        spin_s = min(self.config.spin_ms / 1000.0, SPIN_FRACTION * duration_s)
        remaining = deadline - loop.time()
        if remaining > spin_s:
            await asyncio.sleep(remaining - spin_s)
        while loop.time() < deadline:
            await asyncio.sleep(0)
        late = loop.time() - deadline
        self.wake_late_s_sum += late
        self.wake_late_s_max = max(self.wake_late_s_max, late)

    def _next_deadline(self, duration_s: float) -> float:
        now = asyncio.get_running_loop().time()
        start = self._deadline
        if start is None or now - start > MAX_CATCH_UP_S:
            if start is not None:
                self.lag_resyncs += 1
            start = now
        self._deadline = start + duration_s
        return self._deadline

    async def _run(self) -> None:
        scale = self.config.speed  # the time scale times the node's speed
        while True:
            self.waiting = [r for r in self.waiting if not r.aborted]
            for request in [r for r in self.running if r.aborted]:
                self.running.remove(request)
                self._finish(request, asyncio.get_running_loop().time())
            self._update_load_gauges()
            if not self.waiting and not self.running:
                self._deadline = None
                self._wake.clear()
                await self._wake.wait()
                self._log_started = time.monotonic()
                continue
            capacity = self.config.max_running_requests - len(self.running)
            if self.waiting and capacity > 0:
                admitted = self._admit(capacity)
                prompt = sum(r.prompt_tokens for r in admitted)
                draft = self.spec.kind if self.spec is not None else None
                duration_s = timing.prefill_ms(self.profile, prompt, self.config.comm_factor, draft) / 1e3 / scale
                await self._sleep_until(self._next_deadline(duration_s), duration_s)
                self._after_prefill(admitted)
            else:
                batch = len(self.running)
                spec = self.tiers.active if self.tiers else None
                duration_s = timing.iteration_ms(self.profile, batch, spec, self.config.comm_factor) / 1e3 / scale
                await self._sleep_until(self._next_deadline(duration_s), duration_s)
                if self.step_times is not None:
                    times = self.step_times.setdefault(str(batch), [])
                    times.append(duration_s)
                    del times[:-STEP_TIMES_KEPT]
                self._after_decode()
            self.iterations += 1

    def _admit(self, capacity: int) -> list[SimRequest]:
        admitted: list[SimRequest] = []
        budget = self.config.server_args["max_prefill_tokens"]
        while self.waiting and len(admitted) < capacity:
            request = self.waiting[0]
            if admitted and request.prompt_tokens > budget:
                break
            budget -= request.prompt_tokens
            request.admitted_at = asyncio.get_running_loop().time()
            admitted.append(self.waiting.pop(0))
        return admitted

    def _emit(self, request: SimRequest, new_tokens: int, now: float) -> None:
        request.completion_tokens += new_tokens
        if not request.internal:
            if request.last_token_at is None:
                self.metrics.of(request.metric_labels).histograms["time_to_first_token_seconds"].observe(
                    now - request.arrival)
            else:
                self.metrics.of(request.metric_labels).histograms["inter_token_latency_seconds"].observe(
                    (now - request.last_token_at) / new_tokens, new_tokens)
        if request.first_token_at is None:
            request.first_token_at = now
        request.last_token_at = now
        self._log_tokens += new_tokens
        done = request.completion_tokens >= request.output_len
        if done:
            request.finished_at = now
            if not request.internal:
                self.metrics.of(request.metric_labels).histograms["e2e_request_latency_seconds"].observe(
                    now - request.arrival)
            self._count_finished(request)
        request.events.put_nowait(request.snapshot(new_tokens, now))

    def _finish(self, request: SimRequest, now: float) -> None:
        """End without more tokens (abort, or max_new_tokens 0)."""
        if request.finished:
            return
        request.finished_at = now
        if request.aborted and not request.internal:
            self.metrics.of(request.metric_labels).counters["num_aborted_requests_total"] += 1
        self._count_finished(request)
        request.events.put_nowait(request.snapshot(0, now))

    def _count_finished(self, request: SimRequest) -> None:
        """Like SGLang (observe_one_finished_request), a request's tokens and verify passes are counted when
        it finishes, so Δgeneration_tokens / Δspec_verify_calls over a window is its exact accept length."""
        if not request.internal:
            self.metrics.of(request.metric_labels).counters["generation_tokens_total"] += request.completion_tokens
            self.metrics.of(request.metric_labels).counters["spec_verify_calls_total"] += request.verify_ct

    def _after_prefill(self, admitted: list[SimRequest]) -> None:
        now = asyncio.get_running_loop().time()
        for request in admitted:
            if request.aborted or request.output_len <= 0:
                self._finish(request, now)
                continue
            self._emit(request, 1, now)
            if not request.finished:
                self.running.append(request)

    def _after_decode(self) -> None:
        now = asyncio.get_running_loop().time()
        still_running: list[SimRequest] = []
        proposed = max(1, self.tiers.active.num_draft_tokens - 1) if self.tiers else 0
        batch_drafts: list[int] = []  # what the verify accepted, before max_new_tokens cuts it
        for request in self.running:
            if request.aborted:
                self._finish(request, now)
                continue
            remaining = request.output_len - request.completion_tokens
            if self.tiers is None:
                new_tokens = 1
            else:
                model = self.tiers.model(request.category, request.templated, request.repetition)
                drafts = model.sample_accepted_drafts(request.rng, position_factor(request.completion_tokens))
                batch_drafts.append(drafts)
                new_tokens = min(drafts + 1, remaining)
                request.verify_ct += 1
                request.accepted_drafts += new_tokens - 1
                request.proposed_drafts += proposed
                request.accept_histogram[new_tokens - 1] += 1
                if not request.internal:
                    self.spec_tokens_sum += new_tokens
                    self.spec_verify_sum += 1
                    self.spec_accepted_drafts_sum += new_tokens - 1
                    self.spec_proposed_drafts_sum += proposed
            self._emit(request, new_tokens, now)
            if not request.finished:
                still_running.append(request)
        self.running = still_running
        if self.tiers is not None:
            self.tiers.after_verify(batch_drafts)  # the next cycle runs at the tier this picks
        self._log_iterations += 1
        if self._log_iterations >= self.config.server_args["decode_log_interval"]:
            self._log_decode_stats()

    def _log_decode_stats(self) -> None:
        """Every decode_log_interval iterations, as SGLang does: throughput and accept-length gauges."""
        wall = time.monotonic()
        elapsed = max(wall - self._log_started, 1e-9)
        self.last_gen_throughput = self._log_tokens / elapsed
        self.metrics.gauges["gen_throughput"] = self.last_gen_throughput
        if self.tiers is not None:  # the active tier, refreshed with the other spec gauges as in SGLang
            self.metrics.gauges.update(self.tiers.gauges())
        if self.tiers is not None and self.spec_verify_sum:
            self.metrics.gauges["spec_accept_length"] = self.spec_tokens_sum / self.spec_verify_sum
            self.metrics.gauges["spec_accept_rate"] = self.spec_accepted_drafts_sum / self.spec_proposed_drafts_sum
        self._log_tokens = 0
        self._log_iterations = 0
        self._log_started = wall

    def _update_load_gauges(self) -> None:
        used = sum(r.prompt_tokens + r.completion_tokens for r in self.running)
        self.metrics.set_load(len(self.running), len(self.waiting), used, self.profile.kv_cache_tokens)
