"""The same-run A/B benchmark: every arm, the same prompts and load, interleaved rounds.

For each level of the plan's load profile (sglab/load/profiles.py; default: closed-loop concurrency,
level N = N users): keep the profile's Locust users running, give each arm a discarded warm-up, then
R rounds; inside a round every arm gets one segment (a fixed duration or request count), in an order
shuffled per round from the seed. Between segments the gate closes and in-flight requests finish,
so arms never overlap and a round's wall time is exactly its requests' span. Before measuring it
checks each server's live flags against the stack and refuses on any difference. The result is
saved after every level, so an interrupted or crashed run still leaves what it measured. An arm that
dies or freezes (the watchdog, sglab/load/targets.py) ends the run at once as invalid, with the reason. A rich
progress bar per level shows where it is; Locust's own CSV and HTML reports go into the run directory.
"""

from __future__ import annotations

import csv
import secrets
import signal
import sys
import time
from pathlib import Path

import gevent
from locust import __version__ as locust_version
from locust.env import Environment
from locust.event import Events
from locust.html import get_html_report
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sglab import __version__ as sglab_version
from sglab.config.arms import confounds
from sglab.config.lints import lint_arms
from sglab.core.untrusted import printable
from sglab.load.collector import Phase, SampleCollector, get_collector
from sglab.load.owner import this_process
from sglab.load.profiles import LoadProfile, profile_for
from sglab.load.schedule import prompt_offset, round_orders
from sglab.load.request import (BenchRequest, RefusedError, arm_infos, check_live_flags, reached_arms, sim_start_env,
                                stack_sim_env)
from sglab.load.design import CannotMove, MoveFailed, Mover, Node, Placement, mover_for, placement_for
from sglab.load.settings import LoadSettings
from sglab.load.summary import arm_level_summary, round_sample
from sglab.load.targets import (AcceptWindow, ArmWatch, Targets, accept_method, free_port, stall_timeout_s, touch,
                                wire_count)
from sglab.load.users import ArmUser, SegmentPacing, get_pacing, set_pacing, set_settings
from sglab.results.integrity import planned
from sglab.schema.result import ArmInfo, DesignRecord, LevelResult, LoadGen, RunResult, Target
from sglab.results.store import create_run_dir, git_commit, new_run_id, utc_now_iso, write_result

SETTLE_TIMEOUT_S = 30.0
POLL_S = 0.01
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: the terminal closed
__all__ = ["BenchRequest", "BenchRun", "RefusedError", "arm_infos", "check_live_flags", "run_bench", "stack_sim_env"]


def recorded_sim_env(request: BenchRequest) -> tuple[dict[str, str], float | None]:
    """The simulator knobs and time scale a run records (result.target.sim_env, .time_scale)."""
    sim_env = {**stack_sim_env(request.loaded), **request.sim_env} if request.target_kind == "sim" else {}
    scale = sim_env.get("SGLAB_SIM_TIME_SCALE") or next(
        (a.env["SGLAB_SIM_TIME_SCALE"] for a in request.arms if "SGLAB_SIM_TIME_SCALE" in a.env), None)
    return sim_env, float(scale) if scale else None


class BenchRun:
    def __init__(self, request: BenchRequest, targets: Targets, *, run_id: str | None = None) -> None:
        self.request = request
        self.plan = request.plan
        self.profile: LoadProfile = profile_for(request.plan)
        self.targets = targets
        self.arm_names = [a.name for a in request.arms]
        self.speculative = {a.name: a.speculative for a in request.arms}
        self.accept_method = accept_method(targets.urls, self.speculative)  # /metrics counters, else /flush_cache
        self.run_id = run_id or new_run_id()
        self.interrupted: str | None = None
        self.invalid: str | None = None
        self.levels: list[LevelResult] = []
        self.run_dir: Path | None = None
        self.t0 = time.time()
        self.env: Environment | None = None
        self.collector: SampleCollector | None = None
        self.master = None
        self.workers = None
        self.watch: ArmWatch | None = None
        # the design (sglab/load/design.py): where each arm runs now, and what it cost so far
        self.placement = placement_for(request)
        self.period: int | None = None
        self.where: dict[str, Node | None] = {}
        if request.target_kind == "sim":
            self.where = dict(self.placement.start_nodes())
        self.mover: Mover | None = None
        if self.placement.moves:
            self._start_mover()
        self.design = DesignRecord(design=self.placement.design, notes=list(self.placement.notes))
        joined = request.joined
        if joined is not None:  # period 1 happened in the joined run, on the other machines
            self.where = self.placement.nodes_for(self.placement.joined_period)
            self.design.nodes = {arm: [joined.first[arm]] for arm in self.arm_names}
            self.design.joined_run, self.design.joined_digest = joined.run_id, joined.digest

    def _start_mover(self) -> None:
        """The backend that moves the servers, and where they are now; a design that cannot be carried out
        (the cluster does not let the Job move its arms) runs parallel and says why, before anything is measured."""
        placement = self.placement
        try:
            self.mover = mover_for(self.request, self.targets, placement, sim_start_env(self.request))
            self.where = self.mover.start()
        except CannotMove as exc:
            self.mover = None
            self.placement = Placement(design="parallel", arms=placement.arms, nodes=placement.nodes,
                                       notes=[*placement.notes, f"policy.design is {placement.design}, but {exc}: "
                                              "ran parallel, so the gain includes any difference between the nodes"])
            return
        if not placement.nodes:  # in the cluster: the nodes the arms run on now, the baseline's first
            placement.nodes = [node for arm in placement.arms if (node := self.where.get(arm)) is not None]

    # ---- result ---------------------------------------------------------------------------
    def build_result(self, infos: list[ArmInfo], mismatches: list[str]) -> RunResult:
        stack = self.request.loaded
        sim_env, scale = recorded_sim_env(self.request)
        if self.mover is None and self.request.target_kind != "sim" and self.request.joined is None:
            # servers given by URL: the node the cluster reports, if any
            self.where = {i.name: (i.machine.node_name, 1.0) if i.machine and i.machine.node_name else None
                          for i in infos}
            self.design.nodes = {arm: [node[0] if node else None] for arm, node in self.where.items()}
        return RunResult(
            run_id=self.run_id, stack=stack.name, kind=self.request.kind, started_at=utc_now_iso(),
            complete=False, incomplete_reason="running", git_commit=git_commit(), sglab_version=sglab_version,
            target=Target(kind=self.request.target_kind, urls=dict(self.targets.urls),
                          sim_env=sim_env, time_scale=scale),
            arms=infos, config_hash={a.name: a.config_hash for a in self.request.arms}, design=self.design,
            confounds=[c.as_dict() for c in confounds(stack.config)] if self.request.kind != "aa" else [],
            lints=[lint.as_dict() for lint in lint_arms(self.request.arms, stack.config.accept_lints)],
            live_mismatches=mismatches,
            # what it will measure
            integrity=planned({level: self.rounds_at(level) for level in self.profile.levels()}),
            load_plan=self.plan.model_dump(mode="json", by_alias=False),
            policy=stack.config.policy.model_dump(mode="json", by_alias=False),
            loadgen=LoadGen(tool="locust", locust_version=locust_version, user_class="FastHttpUser",
                            workers=self.request.workers, endpoint=self.plan.endpoint, profile=self.profile.name,
                            **this_process()),
        )

    def save(self, result: RunResult) -> None:
        assert self.run_dir is not None
        result.levels = list(self.levels)
        kept = [r for lv in result.levels for r in lv.requests]
        result.output_texts = {**{k: v for k, v in result.output_texts.items()
                                  if k in {r.output_sha256 for r in kept}}, **self.collector.texts(kept)} \
            if self.collector is not None else result.output_texts
        write_result(result, self.run_dir, overwrite=(self.run_dir / "result.json").exists())

    # ---- locust ---------------------------------------------------------------------------
    def _environment(self, settings: LoadSettings) -> Environment:
        env = Environment(user_classes=[ArmUser], events=Events(), stop_timeout=SETTLE_TIMEOUT_S)
        set_settings(env, settings)
        token = secrets.token_hex(16)  # only the workers started here may report to this master
        if self.request.workers > 0:
            from sglab.load.distributed import LocalWorkers

            env.create_master_runner("127.0.0.1", free_port())
            self.workers = LocalWorkers(self.request.workers, env, token)
        else:
            env.create_local_runner()
        self.collector = get_collector(env)
        self.collector.set_phase(open=False, run_started_epoch=self.t0)
        env.events.init.fire(environment=env, runner=env.runner, web_ui=None)
        if self.workers is not None:
            from sglab.load.distributed import MasterControl

            self.master = MasterControl(env, token)
            self.workers.start(lambda: self.interrupted is not None)  # SIGTERM while they start stops the run
            self.master.send_settings(settings)
        return env

    def _set_users(self, count: int) -> None:
        runner = self.env.runner
        runner.start(count, spawn_rate=100.0)  # Locust warns above 100/s; 64 users take 0.64 s
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline and self.interrupted is None:
            if runner.user_count == count:
                return
            gevent.sleep(POLL_S)
        if self.interrupted is None:
            raise RuntimeError(f"Locust did not reach {count} users (has {runner.user_count})")

    def _phase(self, **changes) -> Phase:
        if changes.get("open"):
            touch(self.env, changes["arm"])  # the arm's stall clock starts with its segment
            pacing = self.profile.pacing(changes["level"], changes["round_index"])
            set_pacing(self.env, SegmentPacing(self.collector.phase.serial + 1, time.time(), pacing))
        phase = self.collector.set_phase(**changes)
        if self.master is not None:
            quota = phase.request_quota
            self.master.send_phase(phase, self.master.split_quota(quota) if quota is not None else None)
        return phase

    def _wake_waiting(self) -> None:
        """Requests waiting for their start time in a closed segment are not sent."""
        pacing = get_pacing(self.env) if self.env is not None else None
        if pacing is not None:
            pacing.closed.set()

    def _segment_done(self, phase: Phase) -> bool:
        if self.master is not None:
            return self.master.all_idle(phase.serial)
        c = self.collector
        exhausted = phase.request_quota is not None and c.issued(phase.arm) >= phase.request_quota
        return c.in_flight == 0 and (not c.phase.open or exhausted)

    def _close(self, phase: Phase) -> None:
        self.collector.close()
        self._wake_waiting()
        if self.master is not None:
            from dataclasses import replace

            self.master.send_phase(replace(phase, open=False))

    def segment(self, level: int, round_index: int, position: int, arm: str, *, warmup: bool,
                progress: BenchProgress):
        """Run one arm alone until its duration or quota is done; returns its RoundSample."""
        plan = self.plan
        url = self.targets.urls[arm]
        accept_window = AcceptWindow(url, self.accept_method, speculative=bool(self.speculative.get(arm)))
        quota = plan.warmup_requests if warmup else plan.round_requests
        duration = None if warmup or plan.round_requests is not None else plan.round_duration_s
        scheduled = self.profile.pacing(level, round_index).requests()  # a trace: its length
        if scheduled is not None and not warmup:
            quota = scheduled if quota is None else min(quota, scheduled)
        count = len(self.env.sglab_settings.prompts)
        offset = self.profile.prompt_offset(level, round_index, count)
        offset = prompt_offset(plan.seed, level, round_index, count) if offset is None else offset
        started = time.time()
        phase = self._phase(level=level, round_index=round_index, warmup=warmup, arm=arm, prompt_offset=offset,
                            request_quota=quota, open=True)
        label = "warm-up" if warmup else f"round {round_index + 1}/{self.rounds_at(level)}"
        progress.segment(f"{label} {arm}")
        closed_at = None
        while self.interrupted is None:
            if duration is not None and closed_at is None and time.time() - started >= duration:
                self._close(phase)
                closed_at = time.time()
            if self._segment_done(phase):
                break
            gevent.sleep(POLL_S)
        partial = self.interrupted is not None
        if partial:
            self._close(phase)
            # an invalid run does not wait for requests to a dead server; _finish stops the users
            deadline = time.monotonic() + (0.0 if self.invalid else SETTLE_TIMEOUT_S)
            while not self._segment_done(phase) and time.monotonic() < deadline:
                gevent.sleep(POLL_S)
        self.collector.close()
        finished = time.time()
        if self.master is not None and not self.invalid:
            self._wait_samples(phase)
        samples = self.collector.samples(arm, level=level, round_index=round_index, warmup=warmup)
        if samples:
            finished = max(started, max(self.t0 + s.start_s + (s.e2e_ms or 0) / 1000 for s in samples))
        server_accept = accept_window.close() if not self.invalid else None
        sample = round_sample(samples, level=level, round_index=round_index, position=position, arm=arm,
                              warmup=warmup, started_at_s=started - self.t0, duration_s=finished - started,
                              server_accept_length=server_accept,
                              window_s=(closed_at - started) if closed_at is not None else None)
        sample.complete = not partial
        sample.accept_length_method = self.accept_method if server_accept is not None else None
        node = self.where.get(arm)
        sample.node, sample.period = (node[0] if node else None), self.period
        if not warmup:
            self.design.measuring_s += finished - started
        return sample

    def _wait_samples(self, phase: Phase) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not self.master.all_idle(phase.serial) and time.monotonic() < deadline:
            gevent.sleep(POLL_S)

    def rounds_at(self, level: int) -> int:
        """load.rounds where the policy gates; load.ungated-rounds where a level only shows the crossover."""
        plan = self.plan
        if plan.ungated_rounds is None or level in self.request.loaded.config.policy.levels:
            return plan.rounds
        return plan.ungated_rounds

    # ---- the design -----------------------------------------------------------------------
    def enter_period(self, level: int, round_index: int, total_rounds: int, progress: BenchProgress,
                     arms: list[str], *, level_start: bool = False) -> list:
        """Before a round: move the servers if its period places them elsewhere, then warm up the arms that
        restarted (all of `arms` at a level's start); returns the warm-up samples."""
        period = self.placement.period(round_index, total_rounds)
        if not level_start and period == self.period:
            return []
        self.period = period
        moved: list[str] = []
        if self.mover is not None:
            changed = self.mover.check()  # the period that ends was served by the servers the last move left
            if changed:
                self._end_invalid(changed)
                return []
            moved = self._move(self.placement.nodes_for(period))
        self._record_period(period)
        live = self.placement.arms_of(period, arms)
        warm_arms = [a for a in live if level_start or a in moved]
        warm = []
        if self.plan.warmup_requests and self.interrupted is None:
            # a burn-in, not counted: the one before round r is filed as round -(r+1) (-1: the level's first),
            # so every warm-up keeps its own samples and no round >= 0 holds one
            index = -(round_index + 1)
            for position, arm in enumerate(warm_arms):
                warm.append(self.segment(level, index, position, arm, warmup=True, progress=progress))
                progress.advance()
                if self.interrupted:
                    break
        return warm

    def _record_period(self, period: int | None) -> None:
        index = (period or 1) - 1
        for arm in self.arm_names:
            nodes = self.design.nodes.setdefault(arm, [])
            if len(nodes) <= index:
                nodes += [None] * (index + 1 - len(nodes))
                node = self.where.get(arm)
                nodes[index] = node[0] if node else None

    def _move(self, wanted: dict[str, Node | None]) -> list[str]:
        """Move every server whose node changes (sglab/load/design.py) and wait until all serve again. Returns the
        arms started; a server that does not come back ends the run invalid."""
        assert self.mover is not None
        moving = {arm: wanted.get(arm) for arm in self.arm_names if wanted.get(arm) != self.where.get(arm)}
        if not moving:
            return []
        started_at = time.monotonic()
        if self.watch is not None:
            self.watch.stop()
        try:
            restarted = self.mover.move(moving)
        except MoveFailed as exc:
            restarted = exc.restarted
            self._on_arm_failure(exc.arm, exc.reason)
        self.where.update(moving)
        self.design.restarts += len(restarted)
        self.design.restart_s += time.monotonic() - started_at
        if self.invalid is None and self.env is not None:
            self.watch = self._watch()
        return restarted

    def run_level(self, level: int, progress: BenchProgress, result: RunResult) -> None:
        plan = self.plan
        total_rounds = self.rounds_at(level)
        segments = len(self.arm_names) * (total_rounds + (1 if plan.warmup_requests else 0))
        progress.level(level, segments)
        self._set_users(self.profile.users_for(level))
        rounds = self.enter_period(level, 0, total_rounds, progress, self.arm_names, level_start=True)
        orders = round_orders(self.arm_names, plan.seed, level, total_rounds)
        for round_index in range(total_rounds):
            if self.interrupted:
                break
            rounds += self.enter_period(level, round_index, total_rounds, progress, self.arm_names)
            if self.interrupted:
                break
            for position, arm in enumerate(self.placement.arms_of(self.period, orders[round_index])):
                rounds.append(self.segment(level, round_index, position, arm, warmup=False, progress=progress))
                progress.advance(f"round {round_index + 1}/{total_rounds} done")
                if self.interrupted:
                    break
        requests = self.collector.samples(level=level)
        summaries = {arm: arm_level_summary([s for s in requests if s.arm == arm], [r for r in rounds if r.arm == arm])
                     for arm in self.arm_names}
        self.levels.append(LevelResult(concurrency=level, arms=summaries, rounds=rounds,
                                       requests=sorted(requests, key=lambda s: s.start_s)))
        self.save(result)

    def _on_signal(self, signum: int) -> None:
        if self.interrupted is None:
            self.interrupted = f"interrupted by {signal.Signals(signum).name} after {time.time() - self.t0:.1f} s"

    def _where(self) -> str:
        phase = self.collector.phase if self.collector is not None else None
        if phase is None or not phase.level:
            return "before the first level"
        step = "warm-up" if phase.warmup else f"round {phase.round_index + 1}/{self.rounds_at(phase.level)}"
        return f"{self.profile.level_label} {phase.level}, {step}"

    def _on_arm_failure(self, arm: str, what: str) -> None:
        """An arm died or froze: stop sending to every arm now; the run ends invalid (nothing to pair with)."""
        self._end_invalid(f"{arm} server {what}")

    def _end_invalid(self, what: str) -> None:
        if self.invalid is None:
            self.invalid = printable(f"{what} at {self._where()}", limit=None)  # it may quote a server
            if self.interrupted is None:
                self.interrupted = f"invalid: {self.invalid}"
            self.collector.close()
            self._wake_waiting()
            if self.env is not None:
                self.env.stop_timeout = 0  # users stuck on the dead arm are stopped, not waited for

    def _watch(self) -> ArmWatch:
        """The watchdog over the servers running now (a switchback's other arm is stopped, not dead)."""
        live = [arm for arm in self.arm_names if arm not in self.where or self.where[arm] is not None]
        processes = {sim.arm.name: sim.process for sim in self.targets.processes if sim.arm.name in live}
        urls = {arm: url for arm, url in self.targets.urls.items() if arm in live}
        return ArmWatch(self.env, urls, processes, stall_s=stall_timeout_s(self.plan.request_timeout_s),
                        on_failure=self._on_arm_failure,
                        active=self._active_arm).start()

    def _active_arm(self) -> tuple[str | None, int]:
        arm = self.collector.phase.arm
        return (arm, wire_count(self.env, arm)) if arm is not None else (None, 0)

    def execute(self, result: RunResult, run_dir: Path) -> RunResult:
        """Run every level; on SIGINT/SIGTERM/SIGHUP or a dead arm stop cleanly and keep what was measured."""
        self.run_dir = run_dir
        self.save(result)
        settings = LoadSettings.from_plan(self.plan, urls=self.targets.urls, stack=self.request.loaded.name,
                                          model=self.request.loaded.config.model.served_model_name or "default",
                                          base_dir=self.request.loaded.path.parent.parent, profile=self.profile)
        handlers = [gevent.signal_handler(sig, self._on_signal, sig) for sig in STOP_SIGNALS]
        try:
            self.env = self._environment(settings)
            self.watch = self._watch()
            with BenchProgress(self.request.progress) as progress:
                for level in self.profile.levels():
                    if self.interrupted:
                        break
                    self.run_level(level, progress, result)
        except BaseException as exc:
            if self.interrupted is None:
                self.interrupted = f"failed: {type(exc).__name__}: {printable(exc, limit=None)}"
            if not isinstance(exc, (KeyboardInterrupt, gevent.GreenletExit)):
                self._finish(result)
                raise
        finally:
            if self.watch is not None:
                self.watch.stop()
            for handler in handlers:
                handler.cancel()
        return self._finish(result)

    def _finish(self, result: RunResult) -> RunResult:
        if self.mover is not None:
            changed = self.mover.check()  # the last period, as for every other one
            if changed:
                self._end_invalid(changed)
            self.design.notes += self.mover.finish()
        if self.env is not None:
            try:
                self.env.runner.quit()
            except Exception:
                pass
            write_locust_reports(self.env, self.run_dir)
        if self.workers is not None:
            self.workers.stop()
            self.workers = None
        result.finished_at = utc_now_iso()
        result.complete = self.interrupted is None
        result.incomplete_reason = self.interrupted
        result.invalid_reason = self.invalid
        self.save(result)
        return result


def run_bench(request: BenchRequest) -> tuple[RunResult, Path]:
    """Start (or reach) the arms, check their live flags, run the schedule, write the result."""
    import shutil

    run_id = new_run_id()
    run_dir = create_run_dir(request.loaded.name, run_id, base=request.out)
    started = False
    try:
        with reached_arms(request, run_dir) as (targets, infos, mismatches):
            run = BenchRun(request, targets, run_id=run_id)
            result = run.build_result(infos, mismatches)
            started = True
            result = run.execute(result, run_dir)
    finally:
        if not started:
            shutil.rmtree(run_dir, ignore_errors=True)  # our own fresh directory: nothing was measured
    return result, run_dir


# ---- progress: one rich bar per level -------------------------------------------------------------------------------
class BenchProgress:
    """One rich bar per level, advanced per arm segment (nothing shown when disabled)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task = None
        self.console = Console(file=sys.stderr)

    def __enter__(self) -> "BenchProgress":
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[status]}"), console=self.console, transient=False,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def level(self, concurrency: int, segments: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task(f"c={concurrency:<3}", total=segments, status="")

    def segment(self, status: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, status=status)

    def advance(self, status: str = "") -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, status=status)

    def note(self, message: str) -> None:
        text = printable(message, limit=None)
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr)


# ---- Locust's own CSV and HTML reports, in the run directory (one row per arm and metric) ---------------------------
CSV_PREFIX = "locust"
HTML_FILE = "locust_report.html"


def write_locust_reports(environment, run_dir: Path | None) -> list[Path]:
    if run_dir is None or environment.runner is None:
        return []
    stats_csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
    paths = []
    for suffix, write in (("stats", stats_csv.requests_csv), ("failures", stats_csv.failures_csv),
                          ("exceptions", stats_csv.exceptions_csv)):
        path = run_dir / f"{CSV_PREFIX}_{suffix}.csv"
        with open(path, "w", newline="", encoding="utf-8") as fh:
            write(csv.writer(fh))
        paths.append(path)
    html = run_dir / HTML_FILE
    html.write_text(get_html_report(environment), encoding="utf-8")
    paths.append(html)
    return paths
