"""What every request of a run sends: endpoint, max_new_tokens, timeout and the prompt set.

Built from a stack's LoadPlan (the single source of defaults) and attached to a Locust Environment,
so the locustfile, the bench runner, the web UI and distributed workers all send the same requests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sglab.config.loadplan import LoadPlan
from sglab.load.profiles import LoadProfile, profile_for
from sglab.load.prompts import Prompt, build_prompts
from sglab.load.stream_parser import Endpoint

GENERATE_PATH = "/generate"
CHAT_PATH = "/v1/chat/completions"


@dataclass
class LoadSettings:
    endpoint: Endpoint
    max_new_tokens: int
    request_timeout_s: float
    prompts: list[Prompt]
    urls: dict[str, str] = field(default_factory=dict)
    model: str = "default"
    stack: str | None = None
    plan: dict = field(default_factory=dict)
    profile: LoadProfile | None = None
    natural_stop: bool = False

    @classmethod
    def from_plan(cls, plan: LoadPlan, *, urls: dict[str, str] | None = None, model: str = "default",
                  stack: str | None = None, base_dir: Path | None = None,
                  profile: LoadProfile | None = None) -> "LoadSettings":
        profile = profile or profile_for(plan)
        return cls(
            endpoint=plan.endpoint,
            max_new_tokens=plan.max_new_tokens,
            request_timeout_s=plan.request_timeout_s,
            prompts=profile.prompts(base_dir) or build_prompts(plan.prompts, base_dir),
            urls=dict(urls or {}),
            model=model,
            stack=stack,
            plan=plan.model_dump(mode="json", by_alias=False),
            profile=profile,
            natural_stop=plan.natural_stop,
        )

    @property
    def path(self) -> str:
        return GENERATE_PATH if self.endpoint == "generate" else CHAT_PATH

    def output_tokens(self, prompt: Prompt) -> int:
        """Tokens this request must stream: the prompt's own length (a trace's) or the plan's max_new_tokens."""
        return prompt.output_tokens or self.max_new_tokens

    def token_cap(self, prompt: Prompt) -> int:
        """What the request asks for: its fixed length, or under natural stopping the prompt's max_tokens cap."""
        if self.natural_stop:
            return prompt.max_tokens or self.output_tokens(prompt)
        return self.output_tokens(prompt)

    def token_count_error(self, prompt: Prompt, got: int) -> str | None:
        """Fixed length: exactly the expected count. Natural stopping: any length from 1 up to the cap."""
        cap = self.token_cap(prompt)
        if self.natural_stop:
            return None if 1 <= got <= cap else f"wrong token count: got {got}, expected 1 to {cap}"
        return None if got == cap else f"wrong token count: got {got}, expected {cap}"

    temperature = 0.0  # greedy on both arms: their answers must then be the same (output parity)

    def payload(self, prompt: Prompt) -> dict:
        """Greedy sampling, the same on both arms: a fixed length with ignore_eos, or natural stopping at a cap."""
        tokens = self.token_cap(prompt)
        ignore_eos = not self.natural_stop
        if self.endpoint == "generate":
            return {
                "text": prompt.text,
                "sampling_params": {"max_new_tokens": tokens, "ignore_eos": ignore_eos,
                                    "temperature": self.temperature},
                "stream": True,
            }
        messages = [dict(m) for m in prompt.messages] if prompt.messages else [{"role": "user", "content": prompt.text}]
        return {
            "model": self.model,
            "messages": messages,
            "max_tokens": tokens,
            "ignore_eos": ignore_eos,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "return_spec_tokens_details": True,  # per-request accept length (sglext.spec_tokens_details)
        }

    def to_message(self) -> dict:
        """Plain data for Locust's master -> worker messages."""
        return {"plan": self.plan, "urls": self.urls, "model": self.model, "stack": self.stack}

    @classmethod
    def from_message(cls, data: dict) -> "LoadSettings":
        return cls.from_plan(LoadPlan.model_validate(data["plan"]), urls=data.get("urls"),
                             model=data.get("model", "default"), stack=data.get("stack"))


# ---- the settings of a plain locust run, from the locustfile's options (sglab/load/plugin.py declares them) --------
RUNNER_ENV = "SGLAB_BENCH_WORKER"  # set in a Locust worker that sglab bench starts
URL_ENV = {"baseline": "SGLAB_BASELINE_URL", "candidate": "SGLAB_CANDIDATE_URL"}


def url_from_options(environment, arm: str) -> str | None:
    options = getattr(environment, "parsed_options", None)
    value = getattr(options, f"{arm}_url", None) if options is not None else None
    return value or os.environ.get(URL_ENV.get(arm, ""), "") or None


def _plan(options) -> tuple[LoadPlan, str | None]:
    stack = getattr(options, "stack", "") if options is not None else ""
    if stack:
        from sglab.config.loader import load_stack

        plan = load_stack(stack).config.load
    else:
        plan = LoadPlan()
    updates = {}
    for option, name in (("endpoint", "endpoint"), ("max_new_tokens", "max_new_tokens"),
                          ("request_timeout_s", "request_timeout_s")):
        value = getattr(options, option, None) if options is not None else None
        if value is not None:
            updates[name] = value
    if updates:
        plan = LoadPlan.model_validate({**plan.model_dump(), **updates})
    return plan, stack or None


def settings_from_options(environment) -> LoadSettings:
    """Settings for a plain locust run; rebuilt when the web-UI form changes the options."""
    options = getattr(environment, "parsed_options", None)
    key = tuple(getattr(options, name, None) for name in
                ("stack", "endpoint", "max_new_tokens", "request_timeout_s", "model", "baseline_url", "candidate_url"))
    cached = getattr(environment, "_sglab_options_settings", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    plan, stack = _plan(options)
    urls = {arm: url for arm in URL_ENV if (url := url_from_options(environment, arm))}
    settings = LoadSettings.from_plan(plan, urls=urls, model=getattr(options, "model", None) or "default",
                                      stack=stack)
    environment._sglab_options_settings = (key, settings)
    return settings
