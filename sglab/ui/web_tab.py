"""The "A/B" tab in Locust's own web UI, through its documented extension points.

`install(events)` (called by `sglab/ui/locust_plugin.py`, which `sglab ui` loads beside the locustfile)
registers Locust event listeners that
- add the tab and its table to the UI's template args (`extended_tabs`, `extended_tables`) and a
  download link on the "Download Data" tab (`extended_csv_files`),
- collect every request sample the locustfile fires (`sglab_request_sample`) into a `LiveRun`
  (in distributed mode the collector forwards workers' samples to the master, which fires them again),
- inject the table rows (and the per-category table's, a second tab) into `/stats/requests` as
  `extended_stats` (the UI polls it every 2 s),
- serve the run as a sglab result document at `/sglab/result.json` (kind "interactive"),
- set up the login page when Locust runs with `--web-login` (see `sglab.ui.auth`),
- refuse to serve without login on anything but loopback, and put the guard of `sglab.ui.auth` (cross-site and
  DNS-rebinding refusals) in front of every route; a session bound by `sglab ui` refuses a /swarm form
  that would change its stack or arm URLs.
"""

from __future__ import annotations

import json
import logging
import os
import sys

import gevent
from flask import Response, request

from sglab.config.loadplan import MAX_CONCURRENCY
from sglab.core.errors import USAGE
from sglab.core.untrusted import printable, printable_logger
from sglab.load.collector import get_collector
from sglab.load.plugin import form_shape_problem
from sglab.schema.result import RequestSample
from sglab.sglang.sim_knobs import MAX_STREAMS_X_TIME_SCALE
from sglab.ui import auth
from sglab.ui.session import SIM_TIME_SCALE_ENV, UiSession
from sglab.ui.views import CATEGORY_TAB_KEY, CATEGORY_TAB_TITLE, PLOT_PATH, category_columns, plot_script, table_columns

logger = printable_logger("sglab.ui")  # form values and server errors reach the console
logging.getLogger("httpx").setLevel(logging.WARNING)  # the server-info poll would log every 5 s

TAB_KEY = "sglab-ab"
TAB_TITLE = "A/B"
RESULT_PATH = "/sglab/result.json"
STATS_PATH = "/stats/requests"
SWARM_PATH = "/swarm"
SERVER_POLL_S = 5.0

_sessions: list[UiSession] = []  # one per Environment with a web UI; reset_stats is fired without one


def _session(environment) -> UiSession | None:
    return getattr(environment, "sglab_ui", None)


_installed: set[int] = set()


def install(events) -> None:
    """Register the tab's listeners on Locust's `events` (once per events object)."""
    if id(events) in _installed:
        return
    _installed.add(id(events))
    events.init.add_listener(_on_init)
    events.test_start.add_listener(_on_test_start)
    events.test_stop.add_listener(_on_test_stop)
    events.reset_stats.add_listener(_on_reset_stats)


def _refuse(message: str) -> None:
    logger.error("%s", message)
    print(f"error: {printable(message, newlines=True, limit=None)}", file=sys.stderr)
    sys.exit(USAGE)


def _on_init(environment, **_kwargs) -> None:
    """Only a process serving the web UI (local or master) gets a session; headless runs, `sglab bench`
    and workers are left untouched."""
    if not environment.web_ui:
        return
    session = UiSession.from_environment(environment)
    environment.sglab_ui = session
    _apply_profile(environment, session)
    _sessions.append(session)
    get_collector(environment).event.add_listener(lambda sample, **_kw: _on_sample(environment, sample))
    _install_web(environment, session)


def _apply_profile(environment, session: UiSession) -> None:
    """`sglab ui --profile` on a stack declaring another profile: the users run the plan with it applied
    (a bound session's stack and URLs cannot change in the form, so the settings stay fixed)."""
    settings = session.profile_settings()
    if settings is not None:
        from sglab.load.users import set_settings

        set_settings(environment, settings)


def _install_web(environment, session: UiSession) -> None:
    web_ui = environment.web_ui
    if not web_ui.web_login and not auth.is_loopback_host(web_ui.host or ""):
        _refuse(f"the web UI would listen on '{web_ui.host or '*'}' (not loopback) without a login; anyone who "
                f"reaches it could start tests and save results. Fix: add --web-login (password from "
                f"{auth.PASSWORD_ENV}), or listen on loopback only: --web-host 127.0.0.1")
    if web_ui.web_login:
        try:
            credentials = auth.credentials_from_env()
        except auth.LoginConfigError as exc:
            _refuse(str(exc))
        auth.install_login(web_ui, credentials)
    auth.install_guard(web_ui)

    open_loop = session.open_loop_profile()
    columns = table_columns(open_loop.level_label if open_loop is not None else None)
    web_ui.template_args.update({
        "extended_tabs": [{"title": TAB_TITLE, "key": TAB_KEY},
                          {"title": CATEGORY_TAB_TITLE, "key": CATEGORY_TAB_KEY}],
        "extended_tables": [{"key": TAB_KEY, "structure": [{"key": k, "title": t} for k, t in columns]},
                            {"key": CATEGORY_TAB_KEY,
                             "structure": [{"key": k, "title": t} for k, t in category_columns()]}],
        "extended_csv_files": [{"href": f".{RESULT_PATH}", "title": "Download the A/B run as a sglab result JSON"}],
    })
    app = web_ui.app

    @app.before_request
    def _keep_bound_arms():
        if request.method != "POST" or not request.path.endswith(SWARM_PATH):
            return None
        refusal = (_form_bounds_refusal(request.form, closed_loop=session.open_loop_profile() is None)
                   or _form_shape_refusal(request.form) or _open_loop_form_refusal(session, request.form))
        if refusal is not None:
            logger.warning("sglab: %s", refusal)
            return Response(json.dumps({"success": False, "message": refusal}), status=400,
                            mimetype="application/json")
        changes = session.form_changes(request.form)
        if not changes:
            return None
        binding = session.binding
        fixed = ", ".join(f"{arm} {url}" for arm, url in binding.urls.items())
        message = (f"refused: this `sglab ui --stack {binding.stack}` session measures its own arms ({fixed}); "
                   f"the form's {', '.join(changes)} would measure something else. To measure other servers, "
                   f"restart with sglab ui --stack STACK --baseline-url U --candidate-url U; the request shape "
                   f"(endpoint, max_new_tokens, timeout, model) is the stack's sglab:load (docs/web-ui.md)")
        logger.warning("sglab: %s", message)
        return Response(json.dumps({"success": False, "message": message}), status=403,
                        mimetype="application/json")

    @app.after_request
    def _add_plot_script(response: Response) -> Response:
        """The gain plot's script goes into Locust's own page (its React UI renders tables only)."""
        if request.endpoint != "locust.index" or response.status_code != 200 or response.mimetype != "text/html":
            return response
        html = response.get_data(as_text=True)
        if "</body>" in html:
            response.set_data(html.replace("</body>", plot_script(TAB_TITLE) + "</body>", 1))
        return response

    @app.route(PLOT_PATH)
    @web_ui.auth_required_if_enabled
    def _plot_data() -> Response:
        return Response(json.dumps(session.plot_data()), mimetype="application/json")

    @app.after_request
    def _add_ab_stats(response: Response) -> Response:
        if not request.path.endswith(STATS_PATH) or response.status_code != 200 or not response.is_json:
            return response
        payload = response.get_json(silent=True)
        if not isinstance(payload, dict):
            return response
        rows, by_category = session.tables()
        extended = [e for e in payload.get("extended_stats", []) if e.get("key") not in (TAB_KEY, CATEGORY_TAB_KEY)]
        extended += [{"key": TAB_KEY, "data": rows}, {"key": CATEGORY_TAB_KEY, "data": by_category}]
        response.set_data(json.dumps({**payload, "extended_stats": extended}))
        return response

    @app.route(RESULT_PATH)
    @web_ui.auth_required_if_enabled
    def _download_result() -> Response:
        result = session.result()
        if result is None:
            return Response(json.dumps({"error": "no test has run yet; start a swarm first"}), status=404,
                            mimetype="application/json")
        from sglab.results.integrity import sealed_document

        body = json.dumps(sealed_document(result), indent=1)  # carries its integrity record, like a saved result
        return Response(body, mimetype="application/json", headers={
            "Content-Disposition": f"attachment; filename=sglab-{result.stack}-{result.run_id}.json"})

    gevent.spawn(_poll_servers, session)


def _form_bounds_refusal(form, *, closed_loop: bool = True) -> str | None:
    """The form's numbers, bounded as `--users`/`--spawn-rate` are (both arms share the users): a typo such as
    100000 users would start that many greenlets and connections before anything else could say no."""
    most = 2 * MAX_CONCURRENCY
    scale = os.environ.get(SIM_TIME_SCALE_ENV)
    # closed loop against the launcher's simulators: every user is a stream of this process, bounded x their
    # scale (an open-loop run's users are its in-flight cap: its load is the arrival schedule)
    if scale and closed_loop:
        streams_most = int(MAX_STREAMS_X_TIME_SCALE // float(scale))
        given = form.get("user_count")
        try:
            too_many = given not in (None, "") and float(given) > streams_most
        except ValueError:
            too_many = False  # not a number: refused below
        if too_many:
            return (f"refused: user_count {printable(given, limit=40)!r} streams from one load generator against "
                    f"simulators at time scale {float(scale):g}: beyond {MAX_STREAMS_X_TIME_SCALE:g} streams x scale "
                    f"the client, not the servers, sets the speed; use at most {streams_most} users "
                    "(docs/simulator.md)")
    for key, whole in (("user_count", True), ("spawn_rate", False)):
        given = form.get(key)
        if given in (None, ""):
            continue
        try:
            value = float(given)
        except ValueError:
            value = float("nan")
        if not 0 < value <= most or (whole and not value.is_integer()):
            return (f"refused: {key} {printable(given, limit=40)!r} must be a {'whole ' if whole else ''}number "
                    f"above 0 and at most {most} "
                    f"(load.concurrency's limit of {MAX_CONCURRENCY} per arm; docs/load.md, Limits)")
    return None


def _form_shape_refusal(form) -> str | None:
    """The form's request-shape values typed before Locust copies them onto the users' options (an option that
    defaults to None would take the raw string, and every user would fail on it while /swarm said it started)."""
    problem = form_shape_problem(form)
    return None if problem is None else (f"refused: {printable(problem, limit=300)} (the request shape: "
                                         "docs/load.md; the stack's sglab:load sets it)")


def _open_loop_form_refusal(session: UiSession, form) -> str | None:
    """An open-loop run's users are its in-flight cap and its load is the arrival schedule: a /swarm whose users,
    spawn rate or run time differ from what the shape runs would be ignored by it, so it is refused instead."""
    profile = session.open_loop_profile()
    if profile is None:
        return None
    cap = session.open_loop_users()
    derived = {"user_count": float(cap), "spawn_rate": float(min(cap, 100))}
    changed = []
    for key, value in derived.items():
        given = form.get(key)
        try:
            if given not in (None, "") and float(given) != value:
                changed.append(f"{key}={given}")
        except ValueError:
            changed.append(f"{key}={given}")
    if form.get("run_time"):
        changed.append(f"run_time={form.get('run_time')}")
    if not changed:
        return None
    return (f"refused: this is an open-loop {profile.name} run (levels {profile.levels()}, {profile.level_label}): "
            f"requests arrive on the profile's schedule and its users are the in-flight cap "
            f"load.{profile.name}.max-in-flight ({cap} users, spawn rate {derived['spawn_rate']:g}), so "
            f"{', '.join(changed)} cannot set the load. Leave the form's values as prefilled (or send none); change "
            f"the load in the stack's sglab:load (docs/web-ui.md)")


def _on_sample(environment, sample: RequestSample) -> None:
    session = _session(environment)
    if session is not None:
        session.add(sample, level=session.users_of(environment.runner, sample.arm))


def _on_test_start(environment, **_kwargs) -> None:
    session = _session(environment)
    if session is not None:
        gevent.spawn(session.check_live_flags, session.start_run())


def _on_test_stop(environment, **_kwargs) -> None:
    session = _session(environment)
    if session is not None:
        session.stop_run()


def _on_reset_stats(**_kwargs) -> None:
    """Locust's RESET button: the A/B tab starts over with a new run (the old one is dropped, not saved)."""
    for session in _sessions:
        if session.run is not None and session.run.running:
            gevent.spawn(session.check_live_flags, session.start_run())


def _poll_servers(session: UiSession) -> None:
    while True:
        try:
            session.poll_server_accept_length()
        except Exception as exc:  # a flaky server must not kill the UI
            logger.debug("server info poll failed: %s", exc)
        gevent.sleep(SERVER_POLL_S)
