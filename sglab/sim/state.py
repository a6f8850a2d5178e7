"""The live simulator: config, engine, metrics, faults and readiness, shared by all HTTP routes."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sglab.sim.cli_args import SimConfig
from sglab.sim.engine import Engine, SimRequest, TokenEvent
from sglab.sim.faults import FaultInjector
from sglab.sim.metrics import Metrics


class BadRequest(ValueError):
    """A request SGLang would answer with 400."""


@dataclass
class SimState:
    config: SimConfig
    metrics: Metrics = field(init=False)
    engine: Engine = field(init=False)
    faults: FaultInjector = field(init=False)
    started_at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        allowed = self.config.unknown_flags.get("tokenizer_metrics_allowed_custom_labels") or ()
        self.metrics = Metrics(self.config.served_model_name,
                               (allowed,) if isinstance(allowed, str) else tuple(allowed))
        self.engine = Engine(self.config, self.metrics)
        self.faults = FaultInjector(self.config.faults, self.config.seed)

    @property
    def warming_up(self) -> bool:
        return time.monotonic() - self.started_at < self.config.warmup_s

    def expected_chunks(self, request: SimRequest) -> int:
        if self.engine.acceptance is None:
            return max(2, request.output_len)
        return max(2, int(request.output_len / self.engine.acceptance.expected_accept_length()))

    def custom_labels(self, headers: Any) -> tuple[tuple[str, str], ...]:
        """SGLang's custom metric labels of a request: the JSON object in the custom-labels header, only the
        allowed labels with string values (anything else is ignored, as a malformed header is)."""
        if not self.metrics.custom_labels:
            return ()
        name = self.config.unknown_flags.get("tokenizer_metrics_custom_labels_header") or "x-custom-labels"
        try:
            given = json.loads(headers.get(name) or "{}")
        except ValueError:
            return ()
        if not isinstance(given, dict):
            return ()
        return tuple((k, given[k]) for k in self.metrics.custom_labels if isinstance(given.get(k), str))

    def new_request(self, *, rid: str, prompt_tokens: int, prompt_key: str, max_new_tokens: int,
                    ignore_eos: bool, internal: bool = False) -> SimRequest:
        """Validate lengths like SGLang's tokenizer manager, then fix the request's seeded output."""
        context = self.config.context_length
        if prompt_tokens >= context:
            raise BadRequest(f"The input ({prompt_tokens} tokens) is longer than the model's context length "
                             f"({context} tokens).")
        if prompt_tokens + max_new_tokens > context:
            raise BadRequest(
                f"Requested token count exceeds the model's maximum context length of {context} tokens. "
                f"You requested a total of {prompt_tokens + max_new_tokens} tokens: {prompt_tokens} tokens from "
                f"the input messages and {max_new_tokens} tokens for the completion. Please reduce the number "
                "of tokens in the input messages or the completion to fit within the limit.")
        request = SimRequest(rid=rid, prompt_tokens=prompt_tokens, max_new_tokens=max_new_tokens,
                             ignore_eos=ignore_eos, prompt_key=prompt_key, internal=internal,
                             events=asyncio.Queue())
        return self.engine.prepare(request)

    def spec_meta(self, event: TokenEvent) -> dict[str, Any]:
        """The speculative fields of every SGLang era (0.4 spec_verify_ct ... newest histogram aliases)."""
        spec = self.config.spec
        if spec is None:
            return {}
        meta: dict[str, Any] = {"spec_verify_ct": event.verify_ct}
        if event.verify_ct > 0:
            proposed = event.proposed_drafts or event.verify_ct * max(1, spec.num_draft_tokens - 1)
            meta.update({
                "spec_accept_length": event.completion_tokens / event.verify_ct,
                "spec_accept_rate": event.accepted_drafts / proposed,
                "spec_accept_token_num": event.accepted_drafts,
                "spec_draft_token_num": proposed,
                "spec_num_correct_drafts": event.accepted_drafts,
                "spec_num_proposed_drafts": proposed,
                "spec_correct_drafts_histogram": list(event.accept_histogram),
                "spec_accepted_drafts": event.accepted_drafts,
                "spec_proposed_drafts": proposed,
                "spec_accept_histogram": list(event.accept_histogram),
            })
        return meta


STATE_KEY = web.AppKey("sglab_sim_state", SimState)
