"""The UI cannot be driven from another site, over real HTTP against real processes.

A cross-origin form or fetch, a DNS-rebinding Host, a form that swaps an arm URL, an open bind without
login and a password guesser are each refused; what a run records as its target is what it measured.
"""

from __future__ import annotations

import httpx
import pytest

from sglab.results.store import list_runs, load_result

from .harness import (REST_HEADERS, STACK, ab_rows, child_env, free_port, locust_command, plain_locust,
                      run_to_exit, sglab_ui, sglab_ui_command, wait_until)

OTHER_ORIGIN = "http://127.0.0.1:1"  # another port on this machine: same site, another origin
DEAD_URL = "http://127.0.0.1:9"  # nobody listens on the discard port
PASSWORD = "s3cret-for-tests"


def _stats(url: str) -> dict:
    response = httpx.get(url + "/stats/requests", timeout=10)
    response.raise_for_status()
    return response.json()


@pytest.mark.slow
def test_sglab_ui_refuses_cross_site_requests_and_arm_url_changes(tmp_path):
    attack = {"user_count": "2", "spawn_rate": "2", "candidate_url": DEAD_URL}
    with sglab_ui(tmp_path, "--target", "sim") as ui:
        # what a browser sends with a form posted from another origin (or a privacy-stripped one)
        for headers in ({"Origin": OTHER_ORIGIN}, {"Origin": "null"}, {"Referer": OTHER_ORIGIN + "/attack.html"},
                        {"Sec-Fetch-Site": "same-site"}, {"Sec-Fetch-Site": "cross-site"}, {}):
            response = httpx.post(ui.url + "/swarm", data=attack, headers=headers, timeout=10)
            assert response.status_code == 403, (headers, response.status_code, response.text)
            assert "refused" in response.text and "docs/web-ui.md" in response.text, response.text
        assert _stats(ui.url)["state"] == "ready", "no test may start from another site"

        # DNS rebinding: a page on the attacker's name that resolves to this machine
        rebound = httpx.get(ui.url + "/stats/requests", headers={"Host": "attacker.example:8089"}, timeout=10)
        assert rebound.status_code == 403 and "Host" in rebound.text
        # reads from another origin are refused, and CORS never grants them
        assert httpx.get(ui.url + "/sglab/result.json", headers={"Origin": OTHER_ORIGIN}, timeout=10).status_code == 403
        own = httpx.get(ui.url + "/stats/requests", headers={"Origin": ui.url}, timeout=10)
        assert own.status_code == 200 and "access-control-allow-origin" not in own.headers

        # the stack-bound arm URLs are not the form's to change, even from the UI's own page
        swapped = httpx.post(ui.url + "/swarm", data=attack, headers={"Origin": ui.url}, timeout=10)
        assert swapped.status_code == 403 and "candidate_url" in swapped.text, swapped.text
        assert _stats(ui.url)["state"] == "ready"

        # the UI's own form (its URLs unchanged) and a REST client that says so both work
        same = {"user_count": "2", "spawn_rate": "2", **{f"{arm}_url": url for arm, url in ui.arm_urls.items()}}
        assert httpx.post(ui.url + "/swarm", data=same, headers={"Origin": ui.url}, timeout=10).json()["success"]
        assert httpx.post(ui.url + "/swarm", data={"user_count": 2, "spawn_rate": 2}, headers=REST_HEADERS,
                          timeout=10).json()["success"]
        wait_until(lambda: ab_rows(_stats(ui.url)).get("candidate"), 60, "candidate samples", 1.0)

        # a cross-site STOP or RESET is refused: the test goes on
        for path in ("/stop", "/stats/reset"):
            assert httpx.post(ui.url + path, headers={"Origin": OTHER_ORIGIN}, timeout=10).status_code == 403
        assert _stats(ui.url)["state"] == "running"
        assert httpx.post(ui.url + "/stop", headers={"Origin": ui.url, "Sec-Fetch-Site": "same-origin"},
                          timeout=10).json()["success"]
        runs = wait_until(lambda: list_runs(STACK, ui.results_dir), 10, "the saved interactive run")

    from sglab.report.provenance import refusal

    saved = load_result(runs[-1])
    assert saved.target.kind == "sim" and saved.target.urls == ui.arm_urls
    assert saved.target.urls_source == "sglab"
    assert refusal(saved) is None


@pytest.mark.slow
def test_form_changed_arm_url_is_recorded_and_refused_for_promotion(tmp_path):
    """Plain Locust (no `sglab ui`) lets the form change a URL: the run records the URL it measured and that
    it came from the form, never `sim`, and promotion refuses it."""
    from sglab.config import load_stack
    from sglab.config.arms import candidate_arm
    from sglab.load.targets import start_sims
    from sglab.report.provenance import refusal

    config = load_stack(STACK).config
    with start_sims([candidate_arm(config)], log_dir=tmp_path) as sims:
        real = sims.urls["candidate"]
        with plain_locust(tmp_path, "--baseline-url", real, "--candidate-url", DEAD_URL, "--stack", STACK,
                          env={"SGLAB_UI_TARGET": "sim"}) as ui:
            form = {"user_count": "2", "spawn_rate": "2", "candidate_url": real}
            assert httpx.post(ui.url + "/swarm", data=form, headers={"Origin": ui.url}, timeout=10).json()["success"]
            wait_until(lambda: ab_rows(_stats(ui.url)).get("candidate"), 60, "candidate samples", 1.0)
            assert httpx.post(ui.url + "/stop", headers=REST_HEADERS, timeout=10).json()["success"]
            download = tmp_path / "run.json"
            download.write_text(httpx.get(ui.url + "/sglab/result.json", timeout=10).text)
    result = load_result(download)
    assert result.target.urls == {"baseline": real, "candidate": real}
    assert result.target.kind == "urls", "URLs from the form are never the simulators sglab started"
    assert result.target.urls_source == "form"
    found = refusal(result)
    assert found is not None and "form" in found.problem and found.fix


@pytest.mark.slow
def test_login_attempts_are_rate_limited_per_client(tmp_path):
    from sglab.ui.auth import LOGIN_MAX_FAILURES

    env = {"SGLAB_UI_USERNAME": "admin", "SGLAB_UI_PASSWORD": PASSWORD}
    right = {"username": "admin", "password": PASSWORD}
    with plain_locust(tmp_path, "--web-login", "--baseline-url", DEAD_URL, "--candidate-url", DEAD_URL,
                      env=env) as ui:
        with httpx.Client(base_url=ui.url, headers=REST_HEADERS, timeout=10) as guesser:
            for attempt in range(LOGIN_MAX_FAILURES):
                response = guesser.post("/sglab/login_submit", data={"username": "admin", "password": f"no{attempt}"})
                assert response.status_code == 302 and "/login" in response.headers["location"], attempt
            limited = guesser.post("/sglab/login_submit", data={"username": "admin", "password": "again"})
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) > 0
            assert "too many failed logins" in limited.text
            # locked out for the window, even with the right password
            assert guesser.post("/sglab/login_submit", data=right).status_code == 429
        # another client is not locked out by the guesser
        other_address = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=ui.url, headers=REST_HEADERS, timeout=10, transport=other_address) as user:
            response = user.post("/sglab/login_submit", data=right)
            assert response.status_code == 302 and "/login" not in response.headers["location"]
            assert user.get("/stats/requests").status_code == 200


@pytest.mark.slow
def test_open_bind_without_login_is_refused(tmp_path):
    out = run_to_exit(sglab_ui_command(free_port(), "--web-host", "0.0.0.0"), child_env(tmp_path), timeout_s=60)
    assert out.returncode == 2, out
    assert "--web-login" in out.stderr and "loopback" in out.stderr and "Traceback" not in out.stderr
    assert "starting simulators" not in out.stdout
    # plain Locust with the A/B tab binds every interface by default: refused the same way
    out = run_to_exit(locust_command("--web-port", str(free_port())), child_env(tmp_path), timeout_s=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--web-login" in out.stderr and "loopback" in out.stderr


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("*", False), ("", False), ("::", False), ("10.0.0.5", False), ("example.org", False),
])
def test_loopback_hosts(host, loopback):
    from sglab.ui.auth import is_loopback_host

    assert is_loopback_host(host) is loopback


def test_login_limiter_window_slides_and_success_clears():
    from sglab.ui.auth import LoginLimiter

    now = [0.0]
    limiter = LoginLimiter(max_failures=3, window_s=60.0, clock=lambda: now[0])
    for t in (0.0, 10.0, 20.0):
        now[0] = t
        assert limiter.retry_after_s("a") is None
        limiter.failed("a")
    assert limiter.retry_after_s("a") == 40  # the first failure leaves the window at t=60
    assert limiter.retry_after_s("b") is None
    now[0] = 60.0
    assert limiter.retry_after_s("a") is None  # one failure aged out: one more try
    limiter.failed("a")
    assert limiter.retry_after_s("a") == 10
    limiter.succeeded("a")
    assert limiter.retry_after_s("a") is None


@pytest.mark.slow
def test_login_without_the_ui_plugin_is_refused(tmp_path):
    """The login lives in the UI plugin: plain `-f loadtests/locustfile.py --web-login` must not serve unprotected."""
    env = child_env(tmp_path, {"SGLAB_UI_PASSWORD": PASSWORD})
    out = run_to_exit(locust_command("--web-login", "--web-host", "127.0.0.1", "--web-port", str(free_port()),
                                     ui=False), env, timeout_s=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "sglab/ui/locust_plugin.py" in out.stderr


@pytest.mark.slow
def test_a_bound_session_keeps_its_request_shape_and_load_bound_and_every_form_types_its_values(tmp_path):
    """`sglab ui` fixed the stack's request shape: a form that would send another endpoint, model or token count
    is refused like a swapped URL. In any session, a value that is not the option's type is refused before the
    users see it (they would fail on every request while /swarm said it started)."""
    with sglab_ui(tmp_path, "--target", "sim") as ui:
        own = {"user_count": "2", "spawn_rate": "2", **{f"{arm}_url": url for arm, url in ui.arm_urls.items()}}
        for key, value in (("endpoint", "generate"), ("model", "another-model"), ("max_new_tokens", "7"),
                           ("request_timeout_s", "1")):
            response = httpx.post(ui.url + "/swarm", data={**own, key: value}, headers={"Origin": ui.url}, timeout=10)
            assert response.status_code == 403 and f"{key}={value}" in response.text, response.text
            assert "sglab:load" in response.text
        for key, value in (("max_new_tokens", "abc"), ("request_timeout_s", "soon"), ("max_new_tokens", "0"),
                           ("endpoint", "completions")):
            response = httpx.post(ui.url + "/swarm", data={**own, key: value}, headers={"Origin": ui.url}, timeout=10)
            assert response.status_code == 400 and "refused" in response.text and key in response.text, response.text
        # its simulators run at the stack's time scale 1: more than 48 streams from this one process is the
        # client's speed, not the servers' (sglab/sglang/sim_knobs.py MAX_STREAMS_X_TIME_SCALE)
        response = httpx.post(ui.url + "/swarm", data={**own, "user_count": "60", "spawn_rate": "10"},
                              headers={"Origin": ui.url}, timeout=10)
        assert response.status_code == 400 and "at most 48 users" in response.text, response.text
        assert _stats(ui.url)["state"] == "ready"
    with plain_locust(tmp_path, "--baseline-url", DEAD_URL, "--candidate-url", DEAD_URL, "--stack", STACK) as ui:
        form = {"user_count": "1", "spawn_rate": "1", "max_new_tokens": "12abc"}
        response = httpx.post(ui.url + "/swarm", data=form, headers={"Origin": ui.url}, timeout=10)
        assert response.status_code == 400 and "max_new_tokens" in response.text
        assert _stats(ui.url)["state"] == "ready"
