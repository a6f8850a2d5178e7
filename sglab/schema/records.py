"""What a run recorded about how it was set up: the declared confounds, the promotion policy and the
load plan as they were at bench time.

These are records, not configuration: every field is optional (an older or smaller producer may
leave it out) and none carries a default copied from sglab.config, whose models they mirror field for
field (tests/analysis/test_records.py keeps the names in step). Unknown keys are kept, so a result
written by a newer sglab still loads. Readers that treat them as dicts (`plan["rounds"]`,
`policy.get("levels")`) keep working.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, ClassVar, Union

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer, model_validator

from sglab.core.untrusted import character_name, hidden_text

# A field's marker (Annotated[str | None, MULTILINE]): its text is genuinely several lines (a server's error body),
# so a line break or a tab is kept there; every other control or invisible character is refused as anywhere else.
MULTILINE = "multi-line"
# A field's marker for text kept byte for byte and never printed (a model's answers, compared for output parity):
# not checked.
VERBATIM = "verbatim"


class HiddenTextError(ValueError):
    """A string of a document holds a control or invisible character; `loc` is its key path below the model."""

    def __init__(self, loc: tuple[str | int, ...], ch: str) -> None:
        self.loc = loc
        super().__init__(f"holds {character_name(ch)}, a control or invisible character, which no field of a sglab "
                         "document holds (it would move the cursor, recolour or hide a line where it is printed)")


def _holds_text(annotation: Any) -> bool:
    """A str may sit in a value of this type (a nested model checks its own fields)."""
    if annotation is str or annotation is Any or annotation is dict or annotation is list:
        return True
    if isinstance(annotation, type):
        return False
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _holds_text(args[0])
    if origin in (Union, types.UnionType, list, tuple, dict, set, frozenset):
        return any(_holds_text(a) for a in args if a is not Ellipsis)
    return False  # a Literal's strings are the model's own


@functools.cache
def _text_fields(model: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """(field, characters allowed besides plain text) of every field of `model` that may hold a str."""
    return tuple((name, "\n\t" if MULTILINE in field.metadata else "") for name, field in model.model_fields.items()
                 if VERBATIM not in field.metadata and _holds_text(field.annotation))


class PlainText(BaseModel):
    """Every string a document holds, at any depth (list items, dict keys and values, unknown keys a Record
    keeps), is plain text: a control or invisible character (sglab.core.untrusted.is_control) is refused where
    the document is read or built, with its key path, so what a reader prints of it needs no escaping."""

    @model_validator(mode="after")
    def _plain_text(self) -> Any:
        values = self.__dict__
        for name, allow in _text_fields(type(self)):
            found = hidden_text(values.get(name), allow=allow)
            if found is not None:
                raise HiddenTextError((name, *found[0]), found[1])
        found = hidden_text(self.__pydantic_extra__ or {})
        if found is not None:
            raise HiddenTextError(found[0], found[1])
        return self


def error_key(err: Any) -> str:
    """The key path of a pydantic error of a document (one item of `ValidationError.errors()`), down to the
    string a HiddenTextError found."""
    inner = err.get("ctx", {}).get("error")
    loc = (*err["loc"], *inner.loc) if isinstance(inner, HiddenTextError) else err["loc"]
    return ".".join(str(p) for p in loc)[:200]


def error_message(err: Any) -> str:
    """What is wrong with the value at `error_key(err)`, without pydantic's 'Value error, ' prefix."""
    return str(err["msg"]).removeprefix("Value error, ")


class Record(PlainText):
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
