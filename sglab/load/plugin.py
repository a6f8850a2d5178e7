"""The locustfile's plugin: its custom arguments (shown in Locust's web-UI form), the settings built from them, and
the Locust event listeners it installs (the arguments, the collector, worker messages, quitting with its starter).

--baseline-url / --candidate-url (or SGLAB_BASELINE_URL / SGLAB_CANDIDATE_URL), --endpoint,
--max-new-tokens, --request-timeout-s, --model and --stack (take prompts, endpoint and
max_new_tokens from that stack's load plan; explicit options still win).
"""

from __future__ import annotations

import os

from pydantic import ValidationError

from sglab.config.loadplan import LoadPlan
from sglab.load.settings import URL_ENV


_installed: set[int] = set()


def install(events) -> None:
    if id(events) in _installed:
        return
    _installed.add(id(events))
    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(_on_init)


def _on_init(environment, **_kw) -> None:
    # Locust's side only here: the `sglab ui` launcher, which never imports Locust, reads the arguments below
    # (sglab/ui/session.py); Locust imported after ssl ends in a RecursionError (tools/run-tests.sh)
    from sglab.load import distributed
    from sglab.load.collector import get_collector

    get_collector(environment)

    distributed.on_init(environment)
    _quit_with_parent(environment)


PARENT_CHECK_S = 1.0


def _quit_with_parent(environment) -> None:
    """A Locust process sglab started (a bench's worker, `sglab ui`'s web UI) quits when its starter is gone.
    On Linux the kernel's death signal does it first (sglab.core.children); this covers the other systems."""
    from sglab.core.children import PARENT_PID_ENV, parent_gone

    if not os.environ.get(PARENT_PID_ENV):
        return
    import gevent

    def watch() -> None:
        while not parent_gone():
            gevent.sleep(PARENT_CHECK_S)
        os._exit(1)

    gevent.spawn(watch)


# ---- the custom arguments and the settings built from them ----------------------------------------------------------


def add_arguments(parser) -> None:
    # The arm URLs and the stack go through Locust's own add_argument so they show in the web-UI form
    # (argument-group options are not marked include_in_web_ui); the rest stay command-line only.
    parser.add_argument("--baseline-url", default=os.environ.get(URL_ENV["baseline"], ""),
                        help="baseline server URL (env SGLAB_BASELINE_URL)")
    parser.add_argument("--candidate-url", default=os.environ.get(URL_ENV["candidate"], ""),
                        help="candidate server URL (env SGLAB_CANDIDATE_URL)")
    parser.add_argument("--stack", default="", help="take prompts and request shape from this stack's load plan")
    group = parser.add_argument_group("sglab", "A/B target and request shape")
    group.add_argument("--endpoint", choices=["generate", "chat"], default=None,
                       help="SGLang native /generate (default) or OpenAI /v1/chat/completions")
    group.add_argument("--max-new-tokens", type=int, default=None,
                       help="tokens generated per request (ignore_eos); default from the stack's load plan")
    group.add_argument("--request-timeout-s", type=float, default=None, help="per-request timeout")
    group.add_argument("--model", default="default", help="model name sent to the chat endpoint")


# The options above that shape a request (their plan fields, where the load plan has one). Locust's /swarm form
# may carry any of them, and copies a value whose option defaults to None as a raw string: form_shape_problem
# types them first.
SHAPE_OPTIONS = {"endpoint": "endpoint", "max_new_tokens": "max_new_tokens", "request_timeout_s": "request_timeout_s",
                 "model": None}
MAX_MODEL_NAME = 256


def form_shape_value(key: str, raw: str) -> object:
    """A form's value of a SHAPE_OPTIONS key as the option holds it ("" is unset: None, or the model's default)."""
    raw = raw.strip()
    if key == "model":
        return raw or "default"
    if not raw:
        return None
    return {"max_new_tokens": int, "request_timeout_s": float}.get(key, str)(raw)


def form_shape_problem(form) -> str | None:
    """Why a /swarm form's request-shape values cannot reach the users (None: they can): each typed as its option
    and checked by the load plan's own fields, so a number that is not one is refused before a user sends it."""
    updates = {}
    for key, field in SHAPE_OPTIONS.items():
        if key not in form:
            continue
        raw = str(form[key])
        try:
            value = form_shape_value(key, raw)
        except ValueError:
            return f"{key} {raw[:40]!r} is not a {'whole number' if key == 'max_new_tokens' else 'number'}"
        if key == "model" and (len(raw) > MAX_MODEL_NAME or not raw.isprintable()):
            return f"model must be at most {MAX_MODEL_NAME} printable characters"
        if field is not None and value is not None:
            updates[field] = value
    if updates:
        try:
            LoadPlan.model_validate({**LoadPlan().model_dump(), **updates})
        except ValidationError as exc:
            first = exc.errors()[0]
            return f"{'.'.join(str(part) for part in first['loc']) or 'the form'}: {first['msg']}"
    return None
