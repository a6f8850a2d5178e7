"""SGLang's native POST /generate: single or batched, streaming (SSE, cumulative text) or not."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from sglab.sim.engine import SimRequest, TokenEvent
from sglab.sim.faults import NO_FAULT, RequestFault
from sglab.sim.state import STATE_KEY, BadRequest, SimState
from sglab.sim.tokens import count_prompt_tokens

DEFAULT_MAX_NEW_TOKENS = 128


def generate_error(message: str, status: int = 400) -> web.Response:
    """SGLang's /generate error body (`_create_error_response`)."""
    return web.json_response({"error": {"message": message}}, status=status)


def sse(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def _as_list(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, list):
        if len(value) != n:
            raise BadRequest(f"{name} has {len(value)} entries for a batch of {n} prompts")
        return value
    return [value] * n


def parse_sampling(params: Any, default_max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> tuple[int, bool]:
    """(max_new_tokens, ignore_eos) after SGLang's sampling-params checks."""
    params = params or {}
    if not isinstance(params, dict):
        raise BadRequest("sampling_params must be an object")
    max_new = params.get("max_new_tokens", default_max_new_tokens)
    if max_new is None:
        max_new = default_max_new_tokens
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 0:
        raise BadRequest(f"max_new_tokens must be at least 0, got {max_new!r}.")
    temperature = params.get("temperature", 1.0)
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise BadRequest(f"temperature must be non-negative, got {temperature!r}.")
    top_p = params.get("top_p", 1.0)
    if not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise BadRequest(f"top_p must be in (0, 1], got {top_p!r}.")
    n = params.get("n", 1)
    if n != 1:
        raise BadRequest(f"n={n!r}: the simulator supports n=1 only")
    ignore_eos = params.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise BadRequest(f"ignore_eos must be a boolean, got {ignore_eos!r}")
    return max_new, ignore_eos


def _prompts(payload: dict[str, Any]) -> tuple[list[tuple[int, str]], bool]:
    """[(prompt_tokens, prompt_key)], and whether the input was a batch."""
    text, ids = payload.get("text"), payload.get("input_ids")
    if (text is None) == (ids is None):
        raise BadRequest("Either text or input_ids should be provided." if text is None
                         else "Only one of text or input_ids should be provided.")
    if text is not None:
        if isinstance(text, str):
            return [(count_prompt_tokens(text), text)], False
        if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            return [(count_prompt_tokens(t), t) for t in text], True
        raise BadRequest("text must be a string or a non-empty list of strings")
    if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
        return [(len(ids), json.dumps(ids))], False
    if isinstance(ids, list) and ids and all(isinstance(x, list) and all(isinstance(i, int) for i in x) for x in ids):
        return [(max(1, len(x)), json.dumps(x)) for x in ids], True
    raise BadRequest("input_ids must be a list of token ids or a list of such lists")


def build_requests(state: SimState, payload: Any) -> tuple[list[SimRequest], bool]:
    if not isinstance(payload, dict):
        raise BadRequest("request body must be a JSON object")
    prompts, batched = _prompts(payload)
    n = len(prompts)
    sampling = _as_list(payload.get("sampling_params"), n, "sampling_params")
    rids = _as_list(payload.get("rid"), n, "rid") if payload.get("rid") is not None else [None] * n
    out = []
    for (prompt_tokens, key), params, rid in zip(prompts, sampling, rids):
        max_new, ignore_eos = parse_sampling(params)
        out.append(state.new_request(rid=str(rid) if rid else uuid.uuid4().hex, prompt_tokens=prompt_tokens,
                                     prompt_key=key, max_new_tokens=max_new, ignore_eos=ignore_eos))
    return out, batched


def generate_meta(state: SimState, request: SimRequest, event: TokenEvent) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "id": request.rid,
        "finish_reason": request.finish_reason() if event.finished else None,
        "prompt_tokens": request.prompt_tokens,
        "weight_version": "default",
        "total_retractions": 0,
        "completion_tokens": event.completion_tokens,
        "cached_tokens": 0,
    }
    meta.update(state.spec_meta(event))
    if event.finished:
        meta["e2e_latency"] = event.at - request.arrival
        if state.config.server_args["enable_metrics"]:
            meta.update(_timing_fields(request, event))
    return meta


def _timing_fields(request: SimRequest, event: TokenEvent) -> dict[str, Any]:
    """The per-request timing SGLang adds to the final chunk with --enable-metrics (wall-clock stamps)."""
    def wall(at: float | None) -> float | None:
        return None if at is None else request.arrival_wall + (at - request.arrival)

    admitted = request.admitted_at if request.admitted_at is not None else event.at
    first = request.first_token_at
    decode_s = event.at - first if first is not None else 0.0
    return {
        "queue_time": admitted - request.arrival,
        "request_received_ts": request.arrival_wall,
        "prefill_finished_ts": wall(first),
        "decode_finished_ts": wall(event.at),
        "inference_time": event.at - admitted,
        "decode_throughput": (event.completion_tokens - 1) / decode_s if decode_s > 0 else 0.0,
    }


def generate_body(state: SimState, request: SimRequest, event: TokenEvent) -> dict[str, Any]:
    """The non-streaming /generate payload as of `event`."""
    return {"text": event.text, "output_ids": json.loads(f"[{event.ids_json}]"),
            "meta_info": generate_meta(state, request, event)}


def generate_event_bytes(state: SimState, request: SimRequest, event: TokenEvent, index: int | None) -> bytes:
    """One SSE event of a /generate stream: cumulative text and ids, meta_info; e2e_latency once finished.

    Assembled from pre-serialised parts: the cumulative ids are never re-encoded."""
    tail = "" if index is None else f',"index":{index}'
    return (f'data: {{"text":{json.dumps(event.text)},"output_ids":[{event.ids_json}],'
            f'"meta_info":{json.dumps(generate_meta(state, request, event), separators=(",", ":"))}{tail}}}\n\n'
            ).encode()


async def events_of(requests: list[SimRequest]) -> AsyncIterator[tuple[int, SimRequest, TokenEvent]]:
    """(index, request, event) for every event of every request, in delivery order."""
    if len(requests) == 1:
        while True:
            event = await requests[0].events.get()
            yield 0, requests[0], event
            if event.finished:
                return
    merged: asyncio.Queue = asyncio.Queue()

    async def pump(i: int, request: SimRequest) -> None:
        while True:
            event = await request.events.get()
            await merged.put((i, request, event))
            if event.finished:
                return

    tasks = [asyncio.create_task(pump(i, r)) for i, r in enumerate(requests)]
    try:
        remaining = len(requests)
        while remaining:
            item = await merged.get()
            if item[2].finished:
                remaining -= 1
            yield item
    finally:
        for task in tasks:
            task.cancel()


async def wait_all(requests: list[SimRequest]) -> None:
    async for _ in events_of(requests):
        pass


async def handle_generate(request: web.Request) -> web.StreamResponse:
    state: SimState = request.app[STATE_KEY]
    if state.warming_up:
        return generate_error("The server is starting up; retry after /health returns 200.", 503)
    if not state.engine.alive:
        return generate_error(f"The scheduler is dead: {state.engine.failure}", 503)
    try:
        payload = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return generate_error("request body is not valid JSON")
    try:
        sims, batched = build_requests(state, payload)
    except BadRequest as exc:
        return generate_error(str(exc))
    fault = state.faults.draw(state.expected_chunks(sims[0]))
    if fault.error:
        return generate_error("injected fault (sglab sim --sim-error-rate)", state.config.faults.error_status)
    for sim in sims:
        sim.metric_labels = state.custom_labels(request.headers)
        state.engine.submit(sim)
    if not payload.get("stream", False):
        await wait_all(sims)
        bodies = [generate_body(state, s, s.last_event) for s in sims]
        return web.json_response(bodies if batched else bodies[0])
    return await stream_sse(request, state, sims, fault,
                            lambda i, sim, event: generate_event_bytes(state, sim, event, i if batched else None))


async def stream_sse(request: web.Request, state: SimState, sims: list[SimRequest], fault: RequestFault,
                     render, *, tail=None) -> web.StreamResponse:
    """Write one SSE event per engine event (through `render`), honour faults, end with [DONE].

    `render(index, sim, event)` returns a payload, a list of payloads, ready SSE bytes or None; `tail()`
    the payloads sent after the last engine event (OpenAI's final and usage chunks).
    """
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    interval = state.config.server_args["stream_interval"]
    sent_at = {id(s): 0 for s in sims}
    chunks = 0
    try:
        async for index, sim, event in events_of(sims):
            if not event.finished and event.completion_tokens - sent_at[id(sim)] < interval and sent_at[id(sim)] > 0:
                continue
            sent_at[id(sim)] = event.completion_tokens
            payload = render(index, sim, event)
            if payload is None:
                continue
            if isinstance(payload, bytes):
                await response.write(payload)
            else:
                for item in payload if isinstance(payload, list) else [payload]:
                    await response.write(sse(item))
            chunks += 1
            if fault is not NO_FAULT and fault.disconnect_after_chunk == chunks:
                for s in sims:
                    state.engine.abort(s)
                if request.transport is not None:
                    request.transport.close()
                return response
            if fault is not NO_FAULT and fault.stall_after_chunk == chunks:
                await asyncio.sleep(state.config.faults.stall_s)
        for item in (tail() if tail else []):
            await response.write(sse(item))
        await response.write(SSE_DONE)
        await response.write_eof()
    except ConnectionError:  # the client went away: abort its requests, nothing left to answer
        for s in sims:
            state.engine.abort(s)
    except asyncio.CancelledError:
        for s in sims:
            state.engine.abort(s)
        raise
    return response
