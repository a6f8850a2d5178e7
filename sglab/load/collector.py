"""Per-request samples of a Locust Environment, and the gate that decides which request runs next.

One `SampleCollector` per Environment (`get_collector(environment)`). Users ask it for a `Ticket`
(which arm, level, round and prompt the next request belongs to) and hand back a `RequestSample`
when the request ends; it keeps every sample and fires `environment.events.sglab_request_sample`
(with `sample=`) so other parts (the web UI's A/B tab) can follow live. The bench runner sets the
`Phase` (level, round, active arm, request quota) and closes the gate at a round's end.

Locust runs users as gevent greenlets in one thread, and nothing here yields, so it is greenlet-safe.
In distributed mode workers forward their samples to the master's collector with the stats reports.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, replace

from locust.event import EventHook

from sglab.metrics import fill_request_metrics
from sglab.schema.result import RequestSample

SAMPLE_EVENT = "sglab_request_sample"
REPORT_KEY = "sglab_samples"
PHASE_MESSAGE = "sglab_phase"
SETTINGS_MESSAGE = "sglab_settings"
IDLE_MESSAGE = "sglab_idle"
TEXT_KEY = "_output_text"  # a forwarded sample's answer (kept in the collector, not in the sample)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Phase:
    """What requests belong to right now. level 0 = interactive (level taken from the user count)."""

    level: int = 0
    round_index: int = 0
    warmup: bool = False
    arm: str | None = None
    prompt_offset: int = 0
    request_quota: int | None = None
    open: bool = True
    run_started_epoch: float | None = None
    serial: int = 0


@dataclass(frozen=True)
class Ticket:
    arm: str
    level: int
    round_index: int
    warmup: bool
    prompt_index: int
    started_epoch: float
    serial: int


class SampleCollector:
    def __init__(self, environment=None) -> None:
        self.environment = environment
        self.phase = Phase(run_started_epoch=time.time())
        self._samples: list[RequestSample] = []
        self._issued: dict[str, int] = {}
        self.in_flight = 0
        self._outbox: list[dict] = []
        self._texts: dict[str, str] = {}
        self.event = _sample_hook(environment)

    # ---- phase control (the bench runner) -------------------------------------------------
    def set_phase(self, **changes) -> Phase:
        """New phase; issue counters restart so every arm walks the same prompts from the offset."""
        self.phase = replace(self.phase, serial=self.phase.serial + 1, **changes)
        self._issued = {}
        return self.phase

    def close(self) -> None:
        self.phase = replace(self.phase, open=False)

    @property
    def idle(self) -> bool:
        return not self.phase.open and self.in_flight == 0

    @property
    def run_started_epoch(self) -> float:
        return self.phase.run_started_epoch or 0.0

    # ---- users ----------------------------------------------------------------------------
    def next_ticket(self, arm: str, prompt_count: int, level: int | None = None) -> Ticket | None:
        """The next request for `arm`, or None when the gate is closed or the quota is used."""
        phase = self.phase
        if not phase.open or (phase.arm is not None and phase.arm != arm):
            return None
        issued = self._issued.get(arm, 0)
        if phase.request_quota is not None and issued >= phase.request_quota:
            return None
        self._issued[arm] = issued + 1
        self.in_flight += 1
        return Ticket(
            arm=arm,
            level=phase.level or (level or 0),
            round_index=phase.round_index,
            warmup=phase.warmup,
            prompt_index=(phase.prompt_offset + issued) % max(1, prompt_count),
            started_epoch=time.time(),
            serial=phase.serial,
        )

    def release(self, ticket: Ticket) -> None:
        self.in_flight = max(0, self.in_flight - 1)

    def issued(self, arm: str) -> int:
        return self._issued.get(arm, 0)

    def record(self, sample: RequestSample, *, forward: bool = False, text: str | None = None) -> None:
        """Keep a sample (with its registry metrics filled in) and its answer's text, and announce it; on a
        worker, also queue both for the master."""
        fill_request_metrics(sample)
        self._samples.append(sample)
        if text is not None and sample.output_sha256 is not None:
            self._texts[sample.output_sha256] = text
        if forward:
            self._outbox.append({**sample.model_dump(mode="json"), TEXT_KEY: text})
        self.event.fire(sample=sample)

    def record_forwarded(self, raw: dict) -> None:
        """A sample a worker forwarded (take_outbox's form: the sample's JSON and its answer's text)."""
        raw = dict(raw)
        text = raw.pop(TEXT_KEY, None)
        self.record(RequestSample.model_validate(raw), text=text if isinstance(text, str) else None)

    def texts(self, samples: list[RequestSample]) -> dict[str, str]:
        """The answers' texts of these samples, each distinct text once (RunResult.output_texts)."""
        return {s.output_sha256: self._texts[s.output_sha256] for s in samples
                if s.output_sha256 is not None and s.output_sha256 in self._texts}

    # ---- reading --------------------------------------------------------------------------
    def samples(self, arm: str | None = None, *, level: int | None = None, round_index: int | None = None,
                warmup: bool | None = None) -> list[RequestSample]:
        return [
            s for s in self._samples
            if (arm is None or s.arm == arm)
            and (level is None or s.level == level)
            and (round_index is None or s.round_index == round_index)
            and (warmup is None or s.warmup == warmup)
        ]

    def arms(self) -> list[str]:
        return sorted({s.arm for s in self._samples})

    def clear(self) -> None:
        self._samples = []
        self._outbox = []
        self._texts = {}

    def take_outbox(self) -> list[dict]:
        out, self._outbox = self._outbox, []
        return out

    def phase_message(self) -> dict:
        return asdict(self.phase)


def _sample_hook(environment) -> EventHook:
    if environment is None:
        return EventHook()
    hook = getattr(environment.events, SAMPLE_EVENT, None)
    if hook is None:
        hook = EventHook()
        setattr(environment.events, SAMPLE_EVENT, hook)
    return hook


def get_collector(environment) -> SampleCollector:
    """The Environment's collector, created on first use (and wired for distributed runs)."""
    collector = getattr(environment, "sglab_collector", None)
    if collector is None:
        collector = SampleCollector(environment)
        environment.sglab_collector = collector
        _wire_distributed(environment, collector)
    return collector


def _wire_distributed(environment, collector: SampleCollector) -> None:
    """Workers ship samples with each stats report; the master keeps and re-announces them."""

    def on_report_to_master(client_id, data, **_kw):
        samples = collector.take_outbox()
        if samples:
            data[REPORT_KEY] = samples

    def on_worker_report(client_id, data, **_kw):
        for raw in data.get(REPORT_KEY, ()):
            collector.record_forwarded(raw)

    environment.events.report_to_master.add_listener(on_report_to_master)
    environment.events.worker_report.add_listener(on_worker_report)


def is_worker(environment) -> bool:
    runner = getattr(environment, "runner", None)
    return runner is not None and type(runner).__name__ == "WorkerRunner"
