"""Web UI login through Locust's own `--web-login` (Flask-Login): one user, password from the environment.

`SGLAB_UI_USERNAME` (default "sglab") and `SGLAB_UI_PASSWORD` are read by the process that serves
the UI, so the same locustfile works for `sglab ui --web-login` and for the cluster's Locust master
(whose chart passes the password from a Pulumi secret). Login enabled without a password is refused
before the UI serves anything.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass

from flask import Blueprint, redirect, request, session, url_for
from flask_login import UserMixin, login_user

USERNAME_ENV = "SGLAB_UI_USERNAME"
PASSWORD_ENV = "SGLAB_UI_PASSWORD"
DEFAULT_USERNAME = "sglab"
LOGIN_SUBMIT_PATH = "/sglab/login_submit"


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


def credentials_from_env(environ: dict[str, str] | None = None) -> Credentials:
    environ = os.environ if environ is None else environ
    password = environ.get(PASSWORD_ENV, "")
    if not password:
        raise LoginConfigError(
            f"web login is enabled but {PASSWORD_ENV} is empty or unset; "
            f"fix: export {PASSWORD_ENV}=<password> (and optionally {USERNAME_ENV}, default "
            f"'{DEFAULT_USERNAME}'), or turn login off (sglab ui --no-web-login / drop locust's --web-login)"
        )
    return Credentials(environ.get(USERNAME_ENV) or DEFAULT_USERNAME, password)


class _User(UserMixin):
    def __init__(self, username: str) -> None:
        self.id = username


def install_login(web_ui, credentials: Credentials) -> None:
    """Wire the username/password form of Locust's login page to `credentials`."""
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
        if credentials.check(request.form.get("username"), request.form.get("password")):
            login_user(_User(credentials.username))
            return redirect(url_for("locust.index"))
        session["auth_error"] = "Invalid username or password"
        return redirect(url_for("locust.login"))

    app.register_blueprint(blueprint)
