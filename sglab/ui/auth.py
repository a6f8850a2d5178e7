"""Who may drive the UI: the login, and the guard in front of every route. One module because the two decide
together (with login on, the session authenticates a request; with it off the guard admits only this machine).

**Login** through Locust's own `--web-login` (Flask-Login): one user, password from the environment.
`SGLAB_UI_USERNAME` (default "sglab") and `SGLAB_UI_PASSWORD` are read by the process that serves
the UI, so the same locustfile works for `sglab ui --web-login` and for the cluster's Locust master
(whose chart passes the password from a Pulumi secret). Login enabled without a password is refused
before the UI serves anything. Failed logins are limited per client address: after
`LOGIN_MAX_FAILURES` failures within `LOGIN_WINDOW_S` the client gets 429 (right password included)
until the oldest failure leaves the window.

**The guard** (`install_guard`): its own pages and REST clients that say so, never a page of another site.
A WSGI wrapper around Locust's Flask app, so it sees every request before any Locust or sglab route:

- **Host**: must be a plain `host[:port]` (no user info such as `evil.example@127.0.0.1`, no path); with login
  off (which `sglab ui` allows only on loopback) it must name this machine (loopback names, the bind address,
  `SGLAB_UI_ALLOWED_HOSTS`). A DNS-rebinding page on another name is refused.
- **Origin**: any request whose Origin is not the UI's own, scheme included (`https://127.0.0.1:8089` is
  another origin than `http://127.0.0.1:8089`), or is "null", is refused, reads included. The UI's scheme is
  the server's, or `X-Forwarded-Proto` from a TLS proxy in front of it (no cross-site page can set it).
- **Closed routes**: Locust's `POST /user` sets any attribute on a user class (the class picker's editor,
  which sglab never enables): an arm's `host` could be swapped behind the bound URLs. It is refused.
- **State-changing requests** (every method but GET/HEAD/OPTIONS, and the GET routes in
  `STATE_CHANGING_GET_PATHS`) must come from the UI's own page (Origin, Referer or `Sec-Fetch-Site: same-origin`).
  A request with none of the three is not from a modern browser; with login off it must carry
  `X-Sglab-Client: <name>`, a header no cross-site form can set; with login on the session authenticates it.
- **CORS**: Locust allows every origin; the wrapper drops the Access-Control-* response headers, so no
  other origin can read the UI's data either.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import os
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import Blueprint, Response, redirect, request, session, url_for
from flask_login import UserMixin, login_user

from sglab.core.untrusted import printable

USERNAME_ENV = "SGLAB_UI_USERNAME"
PASSWORD_ENV = "SGLAB_UI_PASSWORD"
DEFAULT_USERNAME = "sglab"
LOGIN_SUBMIT_PATH = "/sglab/login_submit"
LOGIN_MAX_FAILURES = 5
LOGIN_WINDOW_S = 60.0
MAX_TRACKED_CLIENTS = 10_000  # bounds the limiter's memory under a spray from many addresses


class LoginConfigError(Exception):
    """Login is on but cannot work (no password); the message says what to set."""


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str

    def check(self, username: str | None, password: str | None) -> bool:
        user_ok = hmac.compare_digest((username or "").encode(), self.username.encode())
        password_ok = hmac.compare_digest((password or "").encode(), self.password.encode())
        return user_ok and password_ok


def credentials_from_env(environ: Mapping[str, str] | None = None) -> Credentials:
    environ = os.environ if environ is None else environ
    password = environ.get(PASSWORD_ENV, "")
    if not password:
        raise LoginConfigError(
            f"web login is enabled but {PASSWORD_ENV} is empty or unset; "
            f"fix: export {PASSWORD_ENV}=<password> (and optionally {USERNAME_ENV}, default "
            f"'{DEFAULT_USERNAME}'), or turn login off (sglab ui --no-web-login / drop locust's --web-login)"
        )
    return Credentials(environ.get(USERNAME_ENV) or DEFAULT_USERNAME, password)


class LoginLimiter:
    """Failed logins per client in a sliding window; thread- and greenlet-safe, bounded in memory."""

    def __init__(self, max_failures: int = LOGIN_MAX_FAILURES, window_s: float = LOGIN_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        times = self._failures.get(client, deque())
        while times and now - times[0] >= self.window_s:
            times.popleft()
        return times

    def retry_after_s(self, client: str) -> int | None:
        """Seconds until `client` may try again, or None if it may try now."""
        now = self._clock()
        with self._lock:
            times = self._recent(client, now)
            if len(times) < self.max_failures:
                return None
            return max(1, math.ceil(self.window_s - (now - times[0])))

    def failed(self, client: str) -> None:
        now = self._clock()
        with self._lock:
            times = self._recent(client, now)
            times.append(now)
            self._failures[client] = times
            if len(self._failures) > MAX_TRACKED_CLIENTS:
                oldest = min(self._failures, key=lambda c: self._failures[c][-1] if self._failures[c] else 0.0)
                del self._failures[oldest]

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)


class _User(UserMixin):
    def __init__(self, username: str) -> None:
        self.id = username


def install_login(web_ui, credentials: Credentials, limiter: LoginLimiter | None = None) -> None:
    """Wire the username/password form of Locust's login page to `credentials`, failures rate-limited."""
    limiter = limiter or LoginLimiter()
    app = web_ui.app
    app.config["SECRET_KEY"] = secrets.token_hex(32)
    app.config["SESSION_COOKIE_HTTPONLY"] = True
    app.config["SESSION_COOKIE_SAMESITE"] = "Lax"

    @web_ui.login_manager.user_loader
    def load_user(user_id: str):
        return _User(user_id) if user_id == credentials.username else None

    web_ui.auth_args = {**web_ui.auth_args, "username_password_callback": f".{LOGIN_SUBMIT_PATH}"}

    blueprint = Blueprint("sglab_login", __name__)

    @blueprint.route(LOGIN_SUBMIT_PATH, methods=["POST"])
    def login_submit():
        client = request.remote_addr or "unknown"  # not X-Forwarded-For: a client could forge it
        wait_s = limiter.retry_after_s(client)
        if wait_s is not None:
            return Response(f"too many failed logins from {client}: {limiter.max_failures} within "
                            f"{limiter.window_s:g} s; try again in {wait_s} s\n", status=429,
                            mimetype="text/plain", headers={"Retry-After": str(wait_s)})
        if credentials.check(request.form.get("username"), request.form.get("password")):
            limiter.succeeded(client)
            login_user(_User(credentials.username))
            return redirect(url_for("locust.index"))
        limiter.failed(client)
        session["auth_error"] = "Invalid username or password"
        return redirect(url_for("locust.login"))

    app.register_blueprint(blueprint)


# ---- the guard: who may send a request at all ---------------------------------------------------------------

CLIENT_HEADER = "X-Sglab-Client"
ALLOWED_HOSTS_ENV = "SGLAB_UI_ALLOWED_HOSTS"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# GET routes that change state in some Locust versions (older ones stopped and reset with GET)
STATE_CHANGING_GET_PATHS = ("/stop", "/stats/reset", "/reset")
# Locust routes sglab does not offer (any method): /user edits user classes for `--class-picker`
CLOSED_PATHS = ("/user",)
DOCS = "docs/web-ui.md, Protections"
_HOST = re.compile(r"\A(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?)(:[0-9]{1,5})?\Z")
_ORIGIN = re.compile(r"\A(https?)://([^/?#@\s]+)\Z", re.IGNORECASE)
_WILDCARD_HOSTS = frozenset({"", "*", "0.0.0.0", "::"})
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def _bare(host: str) -> str:
    return host.strip().strip("[]").lower()


def is_loopback_host(host: str) -> bool:
    """True for names and addresses that only this machine can reach (no name resolution)."""
    bare = _bare(host)
    if bare in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def _netloc(value: str, default_scheme: str = "http") -> str | None:
    """host[:port] of a Host header, lower-case, default port dropped; None unless it is exactly a host and an
    optional port (user info, a path or a space make it None)."""
    value = value.strip()
    if not _HOST.match(value):
        return None
    try:
        parts = urlsplit(f"//{value}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    host = f"[{host}]" if ":" in host else host
    if port is None or (default_scheme, port) in (("http", 80), ("https", 443)):
        return host
    return f"{host}:{port}"


def _origin(value: str) -> str | None:
    """`scheme://host[:port]` of an Origin (or a Referer's origin), normalised; None if it is not one."""
    value = value.strip()
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or "@" in parts.netloc:
        return None
    netloc = _netloc(parts.netloc, parts.scheme.lower())
    return f"{parts.scheme.lower()}://{netloc}" if netloc else None


def _own_scheme(environ: dict) -> str:
    forwarded = str(environ.get("HTTP_X_FORWARDED_PROTO", "")).split(",")[0].strip().lower()
    return forwarded if forwarded in ("http", "https") else str(environ.get("wsgi.url_scheme") or "http").lower()


@dataclass(frozen=True)
class GuardPolicy:
    """`allowed_hosts` None accepts any Host (login on: a rebinding page has no session to use)."""

    allowed_hosts: frozenset[str] | None
    login: bool

    @classmethod
    def for_ui(cls, bind_host: str, login: bool, environ: Mapping[str, str] | None = None) -> "GuardPolicy":
        environ = os.environ if environ is None else environ
        extra = {_bare(h) for h in environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()}
        if login and not extra:
            return cls(None, login)
        hosts = set(_LOOPBACK_NAMES) | {"127.0.0.1", "::1"} | extra
        if _bare(bind_host) not in _WILDCARD_HOSTS:
            hosts.add(_bare(bind_host))
        return cls(frozenset(hosts), login)

    def host_allowed(self, host_header: str) -> bool:
        if self.allowed_hosts is None:
            return _netloc(host_header) is not None
        netloc = _netloc(host_header)
        if netloc is None:
            return False
        bare = _bare(urlsplit(f"//{netloc}").hostname or "")
        return bare in self.allowed_hosts or is_loopback_host(bare)

    def refusal(self, environ: dict) -> tuple[int, str] | None:
        """(status, message) when the request must not reach the app, else None."""
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path = environ.get("PATH_INFO", "/")
        what = f"{method} {path}"
        host = environ.get("HTTP_HOST") or f"{environ.get('SERVER_NAME', '')}:{environ.get('SERVER_PORT', '')}"
        scheme = _own_scheme(environ)
        if _netloc(host, scheme) is None:
            return 400, (f"refused: {what} names Host '{printable(host, limit=80)}', which is not a plain "
                         f"host[:port] (no user info, path or spaces) ({DOCS})")
        if not self.host_allowed(host):
            allowed = ", ".join(sorted(self.allowed_hosts or ()))
            return 403, (f"refused: {what} names Host '{printable(host, limit=80)}', which is not this machine "
                         f"(allowed: {allowed}); a page on another name that resolves here (DNS rebinding) must "
                         f"not drive the UI. To reach the UI by another name, add it to {ALLOWED_HOSTS_ENV} ({DOCS})")
        if path.rstrip("/").endswith(CLOSED_PATHS):
            return 403, (f"refused: {what}: sglab's UI does not offer Locust's user-class editor (it would set "
                         f"attributes such as an arm's host on the user classes); the arms are the stack's ({DOCS})")
        own = f"{scheme}://{_netloc(host, scheme)}"
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and (origin.strip().lower() == "null" or _origin(origin) != own):
            return 403, (f"refused: cross-site request {what} from Origin {printable(origin, limit=80)}; only this "
                         f"UI's own pages (origin {own}) may use it ({DOCS})")
        if method in SAFE_METHODS and not path.rstrip("/").endswith(STATE_CHANGING_GET_PATHS):
            return None
        referer = environ.get("HTTP_REFERER")
        if referer is not None and _origin(referer) != own:
            return 403, (f"refused: cross-site request {what} from a page of {_origin(referer)} (Referer); only "
                         f"this UI's own pages (origin {own}) may change its state ({DOCS})")
        fetch_site = environ.get("HTTP_SEC_FETCH_SITE")
        if fetch_site is not None and fetch_site.strip().lower() != "same-origin":
            return 403, (f"refused: cross-site request {what} (Sec-Fetch-Site: {printable(fetch_site, limit=40)}); "
                         f"only this UI's own pages may change its state ({DOCS})")
        if origin is not None or referer is not None or fetch_site is not None:
            return None  # a browser on the UI's own page
        if self.login or environ.get("HTTP_" + CLIENT_HEADER.upper().replace("-", "_")):
            return None  # a REST client: the login authenticates it, or it says what it is
        return 403, (f"refused: {what} carries no Origin, Referer or Sec-Fetch-Site, so it could be a "
                     f"cross-site form of an old browser; a REST client must send the header "
                     f"'{CLIENT_HEADER}: <its name>' ({DOCS})")


class OriginGuard:
    """WSGI middleware applying a `GuardPolicy` and dropping CORS grants from every response."""

    def __init__(self, app: Callable, policy: GuardPolicy) -> None:
        self.app = app
        self.policy = policy

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        refused = self.policy.refusal(environ)
        if refused is not None:
            status, message = refused
            body = json.dumps({"success": False, "message": message}).encode()
            reason = "Bad Request" if status == 400 else "Forbidden"
            start_response(f"{status} {reason}", [("Content-Type", "application/json"),
                                                   ("Content-Length", str(len(body)))])
            return [body]

        def no_cors(status: str, headers: list[tuple[str, str]], exc_info=None):
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, exc_info) if exc_info else start_response(status, kept)

        return self.app(environ, no_cors)


def install_guard(web_ui) -> GuardPolicy:
    """Wrap the UI's Flask app; Locust's server calls the app per request, so this applies from now on."""
    policy = GuardPolicy.for_ui(getattr(web_ui, "host", "") or "", bool(web_ui.web_login))
    app = web_ui.app
    if not isinstance(app.wsgi_app, OriginGuard):
        app.wsgi_app = OriginGuard(app.wsgi_app, policy)
    return policy
