"""`sglab ui`: Locust's own web UI on our locustfile, both arms' targets filled in.

With `target="sim"` it starts the two simulators with the stack's rendered launch args and env
(`sglab.load.targets`), and stops them when Locust exits, on Ctrl-C, SIGTERM or SIGHUP. Locust runs as a
child process (`python -m locust`), exactly as a user would run it, with the form prefilled through
its command-line options. Every test stopped in the UI is saved under results/<stack>/<run-id>/.
Locust and the simulators are started through sglab.core.children: they end with `sglab ui` however it ends
(SIGKILL included, stopped children too).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from sglab.core.children import spawn, stop as stop_child
from sglab.config import load_stack
from sglab.config.arms import baseline_arm, candidate_arm
from sglab.core.paths import project_root
from sglab.load.targets import TargetError, Targets, given_urls, start_sims
from sglab.results.store import RESULT_FILE, list_runs, results_root
from sglab.ui import auth
from sglab.ui.auth import is_loopback_host
from sglab.config.server import sim_time_scale
from sglab.sglang.sim_knobs import time_scale_problem
from sglab.ui.session import (BOUND_ENV, PROFILE_ENV, SAVE_DIR_ENV, SIM_TIME_SCALE_ENV, TARGET_ENV, TRACE_ENV,
                              Binding)
from sglab.core.untrusted import printable

UI_PLUGIN = Path(__file__).with_name("locust_plugin.py")  # the A/B tab, loaded beside the locustfile
OPEN_LOOP_PLUGIN = Path(__file__).with_name("open_loop_plugin.py")  # rate/trace: the schedule's shape and user
# The only user class an open-loop run spawns (sglab.ui.open_loop.OpenLoopUser), by name: that module imports Locust.
OPEN_LOOP_USER_CLASS = "OpenLoopUser"

UI_START_TIMEOUT_S = 60.0
LOCUST_STOP_TIMEOUT_S = 15.0


class LaunchError(Exception):
    """The UI cannot start as asked; the message says why and what to change."""


def ui_profile(stack: str, stack_profile: str | None, asked: str | None) -> str:
    """The load profile the UI runs: `--profile` or the stack's `load.profile`.

    A closed-loop profile (concurrency) runs Locust's own user count, both arms side by side. An
    open-loop one (rate, trace: not `distributable`) runs the bench's interleaved schedule from the
    form's START (sglab/ui/open_loop.py), its users fixed at the profile's in-flight cap.
    """
    from sglab.load.profiles import DEFAULT_PROFILE, PROFILES, profile_names

    name = asked or stack_profile or DEFAULT_PROFILE
    if name not in PROFILES:
        raise LaunchError(f"--profile {name}: no such load profile; use one of: {', '.join(profile_names())}")
    return name


def is_open_loop(profile: str) -> bool:
    from sglab.load.profiles import PROFILES

    return not PROFILES[profile].distributable


def check_open_loop(opts: "UiOptions", plan, profile: str) -> None:
    """Refuse what an open-loop UI run cannot honour: a user count or spawn rate, a trace run without a trace."""
    given = [flag for flag, value in (("--users", opts.users), ("--spawn-rate", opts.spawn_rate)) if value is not None]
    if given:
        raise LaunchError(f"{' and '.join(given)}: profile {profile} is open loop (requests arrive on its schedule, "
                          f"not when a user is free); its users are the in-flight cap load.{profile}.max-in-flight "
                          f"of the stack ({getattr(plan, profile).max_in_flight}). Drop {' and '.join(given)}, or set "
                          f"load.{profile}.max-in-flight in stacks/Pulumi.{opts.stack}.yaml")
    if profile != "trace":
        return
    trace = opts.trace or plan.trace.file
    if not trace:
        raise LaunchError(f"profile trace needs a trace to replay: pass --trace FILE (JSONL) or set load.trace.file "
                          f"in stacks/Pulumi.{opts.stack}.yaml")
    from sglab.core.errors import ConfigError
    from sglab.load.profiles import read_trace

    path = Path(trace) if Path(trace).is_absolute() else project_root() / trace
    try:
        read_trace(path)
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None


@dataclass(frozen=True)
class UiOptions:
    stack: str
    target: str = "sim"  # "sim" | "urls"
    baseline_url: str | None = None
    candidate_url: str | None = None
    web_host: str = "127.0.0.1"
    web_port: int = 8089
    web_login: bool = False
    users: int | None = None
    spawn_rate: float | None = None
    save_results: bool = True
    log_dir: Path | None = None
    profile: str | None = None  # default: the stack's load.profile
    trace: Path | None = None  # replaces load.trace.file (profile trace)


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or "0.0.0.0", port))
        except OSError:
            return False
    return True


def locust_command(opts: UiOptions, urls: dict[str, str], locustfile: Path, users: int, spawn_rate: float,
                   *, open_loop: bool = False) -> list[str]:
    """The form prefilled with users and spawn rate; open loop: those are the in-flight cap (the open-loop plugin's
    shape keeps them, and the tab refuses a form that changes them) and only the schedule's user class runs."""
    files = f"{locustfile},{UI_PLUGIN},{OPEN_LOOP_PLUGIN}" if open_loop else f"{locustfile},{UI_PLUGIN}"
    cmd = [
        sys.executable, "-m", "locust", "-f", files,
        "--web-host", opts.web_host, "--web-port", str(opts.web_port),
        "--users", str(users), "--spawn-rate", f"{spawn_rate:g}",
        "--baseline-url", urls["baseline"], "--candidate-url", urls["candidate"],
        "--stack", opts.stack,
    ]
    if opts.web_login:
        cmd.append("--web-login")
    if open_loop:
        cmd.append(OPEN_LOOP_USER_CLASS)
    return cmd


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # SIGHUP: the terminal closed


def _raise_on_sigterm(signum, frame):
    raise KeyboardInterrupt


def run(opts: UiOptions, *, out=sys.stdout) -> int:
    """Start everything, serve until Locust exits or the user interrupts, then clean up. Returns Locust's code."""
    config = load_stack(opts.stack).config
    profile = ui_profile(opts.stack, config.load.profile, opts.profile)
    open_loop = is_open_loop(profile)
    if open_loop:
        check_open_loop(opts, config.load, profile)
    if not opts.web_login and not is_loopback_host(opts.web_host):
        raise LaunchError(f"--web-host {opts.web_host or '(all interfaces)'} is not loopback, and without a login "
                          f"anyone who reaches it could start tests and record results; add --web-login "
                          f"(password from {auth.PASSWORD_ENV}), or keep the default --web-host 127.0.0.1")
    if opts.web_login:
        try:
            auth.credentials_from_env()
        except auth.LoginConfigError as exc:
            raise LaunchError(str(exc)) from None
    if not port_is_free(opts.web_host, opts.web_port):
        raise LaunchError(f"port {opts.web_port} on {opts.web_host} is in use; pick another with --web-port")
    locustfile = project_root() / config.locust.locustfile
    if not locustfile.is_file():
        raise LaunchError(f"locustfile {locustfile} not found (stack key locust.locustfile)")
    users = opts.users or 2 * min(config.policy.levels or [1])  # one user per arm per gating concurrency
    spawn_rate = opts.spawn_rate or float(users)
    if open_loop:  # derived, not chosen: the in-flight cap (sglab.ui.open_loop.OpenLoopShape runs the same)
        users = getattr(config.load, profile).max_in_flight
        spawn_rate = float(min(users, 100))
    if opts.target == "sim" and not open_loop:
        # every user is a stream of this one Locust process, bounded x the simulators' scale (sim_knobs.py)
        problem = time_scale_problem(sim_time_scale(config.sim), users)
        if problem is not None:
            raise LaunchError(f"--users: {problem} (the stack's sim.time-scale)")
    log_dir = opts.log_dir or Path(tempfile.mkdtemp(prefix=f"sglab-ui-{opts.stack}-"))

    runs_before = set(list_runs(opts.stack))
    previous = {sig: signal.signal(sig, _raise_on_sigterm) for sig in STOP_SIGNALS}
    targets: Targets | None = None
    locust: subprocess.Popen | None = None
    try:
        if opts.target == "sim":
            print(f"starting simulators for {opts.stack} (logs in {log_dir})", file=out, flush=True)
            targets = start_sims([baseline_arm(config), candidate_arm(config)], log_dir=log_dir)
        else:
            targets = given_urls({"baseline": opts.baseline_url or "", "candidate": opts.candidate_url or ""})
        env = {**os.environ, TARGET_ENV: "sim" if opts.target == "sim" else "urls",
               BOUND_ENV: Binding(opts.stack, dict(targets.urls)).to_env(), PROFILE_ENV: profile}
        if opts.target == "sim":
            env[SIM_TIME_SCALE_ENV] = f"{sim_time_scale(config.sim):g}"  # the form's users are bounded by it
        if opts.trace is not None:
            env[TRACE_ENV] = str(opts.trace.resolve())
        if opts.save_results:
            env[SAVE_DIR_ENV] = str(results_root())
        cmd = locust_command(opts, targets.urls, locustfile, users, spawn_rate, open_loop=open_loop)
        with open(log_dir / "locust.log", "wb") as log:
            locust = spawn(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           cwd=project_root())
        url = f"http://{opts.web_host or '127.0.0.1'}:{opts.web_port}"
        _wait_for_ui(url, locust, log_dir / "locust.log")
        for arm, arm_url in targets.urls.items():
            print(f"  {arm}: {printable(arm_url)}", file=out)
        login = " (login: user " + (os.environ.get(auth.USERNAME_ENV) or auth.DEFAULT_USERNAME) + ")" \
            if opts.web_login else ""
        if open_loop:
            print(_open_loop_line(config.load, profile, opts), file=out, flush=True)
        print(f"Locust web UI: {url}/{login}; open the A/B tab after starting a swarm; Ctrl-C to stop",
              file=out, flush=True)
        if opts.save_results:
            print(f"every stopped test is saved under {results_root() / opts.stack}/", file=out, flush=True)
        return locust.wait()
    except KeyboardInterrupt:
        print("stopping", file=out, flush=True)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if locust is not None:
            _stop_locust(locust)
        if targets is not None:
            targets.stop()
        for run_dir in sorted(set(list_runs(opts.stack)) - runs_before):
            print(f"saved interactive run: {printable(run_dir / RESULT_FILE)}", file=out, flush=True)


def _open_loop_line(plan, profile: str, opts: UiOptions) -> str:
    spec = getattr(plan, profile)
    what = f"rate levels {plan.rate.levels} req/s ({plan.rate.arrival})" if profile == "rate" else \
        f"trace {opts.trace or plan.trace.file} (time-scale {plan.trace.time_scale:g})"
    return (f"open loop ({profile}): {what}; START runs the interleaved schedule (warm-up, then {plan.rounds} "
            f"rounds per gated level) with users = the in-flight cap load.{profile}.max-in-flight "
            f"({spec.max_in_flight}), and stops when it is done")


def _wait_for_ui(url: str, locust: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + UI_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if locust.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise LaunchError(f"Locust exited with code {locust.returncode} before its UI came up:\n{tail}")
        try:
            httpx.get(url + "/", timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise LaunchError(f"Locust's UI did not answer at {url} within {UI_START_TIMEOUT_S:g} s (see {log_path})")


def _stop_locust(locust: subprocess.Popen) -> None:
    """SIGTERM lets Locust stop the test (our test_stop listener saves the run) and quit; SIGKILL when it does not
    within LOCUST_STOP_TIMEOUT_S, or at once when it is stopped (it would never handle SIGTERM)."""
    stop_child(locust, timeout_s=LOCUST_STOP_TIMEOUT_S)


__all__ = ["LaunchError", "TargetError", "UiOptions", "locust_command", "run", "ui_profile"]
