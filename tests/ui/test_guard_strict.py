"""A Host with user info, an Origin of another scheme and Locust's `POST /user` (which sets
any attribute on the arms' user classes) are refused, and the form's user count is bounded (item 2), over real
HTTP against plain Locust with the A/B tab; the policy's cases beside it, without a process."""

from __future__ import annotations

import httpx
import pytest

from sglab.ui.auth import CLIENT_HEADER, GuardPolicy

from .harness import REST_HEADERS, plain_locust

DEAD_URL = "http://127.0.0.1:9"


def _environ(method: str = "GET", path: str = "/", host: str = "127.0.0.1:8089", scheme: str = "http",
             **headers: str) -> dict:
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "HTTP_HOST": host, "wsgi.url_scheme": scheme}
    environ.update({"HTTP_" + k.upper(): v for k, v in headers.items()})
    return environ


LOCAL = GuardPolicy.for_ui("127.0.0.1", login=False, environ={})
LOGIN = GuardPolicy.for_ui("0.0.0.0", login=True, environ={})


@pytest.mark.parametrize("host", ["evil.example@127.0.0.1:8089", "u:p@127.0.0.1:8089", "127.0.0.1:8089/x",
                                  "127.0.0.1 :8089", "127.0.0.1:8089#", "", "127.0.0.1:99999", "[::1]@x"])
@pytest.mark.parametrize("policy", [LOCAL, LOGIN], ids=["login-off", "login-on"])
def test_a_host_that_is_not_a_plain_host_and_port_is_refused(policy, host):
    refused = policy.refusal(_environ(host=host))
    assert refused is not None and refused[0] in (400, 403) and "Host" in refused[1], (host, refused)


@pytest.mark.parametrize("origin", ["https://127.0.0.1:8089", "http://127.0.0.1:8090", "ftp://127.0.0.1:8089",
                                    "http://evil@127.0.0.1:8089", "null", "127.0.0.1:8089", "http://127.0.0.1:8089x"])
def test_an_origin_of_another_scheme_port_or_shape_is_refused(origin):
    refused = LOCAL.refusal(_environ("POST", "/swarm", Origin=origin))
    assert refused is not None and refused[0] == 403 and "Origin" in refused[1], (origin, refused)
    referer = LOCAL.refusal(_environ("POST", "/swarm", Referer=origin + "/page"))
    assert referer is not None and referer[0] == 403, (origin, referer)


def test_the_uis_own_origin_passes_and_a_tls_proxy_names_its_scheme():
    assert LOCAL.refusal(_environ("POST", "/swarm", Origin="http://127.0.0.1:8089")) is None
    assert LOCAL.refusal(_environ("POST", "/swarm", host="localhost:80", Origin="http://localhost")) is None
    assert LOCAL.refusal(_environ("POST", "/swarm", Referer="http://127.0.0.1:8089/?tab=sglab")) is None
    # behind a TLS ingress the browser's origin is https; the proxy says so, no page can
    behind = _environ("POST", "/swarm", host="ui.example.com", Origin="https://ui.example.com",
                      X_Forwarded_Proto="https")
    assert LOGIN.refusal(behind) is None
    assert LOGIN.refusal({**behind, "HTTP_X_FORWARDED_PROTO": "http"}) is not None


@pytest.mark.parametrize("path", ["/user", "/user/"])
def test_locusts_user_class_editor_is_closed_to_every_client(path):
    for environ in (_environ("POST", path, **{CLIENT_HEADER.replace("-", "_"): "curl"}),
                    _environ("POST", path, Origin="http://127.0.0.1:8089")):
        refused = LOCAL.refusal(environ)
        assert refused is not None and refused[0] == 403 and "user-class" in refused[1], refused
    assert LOGIN.refusal(_environ("POST", path, Origin="http://127.0.0.1:8089")) is not None


@pytest.mark.slow
def test_over_http_user_edits_foreign_schemes_and_user_info_hosts_are_refused(tmp_path):
    with plain_locust(tmp_path, "--baseline-url", DEAD_URL, "--candidate-url", DEAD_URL) as ui:
        port = ui.url.rsplit(":", 1)[1]
        # what the class picker's editor posts: it would point the candidate's users at another server
        edit = {"user_class_name": "CandidateUser", "host": "http://evil.example", "fixed_count": 1}
        for headers in (REST_HEADERS, {"Origin": ui.url}):
            response = httpx.post(ui.url + "/user", json=edit, headers=headers, timeout=10)
            assert response.status_code == 403 and "user-class" in response.text, response.text
        rebound = httpx.get(ui.url + "/stats/requests", headers={"Host": f"evil.example@127.0.0.1:{port}"},
                            timeout=10)
        assert rebound.status_code in (400, 403) and "Host" in rebound.text, rebound.text
        other_scheme = httpx.post(ui.url + "/swarm", data={"user_count": "1", "spawn_rate": "1"},
                                  headers={"Origin": f"https://127.0.0.1:{port}"}, timeout=10)
        assert other_scheme.status_code == 403 and "Origin" in other_scheme.text, other_scheme.text
        # the form's numbers are bounded like --users: 100000 users would start before anything said no
        for form in ({"user_count": "100000", "spawn_rate": "1"}, {"user_count": "2", "spawn_rate": "inf"}):
            huge = httpx.post(ui.url + "/swarm", data=form, headers=REST_HEADERS, timeout=10)
            assert huge.status_code == 400 and "at most 8192" in huge.text, huge.text
        assert httpx.get(ui.url + "/stats/requests", timeout=10).json()["state"] == "ready"
        assert httpx.get(ui.url + "/stats/requests", headers={"Origin": ui.url}, timeout=10).status_code == 200
