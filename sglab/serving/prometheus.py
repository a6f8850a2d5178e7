"""Prometheus's HTTP query API, the judge's only source of numbers: /api/v1/query and /api/v1/query_range.

Every failure (unreachable, HTTP error, an error body, an unexpected result type) is a PrometheusError
naming the URL, the query and a fix; Prometheus's own error text is untrusted and printed through
sglab.core.untrusted.printable by the callers.
"""

from __future__ import annotations

import math
import ssl
from dataclasses import dataclass
from typing import Any

import httpx

DEFAULT_TIMEOUT_S = 15.0
MAX_TOKEN_BYTES = 16 * 1024


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


class Prometheus:
    """A client of one Prometheus server (base URL, e.g. http://kube-prometheus-stack-prometheus.monitoring.svc:9090)."""

    def __init__(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, client: httpx.Client | None = None,
                 bearer_token_file: str | None = None, ca_file: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
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
            client = httpx.Client(timeout=timeout_s, verify=verify)
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

    def _get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        where = f"{self.url}{path}"
        fix = ("check the Prometheus URL (--prometheus-url or sglab:serving.monitoring.prometheus-url) and that it "
               "is reachable from here (e.g. kubectl port-forward -n monitoring "
               "svc/kube-prometheus-stack-prometheus 9090)")
        try:
            response = self._client.get(where, params=params, headers=self._request_headers())
        except httpx.HTTPError as exc:
            raise PrometheusError(f"cannot reach Prometheus at {where}: {type(exc).__name__}: {exc}", fix) from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(f"{where} answered HTTP {response.status_code} with a body that is not JSON "
                                  "(not a Prometheus query API?)", fix) from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            kind = body.get("errorType") if isinstance(body, dict) else None
            raise PrometheusError(f"Prometheus refused the query {params.get('query')!r}: {kind or 'error'}: "
                                  f"{error or f'HTTP {response.status_code}'}",
                                  "a bad query is a bug of sglab (report it); an overloaded Prometheus: retry")
        data = body.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PrometheusError(f"{where} answered without data.result", fix)
        return data

    def query(self, promql: str, at: float) -> list[Series]:
        """An instant query evaluated at unix time `at` (a vector; a scalar becomes one unlabelled series)."""
        data = self._get("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})
        if data.get("resultType") == "scalar":
            t, v = data["result"]
            return [Series({}, [(float(t), _number(v))])]
        return [Series(dict(r.get("metric") or {}), [(float(r["value"][0]), _number(r["value"][1]))])
                for r in self._results(data, "vector", promql)]

    def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[Series]:
        """A range query: the expression evaluated at start, start + step, ... <= end (a matrix)."""
        data = self._get("/api/v1/query_range", {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                 "step": f"{step_s:g}s"})
        return [Series(dict(r.get("metric") or {}), [(float(t), _number(v)) for t, v in r.get("values") or []])
                for r in self._results(data, "matrix", promql)]

    @staticmethod
    def _results(data: dict[str, Any], kind: str, promql: str) -> list[dict[str, Any]]:
        if data.get("resultType") != kind:
            raise PrometheusError(f"the query {promql!r} returned a {data.get('resultType')}, not a {kind}",
                                  "a bug of sglab's queries (report it)")
        return [r for r in data["result"] if isinstance(r, dict)]

    def ready(self) -> bool:
        try:
            return self._client.get(f"{self.url}/-/ready", headers=self._request_headers()).status_code == 200
        except (httpx.HTTPError, PrometheusError):
            return False
