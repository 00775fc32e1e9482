"""``create_app``: the console's Starlette app — the JSON API (:mod:`mq.console.api`), the login
routes, and the HTML pages of :mod:`mq.console.pages` when that module is installed — behind the
:class:`~mq.console.auth.Guard` (token, read-only, CSRF, secret redaction).

Pages are mounted from ``mq.console.pages.routes`` (a list of Starlette routes); they reach the
:class:`~mq.console.service.Console` as ``request.app.state.console`` and the CSRF token as
``request.state.csrf_token``. Without the pages module, ``/`` redirects to ``/api``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mq.console import api
from mq.console.auth import SESSION_COOKIE, Guard, check_login, login_page, safe_next
from mq.console.service import Console


def create_app(url: str | None, namespace: str = "mq", *, read_only: bool = False, token: str | None = None) -> Starlette:
    """The console app for the store at ``url`` and ``namespace``.

    Args:
        url: store URL (see :mod:`mq.connection`); its password never reaches a response.
        namespace: key prefix of the deployment.
        read_only: refuse every change (403) and tell pages to hide their controls.
        token: require this token on every page (login form, cookie) and API call (bearer header).

    The app closes its store connection at shutdown (its lifespan); a caller that never runs the
    lifespan closes ``app.state.console`` itself.
    """
    if token is not None and (not isinstance(token, str) or not token.strip()):
        raise ValueError("token must be a non-empty string (or None for no login)")
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
    middleware = [Middleware(Guard, token=token, read_only=read_only, secrets_=console.secrets)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.console = console
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
    form = await request.form()
    token, target = form.get("token", ""), safe_next(str(form.get("next", "/")))
    session = check_login(request.app.state.console.token, token if isinstance(token, str) else "")
    if session is None:
        return HTMLResponse(login_page(target, "wrong token"), 401)
    response = RedirectResponse(target, 303)
    response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict", path="/")
    return response


async def _logout(request: Request) -> Response:
    response = RedirectResponse("/login", 303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
