"""Web login (Locust's --web-login, Flask-Login): required when on; refused without a password."""

from __future__ import annotations

import httpx
import pytest

from sglab.ui.auth import LoginConfigError, credentials_from_env

from .harness import child_env, free_port, locust_command, plain_locust, run_to_exit, sglab_ui_command

PASSWORD = "s3cret-for-tests"
PROTECTED = ("/", "/stats/requests", "/sglab/result.json", "/stats/report")


def test_credentials_need_a_password():
    with pytest.raises(LoginConfigError, match="SGLAB_UI_PASSWORD"):
        credentials_from_env({})
    with pytest.raises(LoginConfigError):
        credentials_from_env({"SGLAB_UI_USERNAME": "admin", "SGLAB_UI_PASSWORD": ""})
    creds = credentials_from_env({"SGLAB_UI_PASSWORD": "x"})
    assert creds.username == "sglab" and creds.check("sglab", "x")
    assert not creds.check("sglab", "y") and not creds.check("other", "x") and not creds.check(None, None)


def test_sglab_ui_refuses_login_without_password(tmp_path):
    """Checked before anything starts: one clear message, exit 2, no traceback, no simulator left behind."""
    out = run_to_exit(sglab_ui_command(free_port(), "--web-login"), child_env(tmp_path))
    assert out.returncode == 2, out
    assert "SGLAB_UI_PASSWORD" in out.stderr and "Traceback" not in out.stderr + out.stdout
    assert "starting simulators" not in out.stdout


@pytest.mark.slow
def test_plain_locust_refuses_login_without_password(tmp_path):
    """The cluster master runs plain locust --web-login: without the password it must not serve."""
    out = run_to_exit(locust_command("--web-login", "--web-host", "127.0.0.1", "--web-port", str(free_port())),
                      child_env(tmp_path))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "SGLAB_UI_PASSWORD" in out.stderr


@pytest.mark.slow
def test_login_required_when_enabled(tmp_path):
    env = {"SGLAB_UI_USERNAME": "admin", "SGLAB_UI_PASSWORD": PASSWORD}
    with plain_locust(tmp_path, "--web-login", "--baseline-url", "http://127.0.0.1:9", "--candidate-url",
                      "http://127.0.0.1:9", env=env) as ui:
        with httpx.Client(base_url=ui.url, timeout=10) as anonymous:
            for path in PROTECTED:
                response = anonymous.get(path)
                assert response.status_code in (302, 401), (path, response.status_code)
                if response.status_code == 302:
                    assert "/login" in response.headers["location"]
            assert anonymous.post("/swarm", data={"user_count": 1, "spawn_rate": 1}).status_code in (302, 401)
            login_page = anonymous.get("/login")
            assert login_page.status_code == 200 and "sglab/login_submit" in login_page.text

        with httpx.Client(base_url=ui.url, timeout=10) as wrong:
            response = wrong.post("/sglab/login_submit", data={"username": "admin", "password": "nope"})
            assert response.status_code == 302 and "/login" in response.headers["location"]
            assert wrong.get("/stats/requests").status_code in (302, 401)

        with httpx.Client(base_url=ui.url, timeout=10) as user:
            response = user.post("/sglab/login_submit", data={"username": "admin", "password": PASSWORD})
            assert response.status_code == 302 and "/login" not in response.headers["location"]
            assert user.get("/").status_code == 200
            stats = user.get("/stats/requests")
            assert stats.status_code == 200
            assert any(e["key"] == "sglab-ab" for e in stats.json()["extended_stats"])
            assert user.get("/sglab/result.json").status_code == 404  # logged in; no test has run yet


@pytest.mark.slow
def test_login_off_serves_without_credentials(tmp_path):
    with plain_locust(tmp_path, "--baseline-url", "http://127.0.0.1:9", "--candidate-url", "http://127.0.0.1:9") as ui:
        assert httpx.get(ui.url + "/", timeout=10).status_code == 200
        page = httpx.get(ui.url + "/", timeout=10).text
        assert '"baseline_url"' in page and '"candidate_url"' in page, "arm URLs must be custom args in the form"
