"""The simulator's HTTP API as SGLang serves it: the native POST /generate (single or batched, streaming as SSE
with cumulative text, or not) and the OpenAI-compatible /v1/completions, /v1/chat/completions and /v1/models.

OpenAI streams carry deltas; the usage chunk (`choices: []`) is sent only with stream_options.include_usage,
since bench_serving-style parsers index choices[0]. With `"return_spec_tokens_details": true` the
response carries `sglext.spec_tokens_details` (SGLang's names); a stream sends it in its own
`choices: []` chunk after the finish chunk and before the usage chunk, as SGLang does.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from sglab.sim.engine import SimRequest, TokenEvent
from sglab.sim.faults import NO_FAULT, RequestFault
from sglab.sim.state import STATE_KEY, BadRequest, SimState
from sglab.sim.tokens import chat_prompt_key, count_chat_tokens, count_prompt_tokens


# SGLang's native POST /generate.
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


# The OpenAI-compatible routes.
COMPLETION_DEFAULT_MAX_TOKENS = 16
SPEC_DETAIL_DEFAULTS: dict[str, Any] = {
    "spec_accept_rate": 0.0, "spec_accept_length": 0.0, "spec_cap_length": 0.0, "spec_block_accept_length": 0.0,
    "spec_num_correct_drafts": 0, "spec_num_proposed_drafts": 0, "spec_verify_ct": 0,
    "spec_correct_drafts_histogram": [], "spec_cap_lens_histogram": [],
}


def openai_error(message: str, status: int = 400, err_type: str = "BadRequestError") -> web.Response:
    return web.json_response({"object": "error", "message": message, "type": err_type, "param": None,
                              "code": status}, status=status)


def _finish(sim: SimRequest, event: TokenEvent | None = None) -> tuple[str | None, Any]:
    reason = sim.finish_reason() if event is None or event.finished else None
    if reason is None:
        return None, None
    if reason["type"] == "stop":
        return "stop", reason.get("matched")
    return reason["type"], None


def _usage(sims: list[SimRequest], *, drop_none: bool = False) -> dict[str, Any]:
    prompt = sum(s.prompt_tokens for s in sims)
    completion = sum(s.completion_tokens for s in sims)
    usage = {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
             "prompt_tokens_details": None, "reasoning_tokens": 0}
    return {k: v for k, v in usage.items() if v is not None} if drop_none else usage


async def _body(request: web.Request) -> dict[str, Any]:
    if request.content_type != "application/json":
        raise BadRequest(f"Unsupported Content-Type {request.content_type!r}; use application/json")
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadRequest("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def _spec_details(state: SimState, sim: SimRequest) -> dict[str, Any] | None:
    """SGLang's SpecTokensDetails from the request's final meta_info; None without speculation.

    Cap lengths belong to DSpark's capped verification and stay 0 / [] for EAGLE, as in SGLang."""
    meta = state.spec_meta(sim.last_event) if sim.last_event is not None else {}
    if not meta:
        return None
    return {key: meta.get(key, default) for key, default in SPEC_DETAIL_DEFAULTS.items()}


def _sglext(body: dict[str, Any], state: SimState, sims: list[SimRequest]) -> dict[str, Any] | None:
    if not body.get("return_spec_tokens_details"):
        return None
    details = [_spec_details(state, s) for s in sims]
    if all(d is None for d in details):
        return None
    return {"spec_tokens_details": details[0] if len(details) == 1 else details}


def _sglext_tail(body: dict[str, Any], state: SimState, rid: str, obj: str, created: int, model: str,
                 sims: list[SimRequest]) -> list[dict[str, Any]]:
    sglext = _sglext(body, state, sims)
    if sglext is None:
        return []
    return [{"id": rid, "object": obj, "created": created, "model": model, "choices": [], "usage": None,
             "sglext": sglext}]


def _limits(body: dict[str, Any], default_max: int | None) -> tuple[int | None, bool]:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", default_max))
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0):
        raise BadRequest(f"max_tokens must be a non-negative integer, got {max_tokens!r}")
    if body.get("n", 1) != 1:
        raise BadRequest("the simulator supports n=1 only")
    stream_options = body.get("stream_options")
    if stream_options is not None and not body.get("stream"):
        raise BadRequest("Stream options can only be defined when `stream=True`.")
    ignore_eos = body.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise BadRequest("ignore_eos must be a boolean")
    if not isinstance(body.get("return_spec_tokens_details", False), bool):
        raise BadRequest("return_spec_tokens_details must be a boolean")
    for name, low, high in (("temperature", 0, 2), ("top_p", 0, 1)):
        value = body.get(name)
        if value is not None and (not isinstance(value, (int, float)) or not low <= value <= high):
            raise BadRequest(f"{name} must be in [{low}, {high}], got {value!r}")
    return max_tokens, ignore_eos


def _make(state: SimState, prompt_tokens: int, key: str, max_tokens: int | None, ignore_eos: bool) -> SimRequest:
    if max_tokens is None:
        max_tokens = max(0, state.config.context_length - prompt_tokens)
    return state.new_request(rid=uuid.uuid4().hex, prompt_tokens=prompt_tokens, prompt_key=key,
                             max_new_tokens=max_tokens, ignore_eos=ignore_eos)


def _completion_prompts(prompt: Any) -> list[tuple[int, str]]:
    if isinstance(prompt, str):
        return [(count_prompt_tokens(prompt), prompt)]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return [(count_prompt_tokens(p), p) for p in prompt]
        if all(isinstance(p, int) for p in prompt):
            return [(len(prompt), json.dumps(prompt))]
        if all(isinstance(p, list) and p and all(isinstance(i, int) for i in p) for p in prompt):
            return [(len(p), json.dumps(p)) for p in prompt]
    raise BadRequest("prompt must be a string, a list of strings, or token ids")


def _chat_prompt(messages: Any) -> tuple[int, str]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    contents: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise BadRequest("each message needs a role")
        content = message.get("content") or ""
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        if not isinstance(content, str):
            raise BadRequest("message content must be a string or a list of content parts")
        contents.append(f"{message['role']}: {content}")
    return count_chat_tokens(contents), chat_prompt_key(contents)


def _guard(state: SimState) -> web.Response | None:
    if state.warming_up:
        return openai_error("The server is starting up; retry after /health returns 200.", 503,
                            "ServiceUnavailableError")
    if not state.engine.alive:
        return openai_error(f"The scheduler is dead: {state.engine.failure}", 503, "ServiceUnavailableError")
    return None


async def completions(request: web.Request) -> web.StreamResponse:
    state: SimState = request.app[STATE_KEY]
    if (busy := _guard(state)) is not None:
        return busy
    try:
        body = await _body(request)
        max_tokens, ignore_eos = _limits(body, COMPLETION_DEFAULT_MAX_TOKENS)
        sims = [_make(state, n, key, max_tokens, ignore_eos) for n, key in _completion_prompts(body.get("prompt"))]
        for sim in sims:
            sim.metric_labels = state.custom_labels(request.headers)
    except BadRequest as exc:
        return openai_error(str(exc))
    model = body.get("model") or state.config.served_model_name
    fault = state.faults.draw(state.expected_chunks(sims[0]))
    if fault.error:
        return openai_error("injected fault (sglab sim --sim-error-rate)", state.config.faults.error_status,
                            "InternalServerError")
    for sim in sims:
        state.engine.submit(sim)
    rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
    if not body.get("stream"):
        await wait_all(sims)
        choices = []
        for i, sim in enumerate(sims):
            reason, matched = _finish(sim)
            choices.append({"index": i, "text": sim.tokens.text(0, sim.completion_tokens), "logprobs": None,
                            "finish_reason": reason, "matched_stop": matched})
        return web.json_response(_with_sglext(
            {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": choices,
             "usage": _usage(sims), "metadata": {"weight_version": "default"}}, _sglext(body, state, sims)))
    sent = {id(s): 0 for s in sims}

    def render(index: int, sim: SimRequest, event: TokenEvent) -> dict[str, Any] | None:
        start, sent[id(sim)] = sent[id(sim)], event.completion_tokens
        reason, matched = _finish(sim, event)
        if start == event.completion_tokens and reason is None:
            return None
        return {"id": rid, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": index, "text": sim.tokens.text(start, event.completion_tokens),
                             "logprobs": None, "finish_reason": reason, "matched_stop": matched}],
                "usage": _running_usage(body, sum(s.prompt_tokens for s in sims), sum(sent.values()))}

    return await stream_sse(request, state, sims, fault, render,
                                         tail=lambda: _sglext_tail(body, state, rid, "text_completion", created, model,
                                                                   sims)
                                         + _usage_tail(body, rid, "text_completion", created, model, sims))


def _with_sglext(response: dict[str, Any], sglext: dict[str, Any] | None) -> dict[str, Any]:
    return response if sglext is None else {**response, "sglext": sglext}


def _running_usage(body: dict[str, Any], prompt: int, completion: int) -> dict[str, Any] | None:
    """stream_options.continuous_usage_stats: usage up to this chunk on every chunk (else null)."""
    options = body.get("stream_options") or {}
    if not (options.get("include_usage") and options.get("continuous_usage_stats")):
        return None
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
            "reasoning_tokens": 0}


def _usage_tail(body: dict[str, Any], rid: str, obj: str, created: int, model: str,
                sims: list[SimRequest]) -> list[dict[str, Any]]:
    if not (body.get("stream_options") or {}).get("include_usage"):
        return []
    return [{"id": rid, "object": obj, "created": created, "model": model, "choices": [],
             "usage": _usage(sims, drop_none=True)}]


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state: SimState = request.app[STATE_KEY]
    if (busy := _guard(state)) is not None:
        return busy
    try:
        body = await _body(request)
        max_tokens, ignore_eos = _limits(body, None)
        prompt_tokens, key = _chat_prompt(body.get("messages"))
        sim = _make(state, prompt_tokens, key, max_tokens, ignore_eos)
        sim.metric_labels = state.custom_labels(request.headers)
    except BadRequest as exc:
        return openai_error(str(exc))
    model = body.get("model") or state.config.served_model_name
    fault = state.faults.draw(state.expected_chunks(sim))
    if fault.error:
        return openai_error("injected fault (sglab sim --sim-error-rate)", state.config.faults.error_status,
                            "InternalServerError")
    state.engine.submit(sim)
    rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    if not body.get("stream"):
        await wait_all([sim])
        reason, matched = _finish(sim)
        message = {"role": "assistant", "content": sim.tokens.text(0, sim.completion_tokens),
                   "reasoning_content": None, "tool_calls": None}
        return web.json_response(_with_sglext(
            {"id": rid, "object": "chat.completion", "created": created, "model": model,
             "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reason,
                          "matched_stop": matched}],
             "usage": _usage([sim]), "metadata": {"weight_version": "default"}}, _sglext(body, state, [sim])))
    sent = {"tokens": 0, "role": False}

    def chunk(delta: dict[str, Any], reason: str | None = None, matched: Any = None) -> dict[str, Any]:
        usage = _running_usage(body, sim.prompt_tokens, sent["tokens"])
        return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason,
                             "matched_stop": matched}], "usage": usage}

    def render(index: int, sim: SimRequest, event: TokenEvent) -> list[dict[str, Any]]:
        out = []
        if not sent["role"]:
            sent["role"] = True
            out.append(chunk({"role": "assistant", "content": ""}))
        start, sent["tokens"] = sent["tokens"], event.completion_tokens
        if event.completion_tokens > start:
            out.append(chunk({"content": sim.tokens.text(start, event.completion_tokens)}))
        return out

    def tail() -> list[dict[str, Any]]:
        reason, matched = _finish(sim)
        return ([chunk({}, reason, matched)]
                + _sglext_tail(body, state, rid, "chat.completion.chunk", created, model, [sim])
                + _usage_tail(body, rid, "chat.completion.chunk", created, model, [sim]))

    return await stream_sse(request, state, [sim], fault, render, tail=tail)


async def models(request: web.Request) -> web.Response:
    state: SimState = request.app[STATE_KEY]
    name = state.config.served_model_name
    return web.json_response({"object": "list", "data": [
        {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang", "root": name,
         "parent": None, "max_model_len": state.config.context_length}]})


async def model_card(request: web.Request) -> web.Response:
    state: SimState = request.app[STATE_KEY]
    name = state.config.served_model_name
    if request.match_info["model_id"] != name:
        return openai_error(f"The model '{request.match_info['model_id']}' does not exist", 404, "model_not_found")
    return web.json_response({"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                              "root": name, "parent": None, "max_model_len": state.config.context_length})


def routes() -> list[web.RouteDef]:
    return [
        web.post("/v1/completions", completions),
        web.post("/v1/chat/completions", chat_completions),
        web.get("/v1/models", models),
        web.get("/v1/models/{model_id:.+}", model_card),
    ]
