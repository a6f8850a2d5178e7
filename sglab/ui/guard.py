"""Who may drive the UI: its own pages and REST clients that say so, never a page of another site.

A WSGI wrapper around Locust's Flask app, so it sees every request before any Locust or sglab route:

- **Host** (login off, which `sglab ui` allows only on loopback): the Host header must name this machine
  (loopback names, the bind address, `SGLAB_UI_ALLOWED_HOSTS`). A DNS-rebinding page on another name is refused.
- **Origin**: any request whose Origin is not the UI's own (or is "null") is refused, reads included.
- **State-changing requests** (every method but GET/HEAD/OPTIONS, and the GET routes in
  `STATE_CHANGING_GET_PATHS`) must come from the UI's own page (Origin, Referer or `Sec-Fetch-Site: same-origin`).
  A request with none of the three is not from a modern browser; with login off it must carry
  `X-Sglab-Client: <name>`, a header no cross-site form can set; with login on the session authenticates it.
- **CORS**: Locust allows every origin; the wrapper drops the Access-Control-* response headers, so no
  other origin can read the UI's data either.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

CLIENT_HEADER = "X-Sglab-Client"
ALLOWED_HOSTS_ENV = "SGLAB_UI_ALLOWED_HOSTS"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# GET routes that change state in some Locust versions (older ones stopped and reset with GET)
STATE_CHANGING_GET_PATHS = ("/stop", "/stats/reset", "/reset")
DOCS = "docs/web-ui.md, Protections"
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
    """host[:port] of an origin or URL, lower-case, default port dropped; None if it has none."""
    try:
        parts = urlsplit(value if "//" in value else f"//{value}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    scheme = parts.scheme or default_scheme
    host = f"[{host}]" if ":" in host else host
    if port is None or (scheme, port) in (("http", 80), ("https", 443)):
        return host
    return f"{host}:{port}"


@dataclass(frozen=True)
class GuardPolicy:
    """`allowed_hosts` None accepts any Host (login on: a rebinding page has no session to use)."""

    allowed_hosts: frozenset[str] | None
    login: bool

    @classmethod
    def for_ui(cls, bind_host: str, login: bool, environ: dict[str, str] | None = None) -> "GuardPolicy":
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
            return True
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
        if not self.host_allowed(host):
            allowed = ", ".join(sorted(self.allowed_hosts or ()))
            return 403, (f"refused: {what} names Host '{host}', which is not this machine (allowed: {allowed}); "
                         f"a page on another name that resolves here (DNS rebinding) must not drive the UI. "
                         f"To reach the UI by another name, add it to {ALLOWED_HOSTS_ENV} ({DOCS})")
        own = _netloc(host)
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and (origin.strip().lower() == "null" or _netloc(origin) != own):
            return 403, (f"refused: cross-site request {what} from Origin {origin}; only this UI's own pages "
                         f"(origin {own}) may use it ({DOCS})")
        if method in SAFE_METHODS and not path.rstrip("/").endswith(STATE_CHANGING_GET_PATHS):
            return None
        referer = environ.get("HTTP_REFERER")
        if referer is not None and _netloc(referer) != own:
            return 403, (f"refused: cross-site request {what} from a page of {_netloc(referer)} (Referer); only "
                         f"this UI's own pages (origin {own}) may change its state ({DOCS})")
        fetch_site = environ.get("HTTP_SEC_FETCH_SITE")
        if fetch_site is not None and fetch_site.strip().lower() != "same-origin":
            return 403, (f"refused: cross-site request {what} (Sec-Fetch-Site: {fetch_site}); only this UI's "
                         f"own pages may change its state ({DOCS})")
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
            start_response(f"{status} Forbidden", [("Content-Type", "application/json"),
                                                   ("Content-Length", str(len(body)))])
            return [body]

        def no_cors(status: str, headers: list[tuple[str, str]], exc_info=None):
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, exc_info) if exc_info else start_response(status, kept)

        return self.app(environ, no_cors)


def install(web_ui) -> GuardPolicy:
    """Wrap the UI's Flask app; Locust's server calls the app per request, so this applies from now on."""
    policy = GuardPolicy.for_ui(getattr(web_ui, "host", "") or "", bool(web_ui.web_login))
    app = web_ui.app
    if not isinstance(app.wsgi_app, OriginGuard):
        app.wsgi_app = OriginGuard(app.wsgi_app, policy)
    return policy
