"""What the live judge and the watch need, derived from a stack's `sglab:serving` in one place.

`sglab canary --stack NAME` builds it from the stack file; in the cluster the AnalysisTemplate's Job and the
watch CronJob carry it as JSON in SGLAB_CANARY_SPEC (sglab/serving/objects.py), so the pod needs no stack
file. The pod labels the servers carry reach Prometheus as target labels (PodMonitor podTargetLabels, or the
usual `labelmap` of an annotation-scraping job): POD_LABELS is that mapping, used by both sides.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sglab.core.errors import ConfigError
from sglab.config.loader import LoadedStack
from sglab.config.serving import HttpResponses
from sglab.config.stack import StackConfig
from sglab.core.paths import stacks_dir
from sglab.serving.prometheus import Prometheus
from sglab.promotion.log import LOG_NAME, break_even, current_promotion

SPEC_ENV = "SGLAB_CANARY_SPEC"
REVISION_LABEL = "sglab/revision"  # Argo's ephemeral canaryMetadata/stableMetadata on the Rollout's pods
# The arm's server with speculation left out (sglab/serving/objects.py shared_config): the watch compares the
# promoted config with the control only where both carry the same one.
SHARED_CONFIG_LABEL = "sglab/shared-config"
POD_LABELS = {"sglab/stack": "sglab_stack", "sglab/arm": "sglab_arm", REVISION_LABEL: "sglab_revision",
              "rollouts-pod-template-hash": "rollouts_pod_template_hash", SHARED_CONFIG_LABEL: "sglab_shared_config"}
STACK, ARM, REVISION, HASH, SHARED_CONFIG = POD_LABELS.values()


class JudgeSpec(BaseModel):
    """The judge's whole input besides the revisions it compares (docs/production.md, "The live judge")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stack: str
    namespace: str
    prometheus_url: str
    scrape_interval_s: float
    window_s: float
    min_windows: int
    max_windows: int
    min_gain: float
    confidence: float
    futility: bool
    checks: str  # sglab:serving.canary.checks (sglab/analysis/sequential.py CHECKS)
    ttft_p99_max_increase: float | None
    itl_p99_max_increase: float | None
    error_rate_max_increase: float
    http_responses: HttpResponses | None = None  # None: the judge sees only SGLang's aborted requests
    accept_length_guard: bool
    break_even_accept_length: float | None
    break_even_source: str
    category_label: str | None
    category_min_share: float
    category_max_loss: float
    min_requests_per_window: int
    horizon_windows: int
    control: bool
    # An authenticating Prometheus: files mounted in the pod (sglab/serving/objects.py) and non-secret headers.
    prometheus_bearer_token_file: str | None = None
    prometheus_ca_file: str | None = None
    prometheus_headers: dict[str, str] = {}

    def base_labels(self) -> dict[str, str]:
        return {"namespace": self.namespace, STACK: self.stack}

    def revision(self, name: str, pod_template_hash: str | None = None) -> dict[str, str]:
        """The candidate arm's pods of one Rollout revision: by its pod-template hash (what Argo passes the
        analysis) or by the ephemeral label (`stable` / `canary`)."""
        labels = {**self.base_labels(), ARM: "candidate"}
        if pod_template_hash:
            labels[HASH] = pod_template_hash
        else:
            labels[REVISION] = name
        return labels

    def control_labels(self) -> dict[str, str]:
        return {**self.base_labels(), ARM: "baseline"}

    @property
    def settle_s(self) -> float:
        """How long after a window's end its last samples are surely scraped."""
        return 1.5 * self.scrape_interval_s

    @property
    def rollback_command(self) -> str:
        return f"sglab rollback --stack {self.stack} && pulumi up --stack {self.stack}"

    def prometheus(self) -> Prometheus:
        """A client of the spec's Prometheus, with its credentials."""
        return Prometheus(self.prometheus_url, bearer_token_file=self.prometheus_bearer_token_file,
                          ca_file=self.prometheus_ca_file, headers=self.prometheus_headers)

    def to_env(self) -> str:
        return self.model_dump_json()


def judge_spec(stack: StackConfig, stack_name: str, *, log_path: Path | None = None, source: str = "",
               prometheus_url: str | None = None, overrides: dict[str, Any] | None = None) -> JudgeSpec:
    """The spec of a serving stack; the break-even comes from the config, else from the promotion log
    (`log_path`, default stacks/promotions.jsonl: the benchmark that promoted what the stack runs now)."""
    serving = stack.serving
    if serving is None:
        raise ConfigError(source or stack_name, "sglab:serving", "the stack has no serving section, so nothing is "
                          "canaried or watched", "add sglab:serving (docs/production.md), e.g. to "
                          "stacks/Pulumi.production.yaml")
    judge = serving.canary
    value, source = judge.break_even_accept_length, "sglab:serving.canary.break-even-accept-length"
    if value is None:
        value, source = break_even(current_promotion(log_path or stacks_dir() / LOG_NAME, stack_name))
    fields = dict(stack=stack_name, namespace=stack.namespace,
                  prometheus_url=prometheus_url or serving.monitoring.prometheus_url,
                  scrape_interval_s=serving.monitoring.interval_s, window_s=judge.window_s,
                  min_windows=judge.min_windows, max_windows=judge.max_windows,
                  min_gain=judge.min_gain, confidence=judge.confidence, futility=judge.futility, checks=judge.checks,
                  ttft_p99_max_increase=judge.ttft_p99_max_increase, itl_p99_max_increase=judge.itl_p99_max_increase,
                  error_rate_max_increase=judge.error_rate_max_increase, http_responses=judge.http_responses,
                  accept_length_guard=judge.accept_length_guard,
                  break_even_accept_length=value, break_even_source=source, category_label=judge.category_label,
                  category_min_share=judge.category_min_share, category_max_loss=judge.category_max_loss,
                  min_requests_per_window=judge.min_requests_per_window,
                  horizon_windows=serving.watch.horizon_windows, control=serving.control.replicas > 0,
                  prometheus_headers=dict(serving.monitoring.headers))
    fields.update(overrides or {})
    return JudgeSpec(**fields)


def stack_judge_spec(loaded: LoadedStack, **kw: Any) -> JudgeSpec:
    """judge_spec of a loaded stack file (its promotion log is the one beside it)."""
    return judge_spec(loaded.config, loaded.name, log_path=loaded.path.parent / LOG_NAME, source=str(loaded.path), **kw)


def spec_from_env(environ: dict[str, str] | None = None) -> JudgeSpec:
    """The spec the cluster gave the pod; a bad one is a ConfigError naming the variable."""
    raw = (environ if environ is not None else os.environ).get(SPEC_ENV)
    if not raw:
        raise ConfigError(SPEC_ENV, None, f"{SPEC_ENV} is not set", "run with --stack NAME, or in the pod the "
                          "AnalysisTemplate / watch CronJob that sglab renders (it sets the variable)")
    try:
        return JudgeSpec.model_validate(json.loads(raw))
    except (json.JSONDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0][:300]
        raise ConfigError(SPEC_ENV, None, f"not a judge spec: {first}",
                          "re-render the stack (pulumi up) so the pod gets the spec of this sglab version") from None
