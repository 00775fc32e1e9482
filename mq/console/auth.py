"""The console's guard: login, read-only mode, CSRF protection and secret redaction (ASGI middleware).

- **Token** (``--token``): every page and API call needs it, except ``/login`` and ``/static/``. API
  clients send ``Authorization: Bearer <token>``; browsers log in through the form at ``/login``, which
  sets the HttpOnly, ``SameSite=Strict`` cookie :data:`SESSION_COOKIE` holding an HMAC of the token (the
  token itself is never stored in the browser). Without it an API call gets 401 (JSON), a page a 303
  to ``/login?next=…``.
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
- **Secrets**: responses are scanned for the store URL's password and the token, each replaced with
  ``***`` (a last line of defence: nothing is meant to show them).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from starlette.requests import Request

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The session cookie set by the login form (HMAC-SHA256 of the token).
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


def session_value(token: str) -> str:
    """The session cookie's value for ``token``: an HMAC, so the cookie does not reveal the token."""
    return hmac.new(token.encode(), b"mq-console-session", hashlib.sha256).hexdigest()


class Guard:
    """ASGI middleware: authentication, read-only refusal, CSRF check, secret redaction.

    Args:
        app: the Starlette app.
        token: the access token, or None for no login.
        read_only: refuse every POST but login/logout.
        secrets_: texts replaced with ``***`` in every response.
    """

    def __init__(self, app: ASGIApp, *, token: str | None, read_only: bool, secrets_: Sequence[str]) -> None:
        self.app = app
        self.token = token
        self.read_only = read_only
        self.secrets = [s for s in secrets_ if s]

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
        send = self._redacting(self._with_cookie(send, new_csrf))
        bearer = self._bearer_ok(request)
        open_path = path == OPEN_PATH or path.startswith(OPEN_PREFIX)
        if self.token is not None and not open_path and not (bearer or self._session_ok(request)):
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
            if not bearer and path != "/login" and not self._csrf_ok(request, body, csrf):
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

    def _bearer_ok(self, request: Request) -> bool:
        if self.token is None:
            return False
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode())

    def _session_ok(self, request: Request) -> bool:
        assert self.token is not None
        cookie = request.cookies.get(SESSION_COOKIE, "")
        return hmac.compare_digest(cookie.encode(), session_value(self.token).encode())

    @staticmethod
    def _csrf_ok(request: Request, body: bytes, cookie: str) -> bool:
        if not _valid_csrf(cookie):
            return False
        sent = request.headers.get(CSRF_HEADER, "")
        if not sent and request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            sent = (parse_qs(body.decode(errors="replace")).get(CSRF_FIELD) or [""])[0]
        return hmac.compare_digest(sent.encode(), cookie.encode())

    def _with_cookie(self, send: Send, csrf: str) -> Send:
        if not csrf:
            return send

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = f"{CSRF_COOKIE}={csrf}; Path=/; HttpOnly; SameSite=Strict"
                message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
            await send(message)

        return wrapped

    def _redacting(self, send: Send) -> Send:
        """Buffer each response and replace the secrets in it (the console's responses are small)."""
        if not self.secrets:
            return send
        start: Message = {}
        chunks: list[bytes] = []

        async def wrapped(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            for secret in self.secrets:
                body = body.replace(secret.encode(), b"***")
                body = body.replace(html.escape(secret).encode(), b"***")
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

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


def check_login(token: str | None, given: str) -> str | None:
    """The session cookie value when ``given`` is the token, else None."""
    if token is None or not hmac.compare_digest(given.encode(), token.encode()):
        return None
    return session_value(token)
