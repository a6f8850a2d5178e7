"""The arms' servers: started here or reached at given URLs, checked against the stack, recorded, read and watched.

- Where the arms run: `sglab sim` processes started here, or URLs of an existing deployment. A simulator arm
  gets exactly the launch arguments and env the stack renders for it (`sglab.config.arms`), with only
  --host/--port replaced by 127.0.0.1 and a free port. Simulators die with the process that started them,
  however it ends (SIGKILL included, and stopped ones too): they are started through sglab.core.children (on
  Linux the kernel sends them SIGKILL when their parent dies; elsewhere the simulator watches PARENT_PID_ENV).
- The live-flag check: does a running server run what the stack declares for its arm? The bench refuses to
  measure when a server's live flags differ from the arm's launch args (the check llm-d-benchmark skips for
  SGLang). The HTTP client and the flag normalisation are the SGLang contract's (sglab/sglang/).
- What served each arm, recorded with the evidence (ArmInfo.machine): the server's own description and, in the
  cluster, the pod behind the arm's Service and its node.
  - /get_server_info: the simulator carries its `sglab_sim` block (producer 'simulator', its time scale),
    anything else is a real server ('sglang'); `version` is the version the server reports.
  - The image: in the cluster the pod's container image and the digest the kubelet pulled (`imageID`),
    elsewhere the stack's image (its `@sha256:` digest when it names one). A simulator sglab starts runs no image.
  - In the cluster (the benchmark Job, target 'in-cluster'): the Service named by the arm's URL, the pods its
    selector picks, the node of the first ready one and that node's GPU labels (NVIDIA GPU Feature Discovery:
    nvidia.com/gpu.*, nvidia.com/cuda.*, nvidia.com/mig.*; GKE: cloud.google.com/gke-*). The Job's Role may get
    the two Services and list pods; a ClusterRole lets it get nodes, only where the stack opts in
    (benchmark-job.read-node-labels, sglab/deploy/benchmark_job.py). Whatever cannot be read is a note, never a
    failed run.
- The server-side accept length of one arm segment (`AcceptWindow`), and which method measured it. Preferred:
  the `/metrics` counters (Δ generation tokens / Δ verify calls over the segment): exact, and it needs no
  `/flush_cache`, which refuses while requests run and empties the radix cache of a shared server. Fallback,
  only when a speculative arm lacks the counters: flush before the segment (resets avg_spec_accept_length) and
  read `/get_server_info` after it. The method is chosen once per run for every arm alike, so both arms see the
  same cache treatment (flushed every segment, or never).
- The watchdog (`ArmWatch`): is every arm still a server? A greenlet that watches them while a bench runs. A
  paired A/B run cannot go on without one of its arms, and a dead or frozen arm must not be mistaken for a slow
  one (a SIGKILLed candidate used to be judged `reject` on connection-refused "requests"; a SIGSTOPped one held
  the bench for its whole request timeout). Three signs, checked every WATCH_POLL_S:
  - a simulator we started has exited (its process, no guessing);
  - `/health` has not answered 200 for HEALTH_GRACE_S in a row (refused, 5xx or no answer in
    HEALTH_REQUEST_TIMEOUT_S: a stopped process still accepts connections but never replies);
  - the active arm has requests on the wire but nothing arrived (no chunk, no request ended) for the plan's
    stall timeout (`stall_timeout_s`), counted from the latest request start: a server whose /health lies.
  The first sign found is reported once through `on_failure(arm, what)`; the runner ends the run as invalid.
  The progress board is per process: in distributed mode only the first two signs apply.

Nothing here imports gevent or Locust at import time: the `sglab ui` launcher starts its targets here before
Locust runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import httpx

from sglab.config.arms import ArmSpec
from sglab.core.children import PARENT_PID_ENV, free_port, spawn, stop_all
from sglab.core.untrusted import is_control, printable
from sglab.schema.result import ArmMachine
from sglab.sglang.client import ServerInfo, flush_cache, read_accept_length, spec_counters
from sglab.sglang.env import without_server_env
from sglab.sglang.flags import POSITIONAL, decode, flag_key, flag_text, norm_value
from sglab.sglang.secret_names import credential_kind, has_url_credentials, redact_url_credentials

HEALTH_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0


class TargetError(Exception):
    pass


def local_args(args: tuple[str, ...] | list[str], port: int) -> list[str]:
    """The arm's args with --host/--port pointed at 127.0.0.1:<port> (added if absent)."""
    out: list[str] = []
    i = 0
    seen = set()
    while i < len(args):
        arg = args[i]
        if arg in ("--host", "--port") and i + 1 < len(args):
            out += [arg, "127.0.0.1" if arg == "--host" else str(port)]
            seen.add(arg)
            i += 2
            continue
        out.append(arg)
        i += 1
    if "--host" not in seen:
        out += ["--host", "127.0.0.1"]
    if "--port" not in seen:
        out += ["--port", str(port)]
    return out


@dataclass
class SimProcess:
    arm: ArmSpec
    port: int
    process: subprocess.Popen
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def sim_command(arm: ArmSpec, port: int) -> list[str]:
    return [sys.executable, "-m", "sglab.sim", *local_args(arm.args, port)]  # `sglab sim` without the rest of the CLI


def start_sim(arm: ArmSpec, *, extra_env: dict[str, str] | None = None, log_dir: Path | None = None,
              port: int | None = None) -> SimProcess:
    """One simulator for an arm; `port`: the port it had before a restart (its URL stays the arm's)."""
    restart = port is not None
    port = port or free_port()
    inherited = {k: v for k, v in without_server_env(os.environ).items() if k != PARENT_PID_ENV}
    env = {**inherited, **arm.env, **(extra_env or {})}  # the server sees exactly the arm's env
    log_path = log_dir / f"sim-{arm.name}.log" if log_dir else None
    log = open(log_path, "ab" if restart else "wb") if log_path else None  # a restart appends
    try:
        proc = spawn(sim_command(arm, port), env=env, stdout=subprocess.DEVNULL if log is None else log,
                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    finally:
        if log is not None:
            log.close()
    return SimProcess(arm, port, proc, log_path)


def wait_healthy(url: str, *, timeout_s: float = HEALTH_TIMEOUT_S, process: subprocess.Popen | None = None,
                 log_path: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:] if log_path and log_path.exists() else ""
            raise TargetError(f"the simulator for {url} exited with code {process.returncode}\n{tail}")
        try:
            resp = httpx.get(url.rstrip("/") + "/health", timeout=2.0)
            if resp.status_code == 200:
                return
            last = f"HTTP {resp.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.1)
    raise TargetError(f"{url} did not become healthy within {timeout_s:g} s (last: {last})")


@dataclass
class Targets:
    """Arm name -> URL, plus the simulator processes to stop afterwards (if we started them)."""

    urls: dict[str, str]
    processes: list[SimProcess] = field(default_factory=list)

    def stop(self) -> None:
        stop_all([sim.process for sim in self.processes], timeout_s=STOP_TIMEOUT_S)
        self.processes = []

    def __enter__(self) -> "Targets":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """In a gevent process (the bench) while servers start: SIGTERM and SIGHUP end it as Ctrl-C does
    (KeyboardInterrupt in the main greenlet), so what was started is stopped and nothing is left half-made."""
    import gevent

    main = gevent.getcurrent()
    handlers = [gevent.signal_handler(sig, gevent.kill, main, KeyboardInterrupt)  # asynchronous: never blocks
                for sig in (signal.SIGTERM, signal.SIGHUP)]
    try:
        yield
    finally:
        for handler in handlers:
            handler.cancel()


def start_sims(arms: list[ArmSpec], *, extra_env: dict[str, str] | None = None, log_dir: Path | None = None,
               timeout_s: float = HEALTH_TIMEOUT_S, arm_env: dict[str, dict[str, str]] | None = None) -> Targets:
    """One simulator per arm, all started before waiting so they boot in parallel; `arm_env`: arm -> env of
    that arm alone (its simulated node)."""
    targets = Targets({})
    try:
        for arm in arms:
            sim = start_sim(arm, extra_env={**(extra_env or {}), **(arm_env or {}).get(arm.name, {})},
                            log_dir=log_dir)
            targets.processes.append(sim)
            targets.urls[arm.name] = sim.url
        for sim in targets.processes:
            wait_healthy(sim.url, timeout_s=timeout_s, process=sim.process, log_path=sim.log_path)
    except BaseException:
        targets.stop()
        raise
    return targets


MAX_URL_CHARS = 2048


def url_problem(url: str) -> str | None:
    """Why `url` is not a server's plain http(s) URL, or None: it is requested, recorded in the result and
    printed, so it is checked where it enters."""
    if len(url) > MAX_URL_CHARS:
        return f"is {len(url)} characters long; give at most {MAX_URL_CHARS}"
    if any(is_control(ch) or ch.isspace() for ch in url):
        return "holds a control, invisible or space character; give the plain URL"
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https") or not rest.split("/", 1)[0]:
        return "is not a server's URL; give http://HOST:PORT (or https://)"
    return None


def given_urls(urls: dict[str, str], *, timeout_s: float = 10.0) -> Targets:
    """The arms at these URLs once each answers /health; a URL with credentials is refused before it is used,
    recorded (result.target.urls) or printed."""
    for arm, url in urls.items():
        problem = url_problem(url)
        if problem is not None:
            raise TargetError(f"the {printable(arm, limit=40)} URL {printable(url, limit=120)} {problem}")
        if has_url_credentials(url) or credential_kind(url):
            raise TargetError(f"the {printable(arm, limit=40)} URL holds credentials "
                              f"({printable(redact_url_credentials(url), limit=120)}), which the result would record "
                              "and the console show; give the server's URL without user:password@ (reach a "
                              "protected server through kubectl port-forward or a proxy on this machine)")
    for url in urls.values():
        wait_healthy(url, timeout_s=timeout_s)
    return Targets({name: url.rstrip("/") for name, url in urls.items()})


# ---- the live-flag check --------------------------------------------------------------------------------------------
# Flags sglab substitutes per target (the sim gets free ports; a Service maps ports).
NOT_COMPARED = frozenset({"--host", "--port", POSITIONAL})


def live_mismatches(arm: ArmSpec, info: ServerInfo) -> list[str]:
    """Every way the live server differs from the arm's declared launch args and NCCL env."""
    found: list[str] = []
    expected = decode(arm.args)
    for flag, decoded in expected.items():
        if flag in NOT_COMPARED:
            continue
        value = flag_text(decoded)
        key = flag_key(flag)
        if key not in info.args:
            found.append(f"{arm.name}: {flag} is declared ({value}) but the server does not report {key}")
            continue
        live = info.args[key]
        if norm_value(live) != norm_value(decoded if isinstance(decoded, tuple) else value):
            found.append(f"{arm.name}: {flag} is {live!r} on the server, the stack declares {value!r}")
    live_algorithm = info.args.get("speculative_algorithm")
    if "--speculative-algorithm" not in expected and norm_value(live_algorithm) not in ("none", ""):
        found.append(f"{arm.name}: the server runs speculative decoding ({live_algorithm}) "
                     "but the stack declares none for this arm")
    reported = info.nccl_env
    if reported is not None:
        declared = {k: v for k, v in arm.env.items() if k.startswith("NCCL_")}
        for key in sorted(set(declared) | set(reported)):
            if declared.get(key) != reported.get(key):
                found.append(f"{arm.name}: env {key} is {reported.get(key)!r} on the server, "
                             f"the stack declares {declared.get(key)!r}")
    return [printable(f, limit=None) for f in found]  # they quote the server's answer (untrusted text)


def unverified(arm: ArmSpec, info: ServerInfo) -> list[str]:
    """What the arm declares that the server does not report, so the live check cannot compare it: its NCCL_*
    settings where the server reports no environment (SGLang does not; sglab's simulator does)."""
    if info.nccl_env is not None:
        return []
    return [f"{key}={value}" for key, value in sorted(arm.env.items()) if key.startswith("NCCL_")]


# ---- what served each arm (ArmInfo.machine) -------------------------------------------------------------------------
# Node labels kept: the GPU, its driver and CUDA (GFD publishes both `cuda.driver.*` and the newer
# `cuda.driver-version.*`), MIG, and the cloud's accelerator labels.
NODE_LABEL_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig.", "cloud.google.com/gke-accelerator",
                       "cloud.google.com/gke-gpu", "node.kubernetes.io/instance-type")
NODE_LABELS_SKIPPED = ("nvidia.com/gfd.timestamp",)
SIM_BLOCK = "sglab_sim"


def server_identity(info: ServerInfo) -> dict[str, Any]:
    """producer, server_version and (a simulator's) time_scale and node_name from a server's /get_server_info."""
    block = info.raw.get(SIM_BLOCK)
    simulator = isinstance(block, dict) and block.get("simulator") is True
    scale = block.get("time_scale") if simulator else None
    version = info.version
    out = {"producer": "simulator" if simulator else "sglang",
           "server_version": printable(version, limit=120) if isinstance(version, (str, int, float)) and version != ""
           else None,  # untrusted text, recorded as the result shows it
           "time_scale": float(scale) if isinstance(scale, (int, float)) and not isinstance(scale, bool) else None}
    node = block.get("node") if simulator else None
    if isinstance(node, str) and node:
        out["node_name"] = printable(node, limit=63)  # the simulated node it reports (untrusted text)
    return out


def image_digest(image: str | None) -> str | None:
    """'sha256:...' of an image reference or a kubelet imageID (`docker-pullable://repo@sha256:...`)."""
    if not image or "@" not in image:
        return image if image and image.startswith("sha256:") else None
    digest = image.rsplit("@", 1)[1]
    return digest if digest.startswith("sha256:") else None


def gpu_labels(labels: dict[str, str] | None) -> dict[str, str]:
    return {k: str(v) for k, v in sorted((labels or {}).items())
            if k.startswith(NODE_LABEL_PREFIXES) and k not in NODE_LABELS_SKIPPED}


def _service_of(url: str, namespace: str) -> tuple[str, str] | None:
    """(service, namespace) of an in-cluster Service URL: `http://NAME[.NAMESPACE[.svc...]]:PORT`."""
    host = urlparse(url).hostname or ""
    parts = host.split(".")
    if not parts[0] or host.replace(".", "").isdigit():
        return None
    return parts[0], parts[1] if len(parts) > 1 and parts[1] != "svc" else namespace


def pod_ready(pod: Any) -> bool:
    conditions = (pod.status.conditions or []) if pod.status is not None else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def cluster_placement(url: str, *, core_api: Any = None, namespace: str | None = None) -> dict[str, Any]:
    """pod, node_name, image, image_digest, node_labels and notes of the arm behind `url` (in the cluster)."""
    notes: list[str] = []
    try:
        core, namespace = _api(core_api, namespace)
    except Exception as exc:  # not in a cluster, or no credentials: nothing to read
        return {"notes": [f"the Kubernetes API is not reachable ({type(exc).__name__}: {exc})"]}
    found = _service_of(url, namespace)
    if found is None:
        return {"notes": [f"{url} does not name a Service, so its pods are not known"]}
    service, namespace = found
    step = "get Service"
    try:
        selector = core.read_namespaced_service(service, namespace).spec.selector or {}
        step = "list pods"
        pods = core.list_namespaced_pod(namespace, label_selector=",".join(f"{k}={v}" for k, v in
                                                                            sorted(selector.items()))).items
        chosen = sorted((p for p in pods if pod_ready(p)), key=lambda p: p.metadata.name) or \
            sorted(pods, key=lambda p: p.metadata.name)
        if not chosen:
            return {"notes": [f"no pod behind Service {namespace}/{service}"]}
        pod = chosen[0]
        if len(chosen) > 1:
            notes.append(f"{len(chosen)} pods behind Service {namespace}/{service}; recorded {pod.metadata.name}")
        out: dict[str, Any] = {"pod": pod.metadata.name, "node_name": pod.spec.node_name}
        statuses = (pod.status.container_statuses or []) if pod.status is not None else []
        if statuses:
            out["image"], out["image_source"] = statuses[0].image, "pod"
            out["image_digest"] = image_digest(statuses[0].image_id) or image_digest(statuses[0].image)
        if pod.spec.node_name:
            try:
                out["node_labels"] = gpu_labels(core.read_node(pod.spec.node_name).metadata.labels)
            except Exception as exc:  # no node reader (a tenant-scoped stack): the node's name is still recorded
                reason = getattr(exc, "reason", None) or type(exc).__name__
                notes.append(f"cannot get node {pod.spec.node_name} for its GPU labels: {reason} (the stack "
                             "grants it with benchmark-job.read-node-labels: true)")
        out["notes"] = notes
        return out
    except Exception as exc:  # Forbidden, NotFound, timeouts: a note, the run goes on
        reason = getattr(exc, "reason", None) or type(exc).__name__
        return {"notes": notes + [f"cannot {step} for {url}: {reason} (the benchmark Job's RBAC reads the arms' "
                                  "Services, pods and nodes)"]}


def _api(core_api: Any, namespace: str | None) -> tuple[Any, str]:
    if core_api is not None:
        return core_api, namespace or "default"
    from kubernetes import client, config

    from sglab.results.sink import current_namespace

    config.load_incluster_config()
    return client.CoreV1Api(), namespace or current_namespace()


def arm_machine(*, url: str | None, target_kind: str, declared_image: str,
                info: ServerInfo | None, info_error: str | None = None,
                placement: Callable[[str], dict[str, Any]] = cluster_placement) -> ArmMachine:
    """One arm's machine record: the server's identity, and its image and node as far as they are known."""
    fields: dict[str, Any] = {"notes": []}
    if info is not None:
        fields.update(server_identity(info))
    elif info_error:
        fields["notes"].append(f"cannot read server info: {info_error}")
    if target_kind == "sim":
        fields["producer"] = "simulator"  # sglab started it: whatever it says, no image runs it
    else:
        fields.update(image=declared_image, image_source="stack", image_digest=image_digest(declared_image))
    if target_kind == "in-cluster" and url:
        found = placement(url)
        fields["notes"] += found.pop("notes", [])
        fields.update(found)
    fields["notes"] = [printable(n, limit=None) for n in fields["notes"]]  # they quote servers and the API
    return ArmMachine(**fields)


# ---- the accept length of one arm segment ---------------------------------------------------------------------------
AcceptMethod = Literal["metrics", "flush_cache"]
PROBE_TIMEOUT_S = 3.0


def accept_method(urls: Mapping[str, str], speculative: Mapping[str, bool]) -> AcceptMethod:
    """'metrics' when every speculative arm serves both counters, else 'flush_cache' (today's method)."""
    arms = [arm for arm, spec in speculative.items() if spec and arm in urls]
    if arms and all(spec_counters(urls[arm], timeout_s=PROBE_TIMEOUT_S) is not None for arm in arms):
        return "metrics"
    return "flush_cache"


class AcceptWindow:
    """Open before a segment's first request, close after its last; `close()` gives the accept length."""

    def __init__(self, url: str, method: AcceptMethod, *, speculative: bool) -> None:
        self.url = url
        self.method: AcceptMethod = method
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


# ---- the watchdog: is every arm still a server? ---------------------------------------------------------------------
WATCH_POLL_S = 0.25
HEALTH_EVERY_S = 1.0
HEALTH_REQUEST_TIMEOUT_S = 2.0
HEALTH_GRACE_S = 10.0
# A tenth of the request timeout, at least STALL_FLOOR_S: 20 s with not a single chunk from any of an
# arm's in-flight requests is no working server (the first token of 64 long prompts arrives well before).
STALL_FLOOR_S = 20.0
STALL_FRACTION_OF_REQUEST_TIMEOUT = 0.1


def stall_timeout_s(request_timeout_s: float) -> float | None:
    """The plan's stall timeout; None when the request timeout is shorter and catches a stall first."""
    stall = max(STALL_FLOOR_S, STALL_FRACTION_OF_REQUEST_TIMEOUT * request_timeout_s)
    return stall if stall < request_timeout_s else None


def touch(environment, arm: str) -> None:
    """A chunk arrived or a request of `arm` ended: the arm is making progress."""
    board = environment.__dict__.setdefault("sglab_arm_progress", {})
    board[arm] = time.monotonic()


def last_progress(environment, arm: str) -> float | None:
    return environment.__dict__.get("sglab_arm_progress", {}).get(arm)


def on_wire(environment, arm: str, delta: int) -> None:
    """Requests of `arm` actually sent and not ended (an open-loop request waiting for its time is not)."""
    board = environment.__dict__.setdefault("sglab_arm_on_wire", {})
    board[arm] = max(0, board.get(arm, 0) + delta)
    if delta > 0:
        touch(environment, arm)  # the stall clock runs from the request's start, not the arm's idle time


def wire_count(environment, arm: str) -> int:
    return environment.__dict__.get("sglab_arm_on_wire", {}).get(arm, 0)


def exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"exited ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"exited (signal {-returncode})"
    return f"exited with code {returncode}"


class ArmWatch:
    def __init__(self, environment, urls: dict[str, str], processes: dict[str, subprocess.Popen], *,
                 stall_s: float | None, on_failure: Callable[[str, str], None],
                 active: Callable[[], tuple[str | None, int]]) -> None:
        self.environment = environment
        self.urls = urls
        self.processes = processes
        self.stall_s = stall_s
        self.on_failure = on_failure
        self.active = active  # -> (active arm, requests in flight)
        self.unhealthy_since: dict[str, float] = {}
        self.last_health: dict[str, str] = {}
        self._next_health = 0.0
        self._greenlet: Any = None  # the gevent.Greenlet that polls
        # one client for the whole run: a new httpx client per poll builds an SSL context (tens of ms of
        # CPU in the load generator's only thread), which showed up as jitter in the measured streams
        self._client: httpx.Client | None = None

    def start(self) -> "ArmWatch":
        import gevent

        self._client = httpx.Client(timeout=HEALTH_REQUEST_TIMEOUT_S)
        self._greenlet = gevent.spawn(self._loop)
        return self

    def stop(self) -> None:
        import gevent

        poll, self._greenlet = self._greenlet, None
        if poll is not None and poll is not gevent.getcurrent():
            # dead before its client closes: a poll already due to resume would otherwise use a closed client
            poll.kill(block=True, timeout=HEALTH_REQUEST_TIMEOUT_S + 1)
        if self._client is not None:
            self._client.close()
            self._client = None

    def _loop(self) -> None:
        import gevent

        while True:
            found = self.check()
            if found is not None:
                self.on_failure(*found)
                return
            gevent.sleep(WATCH_POLL_S)

    def check(self) -> tuple[str, str] | None:
        for arm, proc in self.processes.items():
            if proc.poll() is not None:
                return arm, exit_description(proc.returncode)
        now = time.monotonic()
        if now >= self._next_health:
            self._next_health = now + HEALTH_EVERY_S
            for arm, url in self.urls.items():
                found = self._health(arm, url)
                if found is not None:
                    return found
        return self._stalled(time.monotonic())

    def _health(self, arm: str, url: str) -> tuple[str, str] | None:
        try:
            client = self._client or httpx.Client(timeout=HEALTH_REQUEST_TIMEOUT_S)
            self._client = client
            status = client.get(url.rstrip("/") + "/health").status_code
            problem = None if status == 200 else f"HTTP {status}"
        except httpx.HTTPError as exc:
            problem = type(exc).__name__
        now = time.monotonic()
        if problem is None:
            self.unhealthy_since.pop(arm, None)
            return None
        since = self.unhealthy_since.setdefault(arm, now)
        if now - since >= HEALTH_GRACE_S:
            return arm, f"stopped answering /health for {now - since:.0f} s (last: {problem})"
        return None

    def _stalled(self, now: float) -> tuple[str, str] | None:
        if self.stall_s is None:
            return None
        arm, in_flight = self.active()
        if arm is None or in_flight == 0:
            return None
        last = last_progress(self.environment, arm)
        if last is not None and now - last >= self.stall_s:
            return arm, f"made no progress for {now - last:.0f} s with {in_flight} request(s) in flight"
        return None
