"""`--target sim`: the rollout rehearsed on this machine with real parts.

Simulators for the revisions (each with exactly the launch arguments and env its stack renders), a real
Prometheus scraping them with the target labels a PodMonitor gives the cluster's pods, and Locust sending the
prompt suite split by the canary weight; the judge (or the watch) then reads only Prometheus's HTTP API, as
in the cluster. Which configs play stable and canary: `--stable` / `--canary` (STACK or STACK:baseline /
STACK:candidate), by default the stack's config before its newest promotion and the one it holds now.

The traffic (`Traffic`) is the rehearsal's production traffic: Locust users sending the prompt suite, split
between the revisions by the canary weight, as a gateway splits it. Closed loop, non-streaming chat completions
(the judge reads the servers' own metrics, so the client needs no token timing), with the prompt's category in
SGLang's x-custom-labels header when the stack names a category label. The weight splits the users (one Locust
user class per revision, weighted): each user keeps to one revision, so each simulator holds a steady
concurrency, as each pod behind a gateway holds a steady share of many clients (a per-request coin would make a
5 s window's load, and its speed, jump by ~20%). The category mix can change while the traffic runs
(`TrafficPlan.shift_to`): the watch must notice when it moves toward what the draft handles badly. Every loop is
bounded: a run stops when its Locust runner is stopped; a request by its timeout.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser
from locust.env import Environment

from sglab.config.arms import ArmSpec, baseline_arm, candidate_arm
from sglab.config.loader import LoadedStack, load_stack
from sglab.core.errors import ConfigError
from sglab.load.datasets import PromptRecord, load_suite
from sglab.load.request import stack_sim_env
from sglab.load.targets import Targets, start_sims
from sglab.promotion.log import LOG_NAME, current_promotion
from sglab.serving.prometheus import PrometheusServer, ScrapeTarget
from sglab.serving.spec import ARM, HASH, REVISION, STACK, JudgeSpec

ROLES = ("candidate", "baseline")


def rehearsal_spec(spec: JudgeSpec, **update: object) -> tuple[JudgeSpec, str]:
    """The judge's spec on this machine and a line saying where it sees HTTP errors: the simulators count their
    responses as the sidecar the stack declares would (serving.canary.http-responses); a stack that declares
    none is rehearsed as blind to them as its judge is in the cluster."""
    from sglab.config.serving import HttpResponses
    from sglab.sim.metrics import HTTP_CODE_LABEL, HTTP_RESPONSES

    declared = spec.http_responses
    if declared is None:
        line = ("http errors: none declared (serving.canary.http-responses), so the judge sees only SGLang's "
                "aborted requests, here as in the cluster")
    else:
        update["http_responses"] = HttpResponses(metric=HTTP_RESPONSES, code_label=HTTP_CODE_LABEL)
        line = (f"http errors: the simulators' {HTTP_RESPONSES} by {HTTP_CODE_LABEL} stands in for the declared "
                f"{declared.metric} by {declared.code_label}")
    return spec.model_copy(update=update), line


@dataclass(frozen=True)
class Revision:
    """One server of the rehearsal: which arm of which stack, under which labels."""

    name: str  # stable, canary, control
    arm: ArmSpec
    source: str  # e.g. "eagle-default:candidate"
    sim_env: dict[str, str]

    def labels(self, spec: JudgeSpec) -> dict[str, str]:
        base = {"namespace": spec.namespace, STACK: spec.stack, "pod": f"{spec.stack}-{self.name}-0"}
        if self.name == "control":
            return {**base, ARM: "baseline"}
        digest = hashlib.sha256(f"{self.arm.config_hash}/{self.name}".encode()).hexdigest()[:10]
        return {**base, ARM: "candidate", REVISION: self.name, HASH: digest}


def resolve(ref: str, name: str, root: Path | None, *, loaded: dict[str, LoadedStack] | None = None) -> Revision:
    """STACK (its candidate arm) or STACK:baseline / STACK:candidate."""
    stack_name, _, role = ref.partition(":")
    role = role or "candidate"
    if role not in ROLES:
        raise ConfigError(ref, None, f"{role!r} is not an arm",
                          f"write {stack_name}:candidate or {stack_name}:baseline")
    stack = (loaded or {}).get(stack_name) or load_stack(stack_name, root)
    arm = (candidate_arm if role == "candidate" else baseline_arm)(stack.config)
    return Revision(name, arm.with_name(name), f"{stack_name}:{role}", stack_sim_env(stack))


def previous_config(loaded: LoadedStack) -> LoadedStack | None:
    """The stack as it was before its newest promotion still in effect (None: no such promotion logged)."""
    from sglab.promotion.promote import apply_promotion

    entry = current_promotion(loaded.path.parent / LOG_NAME, loaded.name)
    previous = entry.record.get("previous") if entry is not None else None
    if not isinstance(previous, dict):
        return None
    text = apply_promotion(loaded.path.read_text(encoding="utf-8"), previous)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / loaded.path.name
        path.write_text(text, encoding="utf-8")
        return load_stack(loaded.name, path=path)


def default_revisions(loaded: LoadedStack, root: Path | None) -> tuple[Revision, Revision]:
    """(stable, canary): the config before the newest promotion and the one the stack holds now; without a
    logged promotion, the stack's own baseline (the server without speculation) is the stable."""
    canary = resolve(f"{loaded.name}:candidate", "canary", root, loaded={loaded.name: loaded})
    before = previous_config(loaded)
    if before is None:
        return resolve(f"{loaded.name}:baseline", "stable", root, loaded={loaded.name: loaded}), canary
    stable = Revision("stable", candidate_arm(before.config).with_name("stable"),
                      f"{loaded.name}:candidate before its newest promotion", stack_sim_env(before))
    return stable, canary


@dataclass
class Rehearsal:
    """The running parts: `with Rehearsal(...) as r:` -> r.prometheus_url, r.traffic.plan, r.selectors."""

    spec: JudgeSpec
    revisions: list[Revision]
    weights: dict[str, float]  # revision -> percent of requests
    users: int
    time_scale: float
    max_tokens: int = 128
    log_dir: Path | None = None
    prometheus_url: str = ""
    traffic: Traffic | None = None
    started_at: float = 0.0
    _stack: ExitStack = field(default_factory=ExitStack)

    @property
    def selectors(self) -> dict[str, dict[str, str]]:
        """The judge's view of each revision: its pod-template hash, as Argo passes it to the analysis."""
        return {r.name: {k: v for k, v in r.labels(self.spec).items() if k != "pod"} for r in self.revisions}

    def __enter__(self) -> "Rehearsal":
        try:
            env = {"SGLAB_SIM_TIME_SCALE": f"{self.time_scale:g}"}
            targets: Targets = self._stack.enter_context(self._start_sims(env))
            prom = PrometheusServer([ScrapeTarget(targets.urls[r.name].removeprefix("http://"), r.labels(self.spec))
                                     for r in self.revisions], interval_s=self.spec.scrape_interval_s)
            self._stack.enter_context(prom)
            self.prometheus_url = prom.url
            plan = TrafficPlan.suite({r.name: (targets.urls[r.name], self.weights[r.name]) for r in self.revisions},
                                     max_tokens=self.max_tokens, category_label=self.spec.category_label)
            self.traffic = self._stack.enter_context(Traffic(plan, self.users))
            self.started_at = time.time()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start_sims(self, env: dict[str, str]) -> Targets:
        # one simulator per revision, each with its own stack's sim knobs (start_sims takes one env for all)
        targets = Targets({})
        try:
            for revision in self.revisions:
                started = start_sims([revision.arm], extra_env={**revision.sim_env, **env}, log_dir=self.log_dir)
                targets.processes += started.processes
                targets.urls.update(started.urls)
        except BaseException:
            targets.stop()
            raise
        return targets

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


# The traffic.

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
