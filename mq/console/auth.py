"""The console's guard: host check, login sessions, read-only mode, CSRF protection and the security
headers of every response (ASGI middleware).

- **Host** (:data:`LOOPBACK_HOSTS`, ``--allowed-host``): :func:`mq.console.app.create_app` puts
  Starlette's ``TrustedHostMiddleware`` in front: a request whose ``Host`` header names anything but
  the console's own names gets 400, so a page that re-points its own DNS name to 127.0.0.1 (DNS
  rebinding) reaches nothing.
- **Token** (``--token``): every page and API call needs it, except ``/login`` and ``/static/``. API
  clients send ``Authorization: Bearer <token>``; browsers log in through the form at ``/login``, which
  starts a session (:class:`Sessions`): a random id in the HttpOnly, ``SameSite=Strict`` cookie
  :data:`SESSION_COOKIE` (the token itself is never stored in the browser), valid for
  :data:`SESSION_TTL_S` and ended at logout. Without it an API call gets 401 (JSON), a page a 303 to
  ``/login?next=…``. After :data:`FREE_FAILURES` wrong tokens in a row from one client address (form or
  bearer header), that address is locked out for a time that doubles with each further failure, up to
  :data:`MAX_LOCKOUT_S`: every attempt meanwhile, right or wrong, gets 429 with ``Retry-After``.
- **Read-only** (``--read-only``): every POST but ``/login`` and ``/logout`` gets 403 before any handler
  runs (and :mod:`mq.console.service` refuses changes too); ``GET /api`` reports ``read_only`` so pages
  hide their controls.
- **CSRF** (double-submit token + Origin check): every change is a POST. The cookie :data:`CSRF_COOKIE`
  (random, HttpOnly, ``SameSite=Strict``) is set on the first response; a POST must carry the same
  value in the ``X-CSRF-Token`` header or in the ``csrf_token`` field of a form
  (``application/x-www-form-urlencoded``). Pages get the value as ``request.state.csrf_token``; API
  clients from ``GET /api`` (``csrf_token``, with the cookie). A POST whose ``Origin`` header names
  another host is refused whatever it carries. A POST authenticated by the bearer header needs no
  CSRF token (a browser never adds that header by itself).
- **Headers** (:data:`SECURITY_HEADERS`): every response forbids framing (``X-Frame-Options: DENY``
  and CSP ``frame-ancestors 'none'``: no clickjacking), loads scripts from the console only, turns
  MIME sniffing off and sends no ``Referer`` to other sites.

Secrets are masked where they are put into output (:func:`mq.store.connection.mask_url` for the store URL);
responses are not rewritten.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from starlette.requests import Request

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The session cookie set by the login form (a random session id).
SESSION_COOKIE = "mq_console_session"
#: The CSRF cookie of the double-submit check.
CSRF_COOKIE = "mq_console_csrf"
#: Header and form field that carry the CSRF token on a POST.
CSRF_HEADER, CSRF_FIELD = "x-csrf-token", "csrf_token"
#: Paths reachable without the token: the login form, and what is under the static prefix.
OPEN_PATH, OPEN_PREFIX = "/login", "/static/"
#: POSTs allowed in read-only mode.
READ_ONLY_ALLOWED = ("/login", "/logout")
#: The largest request body the guard reads, bytes (forms and JSON of the console are small).
MAX_BODY = 1024 * 1024
#: Seconds a login session lasts (then the browser logs in again), unless ``create_app`` says otherwise.
SESSION_TTL_S = 8 * 3600.0
#: Wrong tokens in a row one client address may send before it is locked out.
FREE_FAILURES = 5
#: The longest lockout, seconds (the first is 1 s; each further failure doubles it).
MAX_LOCKOUT_S = 300.0
#: Client addresses whose failures are remembered at most (the oldest are forgotten first).
MAX_TRACKED_CLIENTS = 10_000
#: The Host names of a console listening on loopback (``TrustedHostMiddleware`` compares them without the port).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
#: The Content-Security-Policy of every response: scripts, styles, images and requests from the
#: console only (htmx inserts one <style> element, hence 'unsafe-inline' for styles), and no framing.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: Headers added to every response. ``Referrer-Policy: same-origin`` (not ``no-referrer``): a browser
#: sends ``Origin: null`` on a POST under ``no-referrer``, which the CSRF check would refuse.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)


def host_patterns(names: Sequence[str]) -> list[str]:
    """``names`` as ``TrustedHostMiddleware`` patterns: lower case, without duplicates; each a host name
    or address (IPv6 in brackets), ``*.domain`` for subdomains, or ``*`` (no check).

    Raises:
        ValueError: none given, or a malformed one (a ``*`` elsewhere, a ``/``, a blank).
    """
    if isinstance(names, str):
        names = [names]
    found: list[str] = []
    for raw in names:
        name = raw.strip().lower() if isinstance(raw, str) else ""
        if name != "*" and (not name or "*" in name[1:] or (name.startswith("*") and not name.startswith("*.")) or "/" in name):
            raise ValueError(f"allowed host {raw!r}: give a host name or address, '*.domain' for subdomains, or '*'")
        found.append(name)
    if not found:
        raise ValueError("allowed_hosts must name at least one host (the console's own names)")
    return list(dict.fromkeys(found))


class Sessions:
    """The console's login sessions and failed-login throttle, kept in this process (a restart logs
    every browser out). Thread-safe.

    Args:
        token: the access token, or None for no login.
        ttl_s: seconds a session lasts from its login.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, token: str | None, *, ttl_s: float = SESSION_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be a positive number of seconds, got {ttl_s!r}")
        self.token = token
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._expiry: dict[str, float] = {}  # session id -> when it ends (clock seconds)
        self._failures: dict[str, tuple[int, float]] = {}  # client address -> (failures in a row, locked until)

    def locked_for(self, client: str) -> float:
        """Seconds ``client`` must still wait before trying a token again (0: it may try now)."""
        with self._lock:
            _, until = self._failures.get(client, (0, 0.0))
        return max(0.0, until - self._clock())

    def verify(self, given: str, client: str) -> bool:
        """Whether ``given`` is the token; a wrong one counts against ``client`` (see :data:`FREE_FAILURES`),
        a right one clears its count. Call only when :meth:`locked_for` is 0."""
        right = self.token is not None and secrets.compare_digest(given.encode(), self.token.encode())
        with self._lock:
            if right:
                self._failures.pop(client, None)
                return True
            count = self._failures.pop(client, (0, 0.0))[0] + 1
            lock_s = 0.0 if count < FREE_FAILURES else min(MAX_LOCKOUT_S, 2.0 ** (count - FREE_FAILURES))
            self._failures[client] = (count, self._clock() + lock_s)
            while len(self._failures) > MAX_TRACKED_CLIENTS:
                del self._failures[next(iter(self._failures))]
        return False

    def start(self) -> str:
        """A new session's id (random, 256 bits), valid for :attr:`ttl_s`."""
        now = self._clock()
        session = secrets.token_urlsafe(32)
        with self._lock:
            for old in [s for s, end in self._expiry.items() if end <= now]:
                del self._expiry[old]
            self._expiry[session] = now + self.ttl_s
        return session

    def valid(self, session: str) -> bool:
        """Whether ``session`` was started here, has not expired and was not ended."""
        with self._lock:
            end = self._expiry.get(session)
        return end is not None and self._clock() < end

    def end(self, session: str) -> None:
        """End ``session`` (logout): its cookie opens nothing any more."""
        with self._lock:
            self._expiry.pop(session, None)


def client_address(scope: Scope) -> str:
    """The address a request came from (behind a proxy: the proxy's, so every user shares one lockout)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class Guard:
    """ASGI middleware: authentication, read-only refusal, CSRF check, security headers.

    Args:
        app: the Starlette app.
        sessions: the login sessions (their ``token`` is None for no login).
        read_only: refuse every POST but login/logout.
    """

    def __init__(self, app: ASGIApp, *, sessions: Sessions, read_only: bool) -> None:
        self.app = app
        self.sessions = sessions
        self.token = sessions.token
        self.read_only = read_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        path: str = scope["path"]
        api = path == "/api" or path.startswith("/api/")
        csrf = request.cookies.get(CSRF_COOKIE) or ""
        new_csrf = "" if _valid_csrf(csrf) else secrets.token_urlsafe(24)
        scope.setdefault("state", {})["csrf_token"] = new_csrf or csrf
        send = _with_headers(send, new_csrf)
        bearer = self._bearer(request)
        if bearer == "locked":
            wait = self.sessions.locked_for(client_address(scope))
            await _json(send, 429, too_many_failures(wait), {"retry-after": str(max(1, round(wait)))})
            return
        open_path = path == OPEN_PATH or path.startswith(OPEN_PREFIX)
        authenticated = bearer == "ok" or self._session_ok(request)
        if self.token is not None and not open_path and not authenticated:
            if api:
                await _json(send, 401, "login required: send Authorization: Bearer <token>", {"www-authenticate": "Bearer"})
            else:
                target = "/login?next=" + quote(
                    safe_next(path + ("?" + scope["query_string"].decode() if scope["query_string"] else ""))
                )
                await _redirect(send, target)
            return
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            if self.read_only and path not in READ_ONLY_ALLOWED:
                await _reply(send, api, 403, "the console runs with --read-only: changes are refused")
                return
            origin = request.headers.get("origin")
            if origin and not _same_origin(origin, request):
                await _reply(send, api, 403, f"cross-origin POST from {origin} refused (CSRF protection)")
                return
            body = await _read_body(receive)
            if body is None:
                await _reply(send, api, 413, f"request body larger than {MAX_BODY} bytes")
                return
            if bearer != "ok" and path != "/login" and not self._csrf_ok(request, body, csrf):
                await _reply(
                    send,
                    api,
                    403,
                    "CSRF check failed: send the mq_console_csrf cookie's value in the X-CSRF-Token header "
                    "or the csrf_token form field (GET /api gives it)",
                )
                return
            receive = _replay(body)
        await self.app(scope, receive, send)

    def _bearer(self, request: Request) -> str:
        """``ok`` (the right token), ``locked`` (its client is locked out), or ``none`` (no bearer
        header, or a wrong token: counted as a failure)."""
        if self.token is None:
            return "none"
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return "none"
        client = client_address(request.scope)
        if self.sessions.locked_for(client) > 0:
            return "locked"
        return "ok" if self.sessions.verify(value.strip(), client) else "none"

    def _session_ok(self, request: Request) -> bool:
        cookie = request.cookies.get(SESSION_COOKIE, "")
        return bool(cookie) and self.sessions.valid(cookie)

    @staticmethod
    def _csrf_ok(request: Request, body: bytes, cookie: str) -> bool:
        if not _valid_csrf(cookie):
            return False
        sent = request.headers.get(CSRF_HEADER, "")
        if not sent and request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            sent = (parse_qs(body.decode(errors="replace")).get(CSRF_FIELD) or [""])[0]
        return secrets.compare_digest(sent.encode(), cookie.encode())


def too_many_failures(wait_s: float) -> str:
    """The refusal of a locked-out client."""
    return f"too many wrong tokens from this address: try again in {max(1, round(wait_s))} s"


def _with_headers(send: Send, csrf: str) -> Send:
    """``send`` adding :data:`SECURITY_HEADERS` (where a handler did not set them) and, when ``csrf`` is
    given, the new CSRF cookie to the response's start."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {k.lower() for k, _ in headers}
            headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
            if csrf:
                headers.append((b"set-cookie", f"{CSRF_COOKIE}={csrf}; Path=/; HttpOnly; SameSite=Strict".encode()))
            message["headers"] = headers
        await send(message)

    return wrapped


def _valid_csrf(value: str) -> bool:
    return 20 <= len(value) <= 64 and all(c.isalnum() or c in "-_" for c in value)


def _same_origin(origin: str, request: Request) -> bool:
    host = request.headers.get("host", "")
    parts = urlsplit(origin)
    return bool(parts.netloc) and parts.netloc.lower() == host.lower()


def safe_next(target: str) -> str:
    """Where to go after logging in: ``target`` when it is a path of this site, else ``/`` (no open
    redirect)."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


async def _read_body(receive: Receive) -> bytes | None:
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if len(body) > MAX_BODY:
            return None
        if not message.get("more_body", False):
            return body


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _reply(send: Send, api: bool, status: int, text: str) -> None:
    if api:
        await _json(send, status, text)
    else:
        await _text(send, status, text)


async def _json(send: Send, status: int, text: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": text}).encode()
    headers = [(b"content-type", b"application/json")] + [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await _send(send, status, body, headers)


async def _text(send: Send, status: int, text: str) -> None:
    await _send(send, status, text.encode(), [(b"content-type", b"text/plain; charset=utf-8")])


async def _redirect(send: Send, location: str) -> None:
    await _send(send, 303, b"", [(b"location", location.encode())])


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- login ------------------------------------------------------------------------------------------

LOGIN_FORM = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rocketredis console — login</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 24rem; margin: 4rem auto">
<h1>rocketredis console</h1>
<form method="post" action="/login" id="login">
<input type="hidden" name="next" value="{next}">
<label>Access token <input type="password" name="token" autocomplete="current-password" autofocus required></label>
<button type="submit">Log in</button>
</form>{error}
</body></html>
"""


def login_page(next_path: str, error: str = "") -> str:
    """The login form (``GET /login``); ``error`` is shown under it."""
    shown = f'<p role="alert" style="color: #b00">{html.escape(error)}</p>' if error else ""
    return LOGIN_FORM.format(next=html.escape(safe_next(next_path), quote=True), error=shown)
