"""`sglab:serving`: how a stack serves production traffic (docs/production.md).

The candidate arm becomes an Argo Rollouts `Rollout` of `replicas` pods (the same chart, the same pod
template as the benchmarked Deployment), reached through a Gateway API HTTPRoute, scraped by Prometheus,
rolled out in canary `steps` judged live by `sglab canary`; the baseline arm stays as the standing control
(the same server without speculation) that `sglab watch` compares against. The models only validate; the
chart values and the Argo steps are derived in sglab/serving/objects.py and `argo_steps` below.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from sglab.config.base import (_DNS_LABEL, _LABEL_NAME, ByteQuantity, CpuQuantity, KeyedValueError, Model,
                               _check_labels)
from sglab.config.cluster import image_problem
from sglab.config.loadplan import MAX_ROUNDS

Ratio = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def _namespace(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(f"{value!r} is not a valid namespace (lowercase letters, digits and '-', max 63)")
    return value


Namespace = Annotated[str, AfterValidator(_namespace)]


class CanaryStep(Model):
    """One canary step; exactly one key. canary-replicas k starts k canary pods and (through the gateway) sends
    them the weight that gives each the load of a stable pod; set-weight sends a percentage as written;
    analysis runs the live judge (`sglab canary`) until it decides: promote goes on, abort rolls back."""

    canary_replicas: Annotated[int, Field(ge=1)] | None = None
    set_weight: Annotated[int, Field(ge=1, le=100)] | None = None
    pause_s: Annotated[int, Field(ge=1)] | None = None
    pause_until_resumed: Literal[True] | None = None
    analysis: Literal[True] | None = None

    @model_validator(mode="after")
    def _one_action(self) -> "CanaryStep":
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            keys = ", ".join(n.replace("_", "-") for n in type(self).model_fields)
            raise ValueError(f"a step takes exactly one of {keys} (got {len(given)}); split it into "
                             "one step per action")
        return self

    @property
    def sends_traffic(self) -> bool:
        return self.canary_replicas is not None or self.set_weight is not None


def _default_steps() -> list[CanaryStep]:
    return [CanaryStep(canary_replicas=1), CanaryStep(analysis=True), CanaryStep(set_weight=50),
            CanaryStep(pause_s=600)]


_PROM_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]{0,199}$")
_PROM_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


def _prometheus_name(pattern: re.Pattern[str], what: str) -> Any:
    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(f"{value!r} is not a Prometheus {what} ({pattern.pattern})")
        return value
    return AfterValidator(check)


class HttpResponses(Model):
    """HTTP responses by status code, counted in front of SGLang. SGLang's own counters never see a request
    its HTTP layer refuses (a 500 counts in neither num_requests nor num_aborted_requests), so without this the
    judge cannot see a canary answering errors. The counter must be scraped with the server pods' labels, like
    SGLang's metrics: a mesh sidecar's (Istio's istio_requests_total by response_code, Linkerd's response_total
    by status_code), or a recording rule that puts the pod labels on the gateway's per-backend counter."""

    metric: Annotated[str, _prometheus_name(_PROM_NAME, "metric name")]
    code_label: Annotated[str, _prometheus_name(_PROM_LABEL, "label name")] = "response_code"


class CanaryJudge(Model):
    """The live judge: one paired observation (canary vs stable, same wall-clock window) per window, decided by
    the confidence sequence of `sglab bench`; guards are non-inferiority checks (docs/production.md)."""

    window_s: Annotated[int, Field(ge=1, le=3600)] = 60
    min_windows: Annotated[int, Field(ge=2, le=MAX_ROUNDS)] = 5
    # An hour of one-minute windows: a canary that has not shown its gain by then is not promoted.
    max_windows: Annotated[int, Field(ge=2, le=MAX_ROUNDS)] = 60  # windows are the judge's rounds
    min_gain: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    confidence: Annotated[float, Field(gt=0.5, lt=1, allow_inf_nan=False)] = 0.95
    futility: bool = True
    # The sequence's floor and holds, as sglab:policy.checks: standard promotes from the tenth window; strict from
    # the twentieth, and keeps windows that drift together (AR(1) rho 0.8) at <= 2% false promotions.
    checks: Literal["standard", "strict"] = "standard"
    # Relative increase of the canary's p99 over the stable's that is still acceptable (None: no guard).
    ttft_p99_max_increase: Ratio | None = 0.2
    itl_p99_max_increase: Ratio | None = 0.2
    # Absolute increase of the error rate that is still acceptable: the larger of SGLang's aborted-request rate
    # and, where http-responses is declared, the share of HTTP responses with a 5xx status.
    error_rate_max_increase: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.01
    http_responses: HttpResponses | None = None
    accept_length_guard: bool = True
    # Default: the break-even the promoted benchmark measured (stacks/promotions.jsonl).
    break_even_accept_length: Annotated[float, Field(gt=1, allow_inf_nan=False)] | None = None
    # The SGLang custom metric label requests carry their category in (x-custom-labels header).
    category_label: str | None = None
    category_min_share: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.1
    # A category carrying min-share of the tokens that is shown slower than this aborts the canary.
    category_max_loss: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = 0.03
    min_requests_per_window: Annotated[int, Field(ge=1)] = 5

    @field_validator("category_label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        if value is not None and (not _LABEL_NAME.match(value) or "." in value or "-" in value):
            raise ValueError(f"{value!r} is not a Prometheus label name (letters, digits, '_')")
        return value

    @model_validator(mode="after")
    def _windows(self) -> "CanaryJudge":
        if self.max_windows < self.min_windows:
            raise KeyedValueError("max-windows", f"max-windows ({self.max_windows}) is below min-windows "
                                  f"({self.min_windows}); raise max-windows")
        return self


class RoutePath(Model):
    """One inference path the HTTPRoute sends to the servers (Gateway API path match): Exact for one endpoint,
    PathPrefix for an endpoint and what lies below it (/v1/models and /v1/models/{model})."""

    path: str
    match: Literal["Exact", "PathPrefix"] = "Exact"

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/") or value == "/" or value.endswith("/"):
            raise ValueError(f"{value!r} is not an endpoint path; give one like /v1/chat/completions (not / and "
                             "no trailing /: a prefix of / would expose SGLang's control endpoints)")
        return value


def _inference_paths() -> list[RoutePath]:
    # The OpenAI and native generate endpoints the product serves; SGLang's control endpoints (/pause_generation,
    # /abort_request, /flush_cache, /metrics, ...) share the port and stay unreachable through the gateway.
    return [RoutePath(path="/v1/chat/completions"), RoutePath(path="/v1/completions"),
            RoutePath(path="/v1/models", match="PathPrefix"), RoutePath(path="/generate")]


class NetworkPeer(Model):
    """One NetworkPolicy peer allowed to reach the servers' port: pods (by labels) in namespaces (by labels),
    or an IP block (a cloud gateway's proxy subnet, which is no pod)."""

    namespace_labels: dict[str, str] = Field(default_factory=dict)
    pod_labels: dict[str, str] = Field(default_factory=dict)
    cidr: str | None = None
    except_cidrs: list[str] = Field(default_factory=list)

    @field_validator("namespace_labels", "pod_labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return _check_labels(labels)

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str | None) -> str | None:
        if value is not None:
            ipaddress.ip_network(value, strict=False)
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> "NetworkPeer":
        selects = bool(self.namespace_labels or self.pod_labels)
        if selects == (self.cidr is not None):
            raise ValueError("a peer is either pods (namespace-labels and/or pod-labels) or an ip block (cidr); "
                             "give one of the two")
        if self.except_cidrs and self.cidr is None:
            raise KeyedValueError("except-cidrs", "except-cidrs narrows a cidr; give cidr too")
        return self

    def policy_peer(self) -> dict[str, Any]:
        """The NetworkPolicy `from` entry."""
        if self.cidr is not None:
            block: dict[str, Any] = {"cidr": self.cidr}
            if self.except_cidrs:
                block["except"] = list(self.except_cidrs)
            return {"ipBlock": block}
        peer: dict[str, Any] = {}
        if self.namespace_labels:
            peer["namespaceSelector"] = {"matchLabels": dict(self.namespace_labels)}
        if self.pod_labels:
            peer["podSelector"] = {"matchLabels": dict(self.pod_labels)}
        return peer


def _gateway_peers() -> list[NetworkPeer]:
    # Envoy Gateway's proxies run in envoy-gateway-system, not in the Gateway's namespace.
    return [NetworkPeer(namespace_labels={"kubernetes.io/metadata.name": "envoy-gateway-system"},
                        pod_labels={"app.kubernetes.io/component": "proxy"})]


# The Gateway API Inference Extension's endpoint picker (EPP), v1.5.0 (2026-04-18): the extension's last release
# that ships it (v1.6.0 moved it to llm-d/llm-d-router and keeps only a round-robin conformance picker).
PICKER_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"


class EndpointPicker(Model):
    """The InferencePool's endpoint picker, rendered with the pool (sglab/serving/picker.py): the extension's EPP
    configured to pick a ready serving pod at random for every request, so the stable and canary pods get the same
    mix of requests (the live judge's assumption); a platform's load- or prefix-aware picker would not. Pin the
    image's digest in production (image@sha256:...)."""

    image: str = PICKER_IMAGE
    cpu: CpuQuantity = "1"
    memory: ByteQuantity = "1Gi"

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        problem = image_problem(value)
        if problem is not None:
            raise ValueError(f"{value!r} {problem}; give a pinned reference, e.g. {PICKER_IMAGE}")
        return value


class Gateway(Model):
    """The entry point: an HTTPRoute attached to an existing Gateway; `peers` are what carries its traffic to the
    pods (the proxies' pods, or a cloud gateway's proxy subnet), the servers' NetworkPolicy admits only them."""

    name: str = "inference-gateway"
    namespace: Namespace = "gateway"
    section_name: str | None = None
    hostnames: list[str] = Field(default_factory=list)
    paths: list[RoutePath] = Field(default_factory=_inference_paths, min_length=1)
    peers: list[NetworkPeer] = Field(default_factory=_gateway_peers, min_length=1)
    # A streamed reply can run for minutes; implementations' defaults (often seconds) would cut it.
    request_timeout_s: Annotated[int, Field(ge=1)] = 3600
    # Route to an InferencePool (Gateway API Inference Extension) of the serving pods instead of Services, behind
    # the endpoint picker the stack renders with it.
    inference_pool: bool = False
    endpoint_picker: EndpointPicker = Field(default_factory=EndpointPicker)


class ObjectKey(Model):
    """One key of a Secret or ConfigMap in the stack's namespace."""

    name: str
    key: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not an object name (lowercase letters, digits and '-', max 63)")
        return value

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not value or "/" in value or value in (".", ".."):
            raise ValueError(f"{value!r} is not a Secret/ConfigMap key (a file name: no '/')")
        return value


def _prometheus_peers() -> list[NetworkPeer]:
    return [NetworkPeer(namespace_labels={"kubernetes.io/metadata.name": "monitoring"},
                        pod_labels={"app.kubernetes.io/name": "prometheus"})]


class Monitoring(Model):
    """How Prometheus scrapes the servers (its pods, `peers`, are NetworkPolicy peers) and where the judge reads it."""

    scrape: Literal["pod-monitor", "service-monitor", "annotations"] = "pod-monitor"
    interval_s: Annotated[int, Field(ge=1)] = 15
    # A load-balanced Service (kube-prometheus-stack's), not the operator's headless prometheus-operated: that one
    # resolves to every replica's pod, and HA replicas' data differ, so windows would mix two Prometheuses.
    prometheus_url: str = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    # An authenticating Prometheus (or Thanos/Mimir front): a token Secret and a CA ConfigMap mounted into the
    # judge and watch pods, and headers on every query (e.g. X-Scope-OrgID: a tenant); none of them secret.
    bearer_token_secret: ObjectKey | None = None
    ca_configmap: ObjectKey | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # Labels the Prometheus' podMonitorSelector / serviceMonitorSelector matches (e.g. release: prometheus).
    labels: dict[str, str] = Field(default_factory=dict)
    # The Prometheus pods that scrape /metrics (the NetworkPolicy admits them, not their whole namespace).
    peers: list[NetworkPeer] = Field(default_factory=_prometheus_peers, min_length=1)

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return _check_labels(labels)

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not re.fullmatch(r"[A-Za-z0-9-]{1,64}", name) or name.lower() == "authorization":
                raise ValueError(f"{name!r} is not an extra header name (letters, digits, '-'; the token is "
                                 "bearer-token-secret, never a header value in the stack)")
            if any(ord(c) < 0x20 or ord(c) == 0x7f for c in value):
                raise ValueError(f"the value of header {name} holds a control character")
        return headers

    @field_validator("prometheus_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL of Prometheus")
        return value.rstrip("/")


class ApiKeys(Model):
    """The servers' `--api-key` (every request but /health and /metrics) and `--admin-api-key` (the control
    endpoints), read from keys of an existing Secret into env and passed as `$(VAR)`: the key is never in the stack,
    the values or a rendered object. Provision the Secret outside the stack (kubectl create secret generic)."""

    secret: str = "sglang-api-keys"
    api_key_key: str = "api-key"
    admin_api_key_key: str = "admin-api-key"

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a Secret name (lowercase letters, digits and '-', max 63)")
        return value


class Control(Model):
    """The standing control: the baseline arm (no speculation) kept measuring on a mirrored copy of live traffic,
    so the gain keeps being measured; it serves no weighted share, so a control without a ready pod fails no
    request. The mirror gives it a stable pod's load. At least one replica: the watch needs it, and a Service
    without pods would hold `pulumi up` until its timeout."""

    replicas: Annotated[int, Field(ge=1)] = 1


class Watch(Model):
    """`sglab watch` on a schedule in the cluster (a CronJob): the live gain over the last horizon-windows."""

    enabled: bool = True
    schedule: str = "*/30 * * * *"
    horizon_windows: Annotated[int, Field(ge=2, le=MAX_ROUNDS)] = 30

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError(f"{value!r} is not a five-field cron schedule (e.g. '*/30 * * * *')")
        return value


class Serving(Model):
    """Production's serving shape (docs/production.md). Present: the candidate arm is a canary-rolled Rollout."""

    replicas: Annotated[int, Field(ge=2)] = 2
    traffic_router: Literal["gateway-api", "replicas"] = "gateway-api"
    steps: list[CanaryStep] = Field(default_factory=_default_steps)
    canary: CanaryJudge = Field(default_factory=CanaryJudge)
    gateway: Gateway = Field(default_factory=Gateway)
    monitoring: Monitoring = Field(default_factory=Monitoring)
    control: Control = Field(default_factory=Control)
    api_keys: ApiKeys = Field(default_factory=ApiKeys)
    watch: Watch = Field(default_factory=Watch)
    # replicas router: extra pods while the canary starts (whole GPU nodes; 0 would take a stable pod away).
    max_surge: Annotated[int, Field(ge=0)] = 1
    # gateway-api: how long the old stable keeps its pods after a full promotion (a quick way back).
    scale_down_delay_s: Annotated[int, Field(ge=0)] = 600
    # A change back to one of the last revisions skips the steps and the analysis (Argo's rollbackWindow).
    rollback_window_revisions: Annotated[int, Field(ge=1)] = 3
    judge_cpu: CpuQuantity = "500m"
    judge_memory: ByteQuantity = "512Mi"
    # A finished judge or watch Job (and its pod, whose log holds the decision) is deleted after this long.
    finished_job_ttl_s: Annotated[int, Field(ge=0)] = 7 * 24 * 3600

    @model_validator(mode="after")
    def _shape(self) -> "Serving":
        analysis = [i for i, s in enumerate(self.steps) if s.analysis]
        if len(analysis) != 1:
            raise KeyedValueError("steps", f"steps hold {len(analysis)} analysis steps; give exactly one "
                                  "(- analysis: true), where the live judge decides")
        if not any(s.sends_traffic for s in self.steps[:analysis[0]]):
            raise KeyedValueError("steps", "no step before the analysis sends traffic to the canary, so the judge "
                                  "would see none; put a canary-replicas or set-weight step before the analysis")
        for i, step in enumerate(self.steps):
            if step.canary_replicas is not None and step.canary_replicas > self.replicas:
                raise KeyedValueError(f"steps.{i}.canary-replicas", f"canary-replicas {step.canary_replicas} is "
                                      f"more than replicas ({self.replicas}); use at most {self.replicas}")
        if self.canary.window_s < 4 * self.monitoring.interval_s:
            raise KeyedValueError("canary.window-s", f"window-s {self.canary.window_s} holds fewer than 4 scrapes "
                                  f"of monitoring.interval-s {self.monitoring.interval_s}, too few for a window's "
                                  f"increase(); use window-s >= {4 * self.monitoring.interval_s}")
        if self.gateway.inference_pool and self.traffic_router != "replicas":
            raise KeyedValueError("gateway.inference-pool", "an InferencePool selects every serving pod, so the "
                                  "gateway cannot split canary traffic by weight; set traffic-router: replicas "
                                  "(the split follows the pod count) or inference-pool: false")
        return self


def canary_weight(serving: Serving, canary_pods: int) -> int:
    """The weight that gives each of `canary_pods` the load of a stable pod: through the gateway the stable
    keeps all its pods (100k/(N+k)); by replica count Argo runs ceil(w N / 100) canary pods (floor(100k/N))."""
    n = serving.replicas
    if serving.traffic_router == "gateway-api":
        return max(1, min(100, round(100 * canary_pods / (n + canary_pods))))
    return max(1, min(100, math.floor(100 * canary_pods / n)))


def argo_steps(serving: Serving, *, analysis: dict[str, Any]) -> list[dict[str, Any]]:
    """The Rollout's `strategy.canary.steps`; `analysis` is the analysis step's body (templates, args)."""
    out: list[dict[str, Any]] = []
    scaled = False  # after setCanaryScale the canary keeps that scale until told to follow the weight again
    for step in serving.steps:
        if step.canary_replicas is not None:
            if serving.traffic_router == "gateway-api":
                out.append({"setCanaryScale": {"replicas": step.canary_replicas}})
                scaled = True
            out.append({"setWeight": canary_weight(serving, step.canary_replicas)})
        elif step.set_weight is not None:
            if scaled:
                out.append({"setCanaryScale": {"matchTrafficWeight": True}})
                scaled = False
            out.append({"setWeight": step.set_weight})
        elif step.pause_s is not None:
            out.append({"pause": {"duration": f"{step.pause_s}s"}})
        elif step.pause_until_resumed:
            out.append({"pause": {}})
        else:
            out.append({"analysis": analysis})
    return out


def control_mirror_percent(serving: Serving) -> int:
    """The percent of requests the HTTPRoute mirrors to the control: one stable pod's share."""
    return max(1, round(100 * serving.control.replicas / serving.replicas)) if serving.control.replicas else 0


CUSTOM_LABELS_FLAG = "--tokenizer-metrics-allowed-custom-labels"


def serving_checks(stack: Any) -> Any:
    """The checks a serving stack needs across sections; returns its benchmark-job section: off unless
    benchmark-job.enabled says true (a serving stack's Services carry production traffic; synthetic load at
    them is a deliberate choice, e.g. for a staging copy)."""
    from sglab.sglang import flags

    serving, job = stack.serving, stack.benchmark_job
    if stack.placement.nodes > 1:
        raise KeyedValueError("placement.nodes", "a serving stack rolls its server out with Argo Rollouts, which "
                              "manages single-pod replicas; multi-node servers (LeaderWorkerSet) cannot be "
                              "canaried this way; use nodes: 1 or remove sglab:serving")
    if not stack.server.enable_metrics:
        raise KeyedValueError("server.enable-metrics", "the live judge and the watch read the servers' Prometheus "
                              "metrics; set server.enable-metrics: true")
    label = serving.canary.category_label
    if label is not None:
        allowed = flags.decode(list(stack.server.extra_args)).get(CUSTOM_LABELS_FLAG)
        values = (allowed,) if isinstance(allowed, str) else allowed if isinstance(allowed, tuple) else ()  # True: none
        if label not in values:
            raise KeyedValueError("serving.canary.category-label", f"category-label {label!r} needs the servers to "
                                  f"label their metrics with it; add {CUSTOM_LABELS_FLAG} {label} to "
                                  "server.extra-args (requests then carry it in the x-custom-labels header)")
    explicit = "enabled" in job.model_fields_set
    return job if explicit or not job.enabled else job.model_copy(update={"enabled": False})
