"""What a run recorded about how it was set up: the declared confounds, the promotion policy and the
load plan as they were at bench time.

These are records, not configuration: every field is optional (an older or smaller producer may
leave it out) and none carries a default copied from sglab.config, whose models they mirror field for
field (tests/analysis/test_records.py keeps the names in step). Unknown keys are kept, so a result
written by a newer sglab still loads. Readers that treat them as dicts (`plan["rounds"]`,
`policy.get("levels")`) keep working.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class Record(BaseModel):
    """Only what the producer recorded is written back: a field it left out stays out (it is not null)."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _recorded_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        unset = set(type(self).model_fields) - self.model_fields_set
        return {k: v for k, v in data.items() if k not in unset}

    def __getitem__(self, key: str) -> Any:
        data = self.model_dump()
        if key not in data:
            raise KeyError(key)
        return data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.model_dump().get(key, default)


class Confound(Record):
    """One difference between the arms beyond speculation (sglab.config.arms.Confound, as recorded)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    baseline: str | None = None
    candidate: str | None = None

    def describe(self) -> str:
        return f"{self.key}: baseline={self.baseline} candidate={self.candidate}"


class RecordedLint(Record):
    """One lint of the run's arms at bench time (sglab.config.lints.Lint.as_dict, as recorded)."""

    code: str | None = None
    severity: str | None = None
    arms: list[str] | None = None
    key: str | None = None
    message: str | None = None
    fix: str | None = None

    def describe(self) -> str:
        return (f"{self.severity} [{self.code}] ({', '.join(self.arms or [])}) {self.key}: {self.message}; "
                f"fix: {self.fix}")


class RecordedPolicy(Record):
    """sglab:policy as the run was judged under (sglab.config PromotionPolicy, snake_case keys)."""

    min_gain: float | None = None
    metric: str | None = None
    levels: list[int] | None = None
    ttft_p99_max_increase: float | None = None
    itl_p99_max_increase: float | None = None
    error_cap: float | None = None
    min_rounds: int | None = None
    min_requests: int | None = None
    confidence: float | None = None
    method: str | None = None
    checks: str | None = None
    design: str | None = None
    output_parity_margin: float | None = None
    slo: dict[str, Any] | None = None
    traffic: dict[str, Any] | None = None


class RecordedLoadPlan(Record):
    """sglab:load as the run sent it (sglab.config LoadPlan, snake_case keys), plus what the web UI adds."""

    # Written only by interactive (web UI) runs.
    INTERACTIVE_FIELDS: ClassVar[tuple[str, ...]] = ("interactive", "pseudo_round_window_s")

    profile: str | None = None
    concurrency: list[int] | None = None
    rounds: int | None = None
    ungated_rounds: int | None = None
    period_rounds: int | None = None
    round_duration_s: float | None = None
    round_requests: int | None = None
    warmup_requests: int | None = None
    max_new_tokens: int | None = None
    endpoint: str | None = None
    natural_stop: bool | None = None
    request_timeout_s: float | None = None
    seed: int | None = None
    prompts: dict[str, Any] | None = None
    rate: dict[str, Any] | None = None
    trace: dict[str, Any] | None = None
    interactive: bool | None = None
    pseudo_round_window_s: float | None = None
