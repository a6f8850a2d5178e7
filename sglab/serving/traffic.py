"""The rehearsal's production traffic: Locust users sending the prompt suite, split between the revisions by
the canary weight, as a gateway splits it.

Closed loop, non-streaming chat completions (the judge reads the servers' own metrics, so the client needs
no token timing), with the prompt's category in SGLang's x-custom-labels header when the stack names a
category label. The weight splits the users (one Locust user class per revision, weighted): each user keeps
to one revision, so each simulator holds a steady concurrency, as each pod behind a gateway holds a steady
share of many clients (a per-request coin would make a 5 s window's load, and its speed, jump by ~20%). The category mix
can change while
the traffic runs (`TrafficPlan.shift_to`): the watch must notice when it moves toward what the draft handles
badly. Every loop is bounded: a run stops when its Locust runner is stopped; a request by its timeout.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser
from locust.env import Environment

from sglab.load.datasets import load_suite
from sglab.load.datasets.model import PromptRecord

CUSTOM_LABELS_HEADER = "x-custom-labels"
REQUEST_TIMEOUT_S = 120.0
# A non-streamed chat reply of at most max_tokens tokens is a few KB: past this, the request fails, the rest unread.
MAX_REPLY_BYTES = 1 << 20
SPAWN_RATE = 100.0


@dataclass
class TrafficPlan:
    """Where requests go (route name -> URL, weight in percent) and what they carry."""

    routes: dict[str, tuple[str, float]]
    records: dict[str, list[PromptRecord]]  # category -> the suite's records
    mix: dict[str, float]  # category -> share of requests (normalised when drawn)
    max_tokens: int = 128
    category_label: str | None = None
    seed: int = 0
    sent: dict[str, int] = field(default_factory=dict)  # route -> requests sent
    failed: dict[str, int] = field(default_factory=dict)

    @classmethod
    def suite(cls, routes: dict[str, tuple[str, float]], **kw: Any) -> "TrafficPlan":
        records: dict[str, list[PromptRecord]] = {}
        for record in load_suite().records:
            records.setdefault(record.category, []).append(record)
        mix = {c: float(len(r)) for c, r in records.items()}  # the suite's own proportions
        return cls(routes=routes, records=records, mix=mix, **kw)

    def shift_to(self, category: str, share: float) -> None:
        """From now on `share` of the requests are `category`, the rest in the suite's proportions."""
        if category not in self.records:
            raise ValueError(f"unknown category {category!r}: choose from {', '.join(self.records)}")
        others = {c: float(len(r)) for c, r in self.records.items() if c != category}
        total = sum(others.values())
        self.mix = {**{c: (1 - share) * v / total for c, v in others.items()}, category: share}

    def draw(self, rng: random.Random) -> PromptRecord:
        categories = list(self.mix)
        category = rng.choices(categories, weights=[self.mix[c] for c in categories])[0]
        return rng.choice(self.records[category])

    def request(self, record: PromptRecord) -> tuple[dict[str, Any], dict[str, str]]:
        body = {**record.chat_body(), "max_tokens": min(self.max_tokens, record.output_tokens or self.max_tokens),
                "ignore_eos": True, "stream": False}
        headers = {CUSTOM_LABELS_HEADER: json.dumps({self.category_label: record.category})} \
            if self.category_label else {}
        return body, headers


class ServingUser(FastHttpUser):
    """One production client of one revision (`route`): a request, its reply, the next request."""

    abstract = True
    wait_time = constant(0)
    host = "http://127.0.0.1"
    route = ""

    def __init__(self, environment: Environment) -> None:
        self.plan: TrafficPlan = environment.sglab_traffic  # type: ignore[attr-defined]
        self.network_timeout = REQUEST_TIMEOUT_S
        super().__init__(environment)
        self.rng = random.Random(f"{self.plan.seed}-{id(self)}")

    @task
    def one_request(self) -> None:
        route, record = self.route, self.plan.draw(self.rng)
        body, headers = self.plan.request(record)
        url = self.plan.routes[route][0].rstrip("/") + "/v1/chat/completions"
        self.plan.sent[route] = self.plan.sent.get(route, 0) + 1
        with self.client.post(url, json=body, headers=headers, name=route, catch_response=True,
                              stream=True) as resp:
            problem = f"HTTP {resp.status_code}" if resp.status_code != 200 else _over_bound(resp)
            if problem:
                self.plan.failed[route] = self.plan.failed.get(route, 0) + 1
                resp.failure(problem)
            else:
                resp.success()


def _over_bound(resp) -> str | None:
    """Read the reply up to MAX_REPLY_BYTES (+1 to see it is past); what is past it is never read."""
    raw = resp._response
    if raw is None:
        return "no response"
    try:
        size = len(raw.read(MAX_REPLY_BYTES + 1))
    except Exception as exc:  # a broken body
        return f"broken reply: {type(exc).__name__}"
    finally:
        raw.release()
    return f"reply over {MAX_REPLY_BYTES} bytes (MAX_REPLY_BYTES)" if size > MAX_REPLY_BYTES else None


class Traffic:
    """`with Traffic(plan, users):` runs the users until the block ends."""

    def __init__(self, plan: TrafficPlan, users: int) -> None:
        self.plan, self.users = plan, users
        # Locust splits the users by the classes' integer weights (per mille of the requests' share)
        classes = [type(f"{name.capitalize()}User", (ServingUser,), {"route": name, "weight": max(1, round(10 * w)),
                                                                      "abstract": False})
                   for name, (_, w) in plan.routes.items() if w > 0]
        self.env = Environment(user_classes=classes)
        self.env.sglab_traffic = plan  # type: ignore[attr-defined]

    def __enter__(self) -> "Traffic":
        runner = self.env.create_local_runner()
        runner.start(self.users, spawn_rate=SPAWN_RATE)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.env.runner is not None:
            self.env.runner.quit()
