"""What the A/B tab knows in one Locust process: the stack's arms, the current test's `LiveRun`, the table.

A new `LiveRun` starts at each Locust test start (reading the arm URLs from the form's custom
arguments at that moment) and is kept after the test stops so it can still be downloaded.

A session started by `sglab ui` is *bound*: the launcher passes the stack and the arm URLs it started
or was given (`BOUND_ENV`), and the form may not change them (`form_changes`). Each run records where
its URLs came from (`Target.urls_source`) and calls itself `sim` only when it measured the simulators
the launcher started.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from sglab.analysis.verdict import Verdict, judge
from sglab.core.errors import ConfigError
from sglab.schema.result import ArmInfo, RequestSample, RunResult
from sglab.results.store import git_commit, new_run_id, utc_now_iso
from sglab.ui.live import BASELINE, CANDIDATE, DEFAULT_WINDOW_S, LiveRun, OpenLoopRun
from sglab.ui.views import category_rows, gain_series, open_loop_rows, table_rows
from sglab.core.untrusted import printable, printable_logger
from sglab.load.plugin import SHAPE_OPTIONS, form_shape_value
from sglab.sglang.client import read_accept_length

logger = printable_logger("sglab.ui")  # form values and server errors reach the console

WINDOW_ENV = "SGLAB_UI_WINDOW_S"
TARGET_ENV = "SGLAB_UI_TARGET"
SAVE_DIR_ENV = "SGLAB_UI_SAVE_RESULTS"
BOUND_ENV = "SGLAB_UI_BOUND"  # JSON {"stack": ..., "urls": {arm: url}} from `sglab ui`
PROFILE_ENV = "SGLAB_UI_PROFILE"  # the load profile `sglab ui --profile` runs
TRACE_ENV = "SGLAB_UI_TRACE"  # the trace file `sglab ui --trace` replays (absolute path)
SIM_TIME_SCALE_ENV = "SGLAB_UI_SIM_TIME_SCALE"  # the launcher's simulators' time scale (bounds the form's users)
BOUND_FORM_FIELDS = ("stack", "baseline_url", "candidate_url")
TABLE_CACHE_S = 1.0


@dataclass
class StackContext:
    """The stack's side of a run: arm identities, policy and plan (empty when run without --stack)."""

    name: str
    arms: dict[str, ArmInfo]
    policy: dict = field(default_factory=dict)
    load_plan: dict = field(default_factory=dict)
    confounds: list[dict] = field(default_factory=list)
    window_s: float = DEFAULT_WINDOW_S
    warmup_requests: int = 0
    specs: dict = field(default_factory=dict)
    plan_override: object | None = None  # the stack's LoadPlan with `sglab ui --profile/--trace` applied, if it differs
    plan: object | None = None  # the LoadPlan that is run (sglab.config LoadPlan; None without a stack)

    @classmethod
    def load(cls, stack: str | None, profile: str | None = None, trace: str | None = None) -> "StackContext":
        """`profile`/`trace` (from `sglab ui --profile/--trace`) replace the stack's load.profile and
        load.trace.file in what is run and recorded."""
        from sglab.config import load_stack
        from sglab.config.arms import baseline_arm, candidate_arm, confounds
        from sglab.config.policy import PromotionPolicy

        if not stack:
            arms = {name: ArmInfo(name=name, role=name, speculative=name == CANDIDATE, config_hash="unknown",
                                  launch_command="unknown (run without --stack)") for name in (BASELINE, CANDIDATE)}
            return cls("interactive", arms, policy=PromotionPolicy().model_dump(mode="json"))
        config = load_stack(stack).config
        plan = config.load
        update: dict[str, Any] = {"profile": profile} if profile and profile != plan.profile else {}
        if trace and trace != plan.trace.file:
            update["trace"] = plan.trace.model_copy(update={"file": trace})
        override = bool(update)
        if override:
            plan = plan.model_copy(update=update)
        plan = plan.for_run()  # a UI session draws its own seed unless the stack fixes one (recorded below)
        arms = {}
        specs = {}
        for spec in (baseline_arm(config), candidate_arm(config)):
            specs[spec.name] = spec
            arms[spec.name] = ArmInfo(name=spec.name, role=spec.role, speculative=spec.speculative,
                                      config_hash=spec.config_hash, launch_command=spec.launch_command)
        return cls(
            stack,
            arms,
            policy=config.policy.model_dump(mode="json"),
            load_plan=plan.model_dump(mode="json"),
            confounds=[c.as_dict() for c in confounds(config)],
            window_s=config.load.round_duration_s or DEFAULT_WINDOW_S,
            warmup_requests=config.load.warmup_requests,
            specs=specs,
            plan_override=plan if override else None,
            plan=plan,
        )


@dataclass(frozen=True)
class Binding:
    """What `sglab ui` fixed for this Locust process: the stack and both arm URLs."""

    stack: str
    urls: dict[str, str]

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Binding | None":
        raw = (os.environ if environ is None else environ).get(BOUND_ENV)
        if not raw:
            return None
        data = json.loads(raw)
        return cls(str(data["stack"]), {str(k): str(v) for k, v in data["urls"].items()})

    def to_env(self) -> str:
        return json.dumps({"stack": self.stack, "urls": self.urls})

    def fields(self) -> dict[str, str]:
        return {"stack": self.stack, **{f"{arm}_url": url for arm, url in self.urls.items()}}


def _overrides() -> tuple[str | None, str | None]:
    """(profile, trace file) the launcher passed (`sglab ui --profile/--trace`)."""
    return os.environ.get(PROFILE_ENV) or None, os.environ.get(TRACE_ENV) or None


def _same(a: str | None, b: str | None) -> bool:
    return (a or "").strip().rstrip("/") == (b or "").strip().rstrip("/")


class UiSession:
    def __init__(self, environment, stack: StackContext, binding: Binding | None = None) -> None:
        self.environment = environment
        self.stack = stack
        self.binding = binding
        self.run: LiveRun | None = None
        self._rows_cache: tuple[float, tuple[list[dict], list[dict]]] | None = None
        self.saved: list[Path] = []
        self.initial_urls = self.arm_urls()  # plain Locust: from its command line or environment
        options = getattr(environment, "parsed_options", None)
        # the request shape as launched: a bound session's form may not change it (form_changes)
        self.initial_shape = {key: getattr(options, key, None) for key in SHAPE_OPTIONS}

    @classmethod
    def from_environment(cls, environment) -> "UiSession":
        options = environment.parsed_options
        stack_name = getattr(options, "stack", None) if options is not None else None
        try:
            stack = StackContext.load(stack_name, *_overrides())
        except ConfigError as exc:
            logger.error("sglab A/B tab: %s", exc)
            stack = StackContext.load(None)
        return cls(environment, stack, Binding.from_env())

    def profile_settings(self):
        """The users' LoadSettings when `sglab ui --profile` replaced the stack's profile (None: the stack's own,
        built from Locust's options as usual). Only for a bound session, whose stack and URLs stay fixed."""
        plan, binding = self.stack.plan_override, self.binding
        if plan is None or binding is None:
            return None
        from sglab.load.settings import LoadSettings

        model = getattr(self.environment.parsed_options, "model", None) or "default"
        return LoadSettings.from_plan(plan, urls=binding.urls, model=model, stack=binding.stack)

    @property
    def window_s(self) -> float:
        return float(os.environ.get(WINDOW_ENV) or self.stack.window_s)

    # ---- arms and users ------------------------------------------------------------------

    def arm_urls(self) -> dict[str, str | None]:
        """The arms' URLs as a run records them: Locust's command line, environment or the web-UI form (untrusted
        text, made `printable`: a result holds no control character)."""
        from sglab.load.settings import url_from_options

        return {arm: printable(url, limit=None) if (url := url_from_options(self.environment, arm)) else None
                for arm in self.stack.arms}

    def form_changes(self, form) -> list[str]:
        """`field=value` for each bound field the /swarm form would change (none when unbound)."""
        if self.binding is None:
            return []
        bound = self.binding.fields()
        changes = [f"{key}={form[key]}" for key in BOUND_FORM_FIELDS if key in form
                   and not _same(form[key], bound.get(key))]
        # the request shape: typed first (web_tab refuses a value that is not one), then compared as launched
        return changes + [f"{key}={printable(form[key], limit=40)}" for key in SHAPE_OPTIONS if key in form
                          and form_shape_value(key, str(form[key])) != self.initial_shape[key]]

    def url_provenance(self, urls: dict[str, str | None]) -> tuple[str, str]:
        """(target kind, urls_source) of a run measuring `urls`: `sim` only for the launcher's own simulators."""
        target = os.environ.get(TARGET_ENV, "urls")
        if self.binding is not None:
            fixed = all(_same(urls.get(arm), url) for arm, url in self.binding.urls.items())
            return (target if fixed else "urls"), ("sglab" if fixed else "form")
        unchanged = all(_same(urls.get(arm), self.initial_urls.get(arm)) for arm in urls)
        if not unchanged:
            return "urls", "form"
        return ("in-cluster" if target == "in-cluster" else "urls"), "locust"

    def users_of(self, runner, arm: str) -> int:
        """Users of one arm right now: the running user classes whose `arm` attribute names it."""
        if runner is None:
            return 1
        counts = getattr(runner, "reported_user_classes_count", None) or getattr(runner, "user_classes_count", {})
        arm_of = {cls.__name__: getattr(cls, "arm", None) for cls in (self.environment.user_classes or [])}
        total = sum(count for name, count in counts.items() if arm_of.get(name) == arm)
        return total or max(1, getattr(runner, "user_count", 0) // max(1, len(self.stack.arms)))

    # ---- runs ------------------------------------------------------------------------------

    def start_run(self) -> LiveRun:
        options = self.environment.parsed_options
        stack_name = (getattr(options, "stack", None) or None) if options is not None else None
        if (stack_name or "interactive") != self.stack.name:  # changed in the web-UI form
            try:
                self.stack = StackContext.load(stack_name, *_overrides())
            except ConfigError as exc:
                logger.error("sglab A/B tab: %s", exc)
        urls = self.arm_urls()
        target_kind, urls_source = self.url_provenance(urls)
        if urls_source == "form":
            logger.warning("sglab: arm URLs changed in the web-UI form (%s); this run records them and cannot "
                           "promote", ", ".join(f"{a} {u}" for a, u in urls.items()))
        arms = [info.model_copy(update={"url": urls.get(name)}) for name, info in self.stack.arms.items()]
        if self.run is not None and self.run.running:
            self.run.stop(utc_now_iso())  # RESET mid-test: the old run (and an open-loop schedule) ends unsaved
        run_class, extra = LiveRun, {}
        if self.open_loop_profile() is not None:
            run_class, extra = OpenLoopRun, self._open_loop_fields()
        self.run = run_class(
            run_id=new_run_id(),
            stack=self.stack.name,
            arms=arms,
            started_at=utc_now_iso(),
            started_monotonic_s=time.monotonic(),
            window_s=self.window_s,
            warmup_requests=self.stack.warmup_requests,
            policy=self.stack.policy,
            load_plan=self.stack.load_plan,
            confounds=self.stack.confounds,
            git_commit=git_commit(),
            target_kind=target_kind,
            urls_source=urls_source,
            **extra,
        )
        self._rows_cache = None
        if extra:
            self._start_schedule(self.run)
        return self.run

    # ---- open-loop profiles (sglab/ui/open_loop.py) -------------------------------------------

    def open_loop_profile(self):
        """The run's LoadProfile when it is open loop (rate, trace: not `distributable`) and Locust runs the
        open-loop shape (`sglab ui` loads it for these profiles), else None."""
        plan = self.stack.plan
        if plan is None or type(getattr(self.environment, "shape_class", None)).__name__ != "OpenLoopShape":
            return None
        from sglab.load.profiles import profile_for

        profile = profile_for(plan)
        return None if profile.distributable else profile

    def open_loop_users(self) -> int:
        profile = self.open_loop_profile()
        return profile.users_for(profile.levels()[0]) if profile is not None else 1

    def open_loop_driver(self):
        """The schedule of the running open-loop test (None when none runs)."""
        run = self.run
        return getattr(run, "driver", None) if run is not None and run.running else None

    def _open_loop_fields(self) -> dict:
        from locust import __version__ as locust_version

        profile = self.open_loop_profile()
        key = f"load.{profile.name}.max-in-flight"
        return {"started_epoch": time.time(), "profile": profile.name, "level_label": profile.level_label,
                "users": self.open_loop_users(), "locust_version": locust_version,
                "users_from": f"{key} (the in-flight cap; the form is prefilled with it and may not change it)"}

    def _start_schedule(self, run) -> None:
        from sglab.ui.open_loop import OpenLoopDriver

        plan = self.stack.plan
        run.driver = OpenLoopDriver(self.environment, run, plan, self.open_loop_profile(),
                                    [a.name for a in run.arms], list(self.stack.policy.get("levels") or [1]))
        run.driver.start()

    def check_live_flags(self, run: LiveRun) -> None:
        """Compare each server's live flags with the stack (as `sglab bench` does); mismatches block promotion."""
        from sglab.load.targets import arm_machine, live_mismatches
        from sglab.sglang.client import ServerInfoError, get_server_info

        for index, arm in enumerate(run.arms):
            spec = self.stack.specs.get(arm.name)
            if spec is None or not arm.url:
                continue
            try:
                info = get_server_info(arm.url)
                found = live_mismatches(spec, info)
            except (ServerInfoError, ValueError) as exc:
                logger.warning("sglab: live-flag check of %s failed: %s", arm.name, exc)
                continue
            machine = arm_machine(url=arm.url, target_kind=run.target_kind, declared_image=spec.image, info=info)
            run.arms[index] = arm.model_copy(update={"live_flags_checked": True, "live_mismatches": found,
                                                     "machine": machine})  # what served it (promotion)
            for mismatch in found:
                logger.warning("sglab: live flags differ from the stack: %s", mismatch)

    def stop_run(self) -> Path | None:
        run = self.run
        if run is None or not run.running:
            return None
        run.stop(utc_now_iso())
        self._rows_cache = None
        save_dir = os.environ.get(SAVE_DIR_ENV)
        if save_dir and run.samples:
            return self._save(run, Path(save_dir))
        return None

    def _save(self, run: LiveRun, base: Path) -> Path | None:
        from sglab.results.store import create_run_dir, write_result

        try:
            result = self.judged(run.to_result())
            path = write_result(result, create_run_dir(result.stack, result.run_id, base))
        except (OSError, ValueError) as exc:
            logger.error("could not save the interactive run: %s", exc)
            return None
        self.saved.append(path)
        logger.info("sglab: interactive run saved to %s", path)
        return path

    def add(self, sample: RequestSample, *, level: int, received_monotonic_s: float | None = None) -> None:
        run = self.run
        if run is None or not run.running:
            return
        run.add(sample, level=level, received_monotonic_s=received_monotonic_s)

    # ---- what the UI shows ---------------------------------------------------------------

    def judged(self, result: RunResult) -> RunResult:
        verdict = judge_or_none(result)
        if verdict is not None:
            result = result.model_copy(update={"verdict": verdict})
        return result

    def result(self) -> RunResult | None:
        return self.judged(self.run.to_result()) if self.run is not None else None

    def tables(self) -> tuple[list[dict], list[dict]]:
        """(A/B rows, per-category rows), judged once as if the test stopped now; cached for TABLE_CACHE_S."""
        now = time.monotonic()
        if self._rows_cache is not None and now - self._rows_cache[0] < TABLE_CACHE_S:
            return self._rows_cache[1]
        tables: tuple[list[dict], list[dict]] = ([], [])
        if self.run is not None:
            result = self.run.to_result(now, as_if_stopped=True)
            verdict = judge_or_none(result)
            rows = open_loop_rows if hasattr(self.run, "driver") else table_rows
            tables = (rows(self.run, result, verdict), category_rows(verdict))
        self._rows_cache = (now, tables)
        return tables

    def table_rows(self) -> list[dict]:
        return self.tables()[0]

    def category_rows(self) -> list[dict]:
        return self.tables()[1]

    def plot_data(self) -> dict:
        """The gain plot's points, judged as if the test stopped now (like the table)."""
        result = self.run.to_result(time.monotonic(), as_if_stopped=True) if self.run is not None else None
        return gain_series(result)

    def poll_server_accept_length(self) -> None:
        run = self.run
        if run is None or not run.running:
            return
        for arm in run.arms:
            if arm.speculative and arm.url:
                value = read_accept_length(arm.url)
                if value is not None:
                    run.server_accept_length[arm.name] = value


def judge_or_none(result: RunResult) -> Verdict | None:
    """The analysis stage's verdict for this result, or None while there is nothing to judge yet."""
    if not any(len(level.arms) == 2 for level in result.levels):
        return None
    try:
        return judge(result)
    except Exception as exc:  # a live run's partial data must never break the UI's stats poll
        logger.debug("verdict not available yet: %s", exc)
        return None
