"""Web UI login through Locust's own `--web-login` (Flask-Login): one user, password from the environment.

`SGLAB_UI_USERNAME` (default "sglab") and `SGLAB_UI_PASSWORD` are read by the process that serves
the UI, so the same locustfile works for `sglab ui --web-login` and for the cluster's Locust master
(whose chart passes the password from a Pulumi secret). Login enabled without a password is refused
before the UI serves anything. Failed logins are limited per client address: after
`LOGIN_MAX_FAILURES` failures within `LOGIN_WINDOW_S` the client gets 429 (right password included)
until the oldest failure leaves the window.
"""

from __future__ import annotations

import hmac
import math
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from flask import Blueprint, Response, redirect, request, session, url_for
from flask_login import UserMixin, login_user

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
