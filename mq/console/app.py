"""``create_app``: the console's Starlette app — the JSON API (:mod:`mq.console.api`), the login
routes, and the HTML pages of :mod:`mq.console.pages` when that module is installed — behind the
:class:`~mq.console.auth.Guard` (sessions, read-only, CSRF, security headers), behind Starlette's
``TrustedHostMiddleware`` (the ``Host`` check that stops DNS rebinding).

Pages are mounted from ``mq.console.pages.routes`` (a list of Starlette routes); they reach the
:class:`~mq.console.service.Console` as ``request.app.state.console`` and the CSRF token as
``request.state.csrf_token``. Without the pages module, ``/`` redirects to ``/api``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mq.console import api
from mq.console.auth import (
    LOOPBACK_HOSTS,
    SESSION_COOKIE,
    SESSION_TTL_S,
    Guard,
    Sessions,
    client_address,
    host_patterns,
    login_page,
    safe_next,
    too_many_failures,
)
from mq.console.service import Console


def create_app(
    url: str | None,
    namespace: str = "mq",
    *,
    read_only: bool = False,
    token: str | None = None,
    allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
    session_ttl_s: float = SESSION_TTL_S,
) -> Starlette:
    """The console app for the store at ``url`` and ``namespace``.

    Args:
        url: store URL (see :mod:`mq.store.connection`); its password never reaches a response.
        namespace: key prefix of the deployment.
        read_only: refuse every change (403) and tell pages to hide their controls.
        token: require this token on every page (login form, session cookie) and API call (bearer header).
        allowed_hosts: the names a request's ``Host`` header may give (without the port; ``*.example.com``
            for subdomains; ``*`` turns the check off): the names the console is reached by. Any other
            gets 400 (DNS rebinding). The default fits a console on loopback.
        session_ttl_s: seconds a login session lasts.

    Raises:
        ValueError: an empty token, no allowed host or a malformed one, or a session time that is not positive.

    The app closes its store connection at shutdown (its lifespan); a caller that never runs the
    lifespan closes ``app.state.console`` itself.
    """
    if token is not None and (not isinstance(token, str) or not token.strip()):
        raise ValueError("token must be a non-empty string (or None for no login)")
    hosts = host_patterns(allowed_hosts)
    sessions = Sessions(token, ttl_s=session_ttl_s)
    console = Console(url, namespace, read_only=read_only, token=token)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            console.close()

    routes: list[BaseRoute] = [
        Route("/login", _login_form, methods=["GET"]),
        Route("/login", _login, methods=["POST"]),
        Route("/logout", _logout, methods=["POST"]),
        *api.routes,
        *_page_routes(),
    ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False),
        Middleware(Guard, sessions=sessions, read_only=read_only),
    ]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.console = console
    app.state.sessions = sessions
    return app


def _page_routes() -> list[BaseRoute]:
    """The HTML pages' routes (``mq.console.pages.routes``), or a redirect of ``/`` to ``/api``."""
    if importlib.util.find_spec("mq.console.pages") is None:
        return [Route("/", lambda request: RedirectResponse("/api", 303), methods=["GET"])]
    pages = importlib.import_module("mq.console.pages")
    found: list[BaseRoute] = list(pages.routes)
    return found


async def _login_form(request: Request) -> Response:
    if request.app.state.console.token is None:
        return RedirectResponse("/", 303)
    return HTMLResponse(login_page(request.query_params.get("next", "/")))


async def _login(request: Request) -> Response:
    sessions: Sessions = request.app.state.sessions
    form = await request.form()
    token, target = form.get("token", ""), safe_next(str(form.get("next", "/")))
    client = client_address(request.scope)
    wait = sessions.locked_for(client)
    if wait > 0:  # right or wrong, not tried: a guesser learns nothing while locked out
        return HTMLResponse(login_page(target, too_many_failures(wait)), 429, {"retry-after": str(max(1, round(wait)))})
    if sessions.token is None or not sessions.verify(token if isinstance(token, str) else "", client):
        return HTMLResponse(login_page(target, "wrong token"), 401)
    response = RedirectResponse(target, 303)
    response.set_cookie(SESSION_COOKIE, sessions.start(), max_age=int(sessions.ttl_s), httponly=True, samesite="strict", path="/")
    return response


async def _logout(request: Request) -> Response:
    sessions: Sessions = request.app.state.sessions
    sessions.end(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/login", 303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
