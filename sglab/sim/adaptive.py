"""--speculative-adaptive: SGLang's EMA tier controller, and the speculative tiers one server runs.

SGLang (PR #21599, `AdaptiveSpeculativeParams`) keeps an exponential moving average of the accepted
drafts per request over verify batches and moves num_steps between `candidate_steps` so that it sits
about one step beyond what is being accepted (target ≈ round(EMA) + 1); each tier has its own CUDA
graph and runs num_draft_tokens = num_steps + 1 (topk 1 only). The rule, as SGLang applies it:
- the EMA starts at initial_steps - 1 and takes every verify batch's mean accepted drafts;
- nothing changes during the first `warmup_batches` batches, then the tier is recomputed every
  `update_interval` batches;
- it steps down while EMA <= (next lower candidate - 0.5 + down_hysteresis), otherwise up while
  EMA > (current candidate - 0.5 + up_hysteresis), possibly several tiers at once.
The simulator runs each verify cycle at the active tier: its cost from the timing model, its acceptance
from one ContentAcceptance per tier depth. Not EAGLE/EAGLE3 or topk > 1: SGLang falls back to static
(#23289); cli_args applies that. The config file is #21599's flat JSON object.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from sglab.sglang import rules
from sglab.sim.acceptance import AcceptanceModel, ContentAcceptance, NgramAcceptance
from sglab.sim.profile import SimProfile
from sglab.sim.timing import SpecSetup

log = logging.getLogger("sglab.sim")

DEFAULT_CANDIDATE_STEPS = (1, 3, 7)
CONFIG_KEYS = ("candidate_steps", "ema_alpha", "warmup_batches", "update_interval", "down_hysteresis",
               "up_hysteresis")


class AdaptiveConfigError(ValueError):
    """A --speculative-adaptive-config SGLang would refuse, or that cannot mean what it says."""


@dataclass(frozen=True)
class AdaptiveConfig:
    """SGLang's adaptive knobs (defaults as in #21599); `path` is the file they came from, if any."""

    candidate_steps: tuple[int, ...] = DEFAULT_CANDIDATE_STEPS
    ema_alpha: float = 0.2
    warmup_batches: int = 10
    update_interval: int = 5
    down_hysteresis: float = -0.25
    up_hysteresis: float = 0.0
    path: str | None = None
    ignored_keys: tuple[str, ...] = ()

    def describe(self) -> dict:
        return {"candidate_steps": list(self.candidate_steps), "ema_alpha": self.ema_alpha,
                "warmup_batches": self.warmup_batches, "update_interval": self.update_interval,
                "down_hysteresis": self.down_hysteresis, "up_hysteresis": self.up_hysteresis,
                "config_path": self.path, "ignored_keys": list(self.ignored_keys)}


def _number(raw: dict, key: str, where: str, *, integer: bool, low: float, high: float | None = None,
            low_open: bool = False) -> float | int:
    value = raw[key]
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        kind = "an integer" if integer else "a number"
        raise AdaptiveConfigError(f"{where}: {key} must be {kind}, got {value!r}")
    too_low = value <= low if low_open else value < low
    if too_low or (high is not None and value > high):
        bound = f"{'>' if low_open else '>='} {low}" + (f" and <= {high}" if high is not None else "")
        raise AdaptiveConfigError(f"{where}: {key} must be {bound}, got {value!r}")
    return value


def parse_adaptive_config(raw: object, where: str = "speculative adaptive config") -> AdaptiveConfig:
    """The JSON object's keys over the defaults; unknown keys are ignored (as SGLang does) but recorded."""
    if not isinstance(raw, dict):
        raise AdaptiveConfigError(f"{where}: speculative_adaptive_config must be a JSON object, "
                                  f"got {type(raw).__name__}")
    values: dict = {}
    if "candidate_steps" in raw:
        steps = raw["candidate_steps"]
        if (not isinstance(steps, list) or not steps
                or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in steps)):
            raise AdaptiveConfigError(f"{where}: candidate_steps must be a non-empty list of integers >= 1, "
                                      f"got {steps!r}")
        if max(steps) > rules.MAX_NUM_STEPS:
            raise AdaptiveConfigError(f"{where}: candidate_steps {max(steps)} is beyond what SGLang can run; "
                                      f"use at most {rules.MAX_NUM_STEPS}")
        values["candidate_steps"] = tuple(sorted(set(steps)))
    if "ema_alpha" in raw:
        values["ema_alpha"] = float(_number(raw, "ema_alpha", where, integer=False, low=0.0, high=1.0,
                                            low_open=True))
    if "warmup_batches" in raw:
        values["warmup_batches"] = _number(raw, "warmup_batches", where, integer=True, low=0)
    if "update_interval" in raw:
        values["update_interval"] = _number(raw, "update_interval", where, integer=True, low=1)
    for key in ("down_hysteresis", "up_hysteresis"):
        if key in raw:
            values[key] = float(_number(raw, key, where, integer=False, low=float("-inf")))
    ignored = tuple(sorted(str(k) for k in raw if k not in CONFIG_KEYS))
    return AdaptiveConfig(**values, ignored_keys=ignored)


def load_adaptive_config(path: str | None) -> AdaptiveConfig:
    """--speculative-adaptive-config: a path to a JSON file (SGLang's type); None gives the defaults."""
    if path is None:
        return AdaptiveConfig()
    where = f"--speculative-adaptive-config {path}"
    from sglab.core.errors import ConfigError
    from sglab.core.untrusted_json import JsonLimits, read_json

    if not os.path.lexists(path):
        raise AdaptiveConfigError(f"{where}: no such file; give the path of a JSON object such as "
                                  '{"candidate_steps": [1, 3, 7]}')
    try:  # bounded: size, depth, finite numbers, no duplicate keys (sglab/core/untrusted_json.py)
        raw = read_json(path, JsonLimits("an adaptive config", max_bytes=1024 * 1024, max_depth=8))
    except ConfigError as exc:
        raise AdaptiveConfigError(f"{where}: {exc.problem}") from None
    config = parse_adaptive_config(raw, where)
    return AdaptiveConfig(**{**config.__dict__, "path": path})


@dataclass
class AdaptiveController:
    """The EMA rule of SGLang's AdaptiveSpeculativeParams; feed it every verify batch's accepted drafts."""

    config: AdaptiveConfig
    initial_steps: int
    candidate_steps: tuple[int, ...] = field(init=False)
    current_steps: int = field(init=False)
    ema_accept_len: float = field(init=False)  # EMA of accepted drafts per request (SGLang's name)
    batches: int = field(init=False, default=0)
    switches: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        # SGLang adds the server's own num_steps to the candidates (its pre-built tier is reused).
        self.candidate_steps = tuple(sorted(set(self.config.candidate_steps) | {self.initial_steps}))
        if len(self.candidate_steps) < 2:
            raise AdaptiveConfigError(
                f"candidate_steps {list(self.config.candidate_steps)} with --speculative-num-steps "
                f"{self.initial_steps} leave one tier; SGLang asserts at least 2 distinct values")
        self.current_steps = self.initial_steps
        self.ema_accept_len = float(self.initial_steps - 1)

    def observe(self, accepted_drafts_per_request: Sequence[int]) -> bool:
        """One verify batch; True when it moved the tier."""
        if not accepted_drafts_per_request:
            return False
        batch_mean = sum(accepted_drafts_per_request) / len(accepted_drafts_per_request)
        alpha = self.config.ema_alpha
        self.ema_accept_len = (1.0 - alpha) * self.ema_accept_len + alpha * batch_mean
        self.batches += 1
        past_warmup = self.batches - self.config.warmup_batches
        if past_warmup <= 0 or past_warmup % self.config.update_interval:
            return False
        return self._recompute()

    def target_steps(self) -> int:
        """The tier the EMA asks for now, from the current one (down first; up only if not down)."""
        steps, ema = self.candidate_steps, self.ema_accept_len
        index = steps.index(self.current_steps)
        start = index
        while index > 0 and ema <= steps[index - 1] - 0.5 + self.config.down_hysteresis:
            index -= 1
        if index == start:
            while index < len(steps) - 1 and ema > steps[index] - 0.5 + self.config.up_hysteresis:
                index += 1
        return steps[index]

    def _recompute(self) -> bool:
        target = self.target_steps()
        if target == self.current_steps:
            return False
        log.info("Adaptive spec params updated: steps %d -> %d (ema_accept_len=%.2f)",
                 self.current_steps, target, self.ema_accept_len)
        self.current_steps = target
        self.switches += 1
        return True


def tier_setup(spec: SpecSetup, steps: int) -> SpecSetup:
    """A tier of an adaptive (topk 1) server: num_draft_tokens = num_steps + 1."""
    return SpecSetup(num_steps=steps, topk=spec.topk, num_draft_tokens=steps + 1, kind=spec.kind)


class SpecTiers:
    """The speculative shapes one server can run and the one active now (one tier when static)."""

    def __init__(self, profile: SimProfile, spec: SpecSetup, adaptive: AdaptiveConfig | None) -> None:
        self.controller = AdaptiveController(adaptive, spec.num_steps) if adaptive is not None else None
        steps = self.controller.candidate_steps if self.controller else (spec.num_steps,)
        self.setups = {s: (spec if s == spec.num_steps else tier_setup(spec, s)) for s in steps}
        factor = profile.standalone_accept_factor if spec.kind == "standalone" else 1.0
        self._content = {s: ContentAcceptance(profile.accept_prob_by_position, profile.accept_prob_tail,
                                              depth=setup.depth, topk=setup.topk, factor=factor)
                         for s, setup in self.setups.items()}
        self._ngram = NgramAcceptance(profile, spec.depth) if spec.kind == "ngram" else None
        self.initial = spec
        self.max_depth = max(setup.depth for setup in self.setups.values())

    @property
    def adaptive(self) -> bool:
        return self.controller is not None

    @property
    def active(self) -> SpecSetup:
        return self.setups[self.controller.current_steps] if self.controller else self.initial

    def default_model(self, steps: int | None = None) -> AcceptanceModel:
        """The profile's (random-text) acceptance at a tier (the initial one by default)."""
        if self._ngram is not None:
            return self._ngram.model(0.0)
        return self._content[self.initial.num_steps if steps is None else steps].default

    def model(self, category: str, templated: bool, repetition: float = 0.0) -> AcceptanceModel:
        """This content's acceptance at the active tier's depth (NGRAM: from the prompt's repetition)."""
        if self._ngram is not None:
            return self._ngram.model(repetition)
        return self._content[self.active.num_steps].model(category, templated)

    def after_verify(self, accepted_drafts_per_request: Sequence[int]) -> None:
        if self.controller is not None:
            self.controller.observe(accepted_drafts_per_request)

    def gauges(self) -> dict[str, int]:
        """sglang:spec_num_steps / spec_num_draft_tokens: the shape running now."""
        return {"spec_num_steps": self.active.num_steps, "spec_num_draft_tokens": self.active.num_draft_tokens}

    def describe(self) -> dict | None:
        """The adaptive state for /server_info (None when static)."""
        if self.controller is None:
            return None
        c = self.controller
        return {"active_num_steps": self.active.num_steps, "active_num_draft_tokens": self.active.num_draft_tokens,
                "candidate_steps": list(c.candidate_steps), "ema_accept_len": c.ema_accept_len,
                "verify_batches": c.batches, "switches": c.switches, "config": c.config.describe()}
