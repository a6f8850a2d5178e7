"""Prometheus's HTTP query API, the judge's only source of numbers: /api/v1/query and /api/v1/query_range.

Every failure (unreachable, HTTP error, an error body, an unexpected result type) is a PrometheusError
naming the URL, the query and a fix; Prometheus's own error text is untrusted and printed through
sglab.core.untrusted.printable by the callers. An answer is untrusted input, bounded where it enters: at
most MAX_ANSWER_BYTES after decompression, whole within `deadline_s` (a server sending one byte every few
seconds never trips a per-read timeout), read by the one bounded JSON reader (depth, numbers, duplicate keys)
and checked for shape (objects of string labels, [number, string] samples). Credentials in the URL
(`http://user:pass@host`) are used, never printed.

`PrometheusServer` is the other side, for the rehearsal: a real Prometheus (Debian's `prometheus`, installed by
tools/install-prometheus.sh) scraping each simulator with the target labels a PodMonitor gives the cluster's
pods (namespace, pod, sglab_stack, sglab_arm, sglab_revision, rollouts_pod_template_hash), so the judge runs the
very queries it runs in production. The process lives in a temporary directory (config, TSDB) and dies with
its parent.
"""

from __future__ import annotations

import math
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from sglab.core.children import free_port, spawn, stop as stop_child
from sglab.core.untrusted_json import MiB, JsonLimits, JsonRefused, json_type, parse_bytes, read_stream
from sglab.sglang.secret_names import redact_url_credentials

DEFAULT_TIMEOUT_S = 15.0
DEFAULT_DEADLINE_S = 60.0  # one query, connect to last byte
MAX_TOKEN_BYTES = 16 * 1024
MAX_ANSWER_BYTES = 16 * MiB
ANSWER_LIMITS = JsonLimits("a Prometheus answer", MAX_ANSWER_BYTES, max_depth=16,
                           fix="query a Prometheus server (its /api/v1 query API), or narrow the query")


class PrometheusError(Exception):
    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


@dataclass(frozen=True)
class Series:
    """One series of a result: its labels and (unix time, value) samples (one for an instant query)."""

    labels: dict[str, str]
    samples: list[tuple[float, float]]


def selector(labels: dict[str, str]) -> str:
    """A PromQL label selector matching `labels` exactly (values escaped as PromQL strings)."""
    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    return "{" + ",".join(f"{name}={quoted(value)}" for name, value in sorted(labels.items())) + "}"


def _number(raw: Any) -> float:
    try:
        return float(raw)  # Prometheus writes NaN, +Inf, -Inf as strings; float() reads them
    except (TypeError, ValueError):
        return math.nan


class _Malformed(ValueError):
    """An answer whose shape is not the query API's; str() says where."""


def _sample(pair: Any, where: str) -> tuple[float, float]:
    """A [unix time, "value"] pair: the time a JSON number, the value a string (or a number)."""
    if not isinstance(pair, list) or len(pair) != 2:
        raise _Malformed(f"{where} is a JSON {json_type(pair)}, not a [time, value] pair")
    t, v = pair
    if type(t) not in (int, float) or not math.isfinite(t):
        raise _Malformed(f"the time of {where} is a JSON {json_type(t)}, not a number")
    if not isinstance(v, str) and type(v) not in (int, float):
        raise _Malformed(f"the value of {where} is a JSON {json_type(v)}, not a string")
    return float(t), _number(v)


def _labels(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _Malformed(f"the metric of {where} is a JSON {json_type(raw)}, not an object of labels")
    bad = next((k for k, v in raw.items() if not isinstance(v, str)), None)
    if bad is not None:
        raise _Malformed(f"the label {bad[:60]!r} of {where} is a JSON {json_type(raw[bad])}, not a string")
    return dict(raw)


class Prometheus:
    """A client of one Prometheus server (base URL, e.g. http://kube-prometheus-stack-prometheus.monitoring.svc:9090)."""

    def __init__(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, client: httpx.Client | None = None,
                 bearer_token_file: str | None = None, ca_file: str | None = None,
                 headers: dict[str, str] | None = None, deadline_s: float = DEFAULT_DEADLINE_S) -> None:
        self.url = url.rstrip("/")
        self._deadline_s = deadline_s
        self._token_file = bearer_token_file
        self._headers = dict(headers or {})
        if client is None:
            verify: Any = True
            if ca_file:
                try:
                    verify = ssl.create_default_context(cafile=ca_file)
                except (OSError, ssl.SSLError) as exc:
                    raise PrometheusError(f"cannot read Prometheus' CA {ca_file}: {type(exc).__name__}: {exc}",
                                          "check sglab:serving.monitoring.ca-configmap (a PEM certificate)") from None
            client = httpx.Client(timeout=min(timeout_s, deadline_s), verify=verify)
        self._client = client

    def _request_headers(self) -> dict[str, str]:
        """The extra headers and the bearer token, read at every query: the kubelet rotates mounted tokens."""
        headers = dict(self._headers)
        if self._token_file:
            try:
                with open(self._token_file, "rb") as fh:
                    token = fh.read(MAX_TOKEN_BYTES + 1)
            except OSError as exc:
                raise PrometheusError(f"cannot read the Prometheus token {self._token_file}: {exc.strerror}",
                                      "check sglab:serving.monitoring.bearer-token-secret") from None
            text = token.decode("ascii", "replace").strip()
            if len(token) > MAX_TOKEN_BYTES or not text or not text.isprintable():
                raise PrometheusError(f"the Prometheus token {self._token_file} is empty, too long or not printable "
                                      "text", "check sglab:serving.monitoring.bearer-token-secret")
            headers["Authorization"] = f"Bearer {text}"
        return headers

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "Prometheus":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _fetch(self, where: str, params: dict[str, Any], fix: str) -> tuple[int, bytes]:
        """(status, body) of one GET, whole within the deadline and the size cap. The request runs in a worker
        so that the deadline also bounds a server that trickles its headers (httpx times each read, not the
        answer); a worker past the deadline ends at its next read (its own loop checks the deadline too)."""
        headers = self._request_headers()
        deadline = time.monotonic() + self._deadline_s
        outcome: dict[str, Any] = {}

        def fetch() -> None:
            try:
                with self._client.stream("GET", where, params=params, headers=headers) as response:
                    outcome["answer"] = response.status_code, read_stream(response.iter_bytes(), ANSWER_LIMITS,
                                                                          deadline=deadline)
            except Exception as exc:  # handed to the caller's thread, which turns it into one refusal
                outcome["error"] = exc

        worker = threading.Thread(target=fetch, name="prometheus-query", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
        error = outcome.get("error")
        shown = self.shown_url
        if worker.is_alive() or (isinstance(error, JsonRefused) and "deadline" in str(error)):
            raise PrometheusError(f"{shown} did not answer whole within {self._deadline_s:g} s (a stalled or "
                                  "trickling server)", fix)
        if isinstance(error, JsonRefused):
            raise PrometheusError(f"{shown}: {error}", "narrow the query, or check that the URL is Prometheus") \
                from None
        if isinstance(error, httpx.HTTPError):
            detail = redact_url_credentials(f"{type(error).__name__}: {error}")
            raise PrometheusError(f"cannot reach Prometheus at {shown}: {detail}", fix) from None
        if error is not None:
            raise PrometheusError(f"cannot query Prometheus at {shown}: {type(error).__name__}", fix) from None
        status, body = outcome["answer"]
        return status, body

    @property
    def shown_url(self) -> str:
        """The URL as messages show it: credentials replaced by ***."""
        return redact_url_credentials(self.url)

    def _get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        where = f"{self.shown_url}{path}"
        fix = ("check the Prometheus URL (--prometheus-url or sglab:serving.monitoring.prometheus-url) and that it "
               "is reachable from here (e.g. kubectl port-forward -n monitoring "
               "svc/kube-prometheus-stack-prometheus 9090)")
        status, raw = self._fetch(f"{self.url}{path}", params, fix)
        try:
            body = parse_bytes(raw, ANSWER_LIMITS)
        except JsonRefused as exc:
            raise PrometheusError(f"{where} answered HTTP {status} with a body that is not acceptable JSON "
                                  f"({exc}; not a Prometheus query API?)", fix) from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            kind = body.get("errorType") if isinstance(body, dict) else None
            raise PrometheusError(f"{where}: Prometheus refused the query {params.get('query')!r}: "
                                  f"{str(kind or 'error')[:80]}: {str(error or f'HTTP {status}')[:500]}",
                                  "a bad query is a bug of sglab (report it); an overloaded Prometheus: retry")
        data = body.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PrometheusError(f"{where} answered without data.result", fix)
        data["where"] = where
        return data

    def query(self, promql: str, at: float) -> list[Series]:
        """An instant query evaluated at unix time `at` (a vector; a scalar becomes one unlabelled series)."""
        data = self._get("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})
        try:
            if data.get("resultType") == "scalar":
                return [Series({}, [_sample(data["result"], "the scalar")])]
            return [Series(_labels(r.get("metric"), f"series {i + 1}"), [_sample(r.get("value"), f"series {i + 1}")])
                    for i, r in enumerate(self._results(data, "vector", promql))]
        except _Malformed as exc:
            raise self._malformed(data, promql, exc) from None

    def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[Series]:
        """A range query: the expression evaluated at start, start + step, ... <= end (a matrix)."""
        data = self._get("/api/v1/query_range", {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                 "step": f"{step_s:g}s"})
        try:
            out = []
            for i, r in enumerate(self._results(data, "matrix", promql)):
                values = r.get("values") or []
                if not isinstance(values, list):
                    raise _Malformed(f"the values of series {i + 1} are a JSON {json_type(values)}, not a list")
                samples = [_sample(pair, f"sample {j + 1} of series {i + 1}") for j, pair in enumerate(values)]
                out.append(Series(_labels(r.get("metric"), f"series {i + 1}"), samples))
            return out
        except _Malformed as exc:
            raise self._malformed(data, promql, exc) from None

    @staticmethod
    def _malformed(data: dict[str, Any], promql: str, exc: _Malformed) -> PrometheusError:
        return PrometheusError(f"{data['where']} answered the query {promql!r} with a malformed result: {exc}",
                               "check that the URL is Prometheus' query API (not a proxy or another service)")

    @staticmethod
    def _results(data: dict[str, Any], kind: str, promql: str) -> list[dict[str, Any]]:
        if data.get("resultType") != kind:
            raise PrometheusError(f"the query {promql!r} returned a {str(data.get('resultType'))[:40]}, not a {kind}",
                                  "a bug of sglab's queries (report it)")
        result = data["result"]
        if not isinstance(result, list):
            raise _Malformed(f"the result is a JSON {json_type(result)}, not a list")
        bad = next((i for i, r in enumerate(result) if not isinstance(r, dict)), None)
        if bad is not None:
            raise _Malformed(f"series {bad + 1} is a JSON {json_type(result[bad])}, not an object")
        return result

    def ready(self) -> bool:
        try:
            with self._client.stream("GET", f"{self.url}/-/ready", headers=self._request_headers()) as response:
                return response.status_code == 200  # the body is never read
        except (httpx.HTTPError, PrometheusError):
            return False


# A real Prometheus for the rehearsal.

PROMETHEUS_ENV = "SGLAB_PROMETHEUS"  # the binary, if not /usr/bin/prometheus or on PATH
READY_TIMEOUT_S = 60.0
INSTALL_FIX = "install it: bash tools/install-prometheus.sh (Debian's prometheus package, as make test does)"


class PrometheusUnavailable(Exception):
    def __init__(self, message: str, fix: str = INSTALL_FIX) -> None:
        super().__init__(message)
        self.fix = fix


def prometheus_binary() -> str:
    candidates = [os.environ.get(PROMETHEUS_ENV), "/usr/bin/prometheus", shutil.which("prometheus")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise PrometheusUnavailable("no Prometheus server binary found (the rehearsal scrapes the simulators with a "
                                "real Prometheus)")


@dataclass(frozen=True)
class ScrapeTarget:
    address: str  # host:port
    labels: dict[str, str]


@dataclass
class PrometheusServer:
    """`with PrometheusServer(targets, interval_s=1) as prom:` -> prom.url serves the HTTP API."""

    targets: list[ScrapeTarget]
    interval_s: float = 1.0
    url: str = ""
    process: subprocess.Popen | None = None
    workdir: Path | None = None
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    def config_text(self) -> str:
        interval = f"{self.interval_s:g}s"
        return yaml.safe_dump({
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [{
                "job_name": "sglab-rehearsal", "scrape_interval": interval, "scrape_timeout": interval,
                "metrics_path": "/metrics", "honor_labels": False,
                "static_configs": [{"targets": [t.address], "labels": dict(t.labels)} for t in self.targets],
            }],
        }, sort_keys=False)

    def start(self) -> "PrometheusServer":
        binary = prometheus_binary()
        self._tmp = tempfile.TemporaryDirectory(prefix="sglab-prometheus-")
        self.workdir = Path(self._tmp.name)
        (self.workdir / "prometheus.yml").write_text(self.config_text())
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = open(self.workdir / "prometheus.log", "wb")
        try:
            self.process = spawn(  # dies with this process, however it ends (sglab.core.children)
                [binary, f"--config.file={self.workdir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                 "--storage.tsdb.retention.time=2h", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        with Prometheus(self.url, timeout_s=2.0) as client:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    tail = (self.workdir / "prometheus.log").read_text(errors="replace")[-1500:] if self.workdir else ""
                    self.stop()
                    raise PrometheusUnavailable(f"Prometheus exited with code {self.process.returncode}:\n{tail}",
                                                "see the log above")
                if client.ready():
                    return
                time.sleep(0.2)
        self.stop()
        raise PrometheusUnavailable(f"Prometheus did not become ready within {READY_TIMEOUT_S:g} s",
                                    "the machine may be overloaded; retry")

    def stop(self) -> None:
        if self.process is not None:
            stop_child(self.process, timeout_s=10)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "PrometheusServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
