"""``mq console``: serve the web console (extra ``rocketredis[console]``; see docs/console.md)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import sys
import urllib.error
import urllib.request

from mq.cli.common import Commands, add_leaf, warn_if_memory

#: The environment variable read for the token when ``--token`` is not given (keeps it out of ``ps``).
TOKEN_ENV = "MQ_CONSOLE_TOKEN"
#: Seconds ``mq console --check`` waits for the answer.
CHECK_TIMEOUT_S = 3.0


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq console``."""
    c = add_leaf(
        commands,
        "console",
        _console,
        "serve the web console: topics, groups and lag, message search, dead letters, live charts (JSON API under /api)",
        common,
    )
    c.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s, this machine only)")
    c.add_argument("--port", type=int, default=8080, help="port to listen on (default: %(default)s)")
    c.add_argument(
        "--read-only", action="store_true", help="refuse every change and hide the change controls (default: changes allowed)"
    )
    c.add_argument(
        "--check",
        action="store_true",
        help="exit 0 when a console answers on --host/--port (GET /api: 200, or 401 with a token), else 1, "
        "instead of serving one (default: serve)",
    )
    c.add_argument(
        "--token",
        default=None,
        help=f"require this access token on every page (login form) and API call (Authorization: Bearer) "
        f"(default: ${TOKEN_ENV}, else no login; an empty token is refused)",
    )
    c.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also accept requests whose Host header names NAME (repeat for more; '*.example.com' for subdomains): "
        "the name a proxy in front or the users' browsers reach the console by (default: only the --host address, "
        "and localhost / 127.0.0.1 / [::1] on loopback; any other Host gets 400, against DNS rebinding)",
    )


def _console(args: argparse.Namespace) -> int:
    if args.check:
        return _check(args.host, args.port)
    try:
        import uvicorn

        from mq.console import create_app
    except ImportError as e:
        print(f"mq: error: the console needs the console extra ({e}): pip install 'rocketredis[console]'", file=sys.stderr)
        return 1
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    if token is not None and not token.strip():
        where = "--token" if args.token is not None else f"${TOKEN_ENV}"
        print(
            f"mq: error: {where} is empty: give the access token (e.g. MQ_CONSOLE_TOKEN=$(cat token-file), the file present), "
            f"or leave {where} out entirely to run without login",
            file=sys.stderr,
        )
        return 2
    try:
        hosts = allowed_hosts(args.host, args.allowed_host)
    except ValueError as e:
        print(f"mq: error: --allowed-host: {e}", file=sys.stderr)
        return 2
    warn_if_memory(args.url)
    if token is None and not _loopback(args.host):
        print(
            f"warning: listening on {args.host} without --token: anyone who reaches it can change topics and offsets",
            file=sys.stderr,
        )
    if args.host in ("0.0.0.0", "::", "") and not args.allowed_host:
        print(
            f"note: listening on {args.host!r} without --allowed-host: only requests to localhost, 127.0.0.1 or [::1] "
            "are answered (others get 400); give --allowed-host NAME for each name users reach the console by",
            file=sys.stderr,
        )
    app = create_app(args.url, args.namespace, read_only=args.read_only, token=token, allowed_hosts=hosts)
    print(f"mq console on http://{args.host}:{args.port}/ (read-only: {args.read_only}, login: {token is not None})", flush=True)
    for stop in (signal.SIGTERM, signal.SIGINT):
        # uvicorn shuts down on these and then raises them again once its own handlers are gone: this
        # handler takes that second one, so a stop on request is a clean exit 0
        signal.signal(stop, lambda signum, frame: None)
    uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="info")).run()
    return 0


def _check(host: str, port: int) -> int:
    """0 when ``GET /api`` on ``host:port`` answers 200 (or 401: a token is required), else 1."""
    target = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    url = f"http://{'[' + target + ']' if ':' in target else target}:{port}/api"
    try:
        with urllib.request.urlopen(url, timeout=CHECK_TIMEOUT_S) as response:
            status = int(response.status)
    except urllib.error.HTTPError as e:
        status = e.code
    except OSError as e:
        print(f"unhealthy: {url}: {e}")
        return 1
    healthy = status in (200, 401)
    print(f"{'healthy' if healthy else 'unhealthy'}: {url} answered {status}")
    return 0 if healthy else 1


def allowed_hosts(listen: str, extra: list[str]) -> list[str]:
    """The Host names the console accepts when listening on ``listen`` with ``--allowed-host extra``:
    ``listen`` itself (bracketed when IPv6), the loopback names on loopback, and ``extra``. On
    ``0.0.0.0`` / ``::`` users reach the console by names only the operator knows: they are given with
    ``--allowed-host``.

    Raises:
        ValueError: a malformed ``extra`` name.
    """
    from mq.console.auth import LOOPBACK_HOSTS, host_patterns

    hosts = [] if listen in ("0.0.0.0", "::", "") else [f"[{listen}]" if ":" in listen else listen]
    if _loopback(listen) or listen in ("0.0.0.0", "::", ""):
        hosts += LOOPBACK_HOSTS
    return host_patterns([*hosts, *extra])


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
