"""``mq``: administer topics, send and query messages, run the broker service and the demo.

The parser is assembled from one module per command family (:data:`FAMILIES`); each leaf command
names its handler with ``set_defaults(func=…)`` and takes ``--url`` (default ``$MQ_URL``, else the
embedded ``memory://`` store, which lives only as long as the command) and ``--namespace`` through
a shared parent parser (:func:`mq.cli.common.connection_options`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import mq
from mq.cli import analytics, broker, console, demo, dlq, doctor, group, message, proxy, recall, stats, tier, topic, trace, tx
from mq.cli.common import Handler, connection_options
from mq.errors import MQError

#: The command families, in the order ``mq --help`` lists them; each has ``register(commands, common)``.
FAMILIES = (demo, topic, message, recall, group, stats, trace, broker, tier, proxy, doctor, dlq, analytics, tx, console)
#: How long ``mq --version`` waits for the store, seconds (connect and reply): a version query that
#: hangs on a firewalled host is worse than one that says the server is not reachable.
VERSION_TIMEOUT_S = 2.0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mq``."""
    parser = argparse.ArgumentParser(prog="mq", description="rocketredis: RocketMQ's messaging model on Redis")
    # main() answers --version itself (it takes --url after it); this entry is for --help and for
    # parse_args callers, which get the package version alone
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {mq.__version__}",
        help="print the package version and the Redis server's (mq --version [--url URL], default $MQ_URL) and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    common = connection_options()
    for family in FAMILIES:
        family.register(commands, common)
    return parser


def version_lines(url: str | None) -> list[str]:
    """What ``mq --version`` prints: ``mq VERSION``, then the server of ``url`` (default ``$MQ_URL``) —
    its name and version, or why there is none. The URL is shown with its password masked."""
    from mq.store.connection import mask_url

    url = url if url is not None else os.environ.get("MQ_URL") or None
    lines = [f"mq {mq.__version__}"]
    if not url:
        lines.append("server: none given (--url URL or $MQ_URL names the store whose Redis version to show)")
    elif url.startswith("memory://"):
        lines.append(f"server: none ({mask_url(url)} is the embedded in-process store, not a Redis server)")
    else:
        lines.append(_server_line(url))
    return lines


def _server_line(url: str) -> str:
    """``server: Redis 8.2.3 at URL``, one entry per distinct version on a cluster's masters, or
    ``server: not reachable at URL (why)``; never the URL's password, even inside a driver's error."""
    from mq.operator.doctor import server_of
    from mq.store.connection import REDIS_ERRORS, Connection, mask_url, url_passwords
    from mq.store.health import Health

    shown = mask_url(url)
    failures: tuple[type[Exception], ...] = (MQError, OSError, ValueError, *REDIS_ERRORS)
    try:
        conn = Connection(url, socket_timeout_s=VERSION_TIMEOUT_S)
        try:
            health = Health(conn)
            servers: dict[str, int] = {}
            for node in health.masters():
                info = health.info(node, "server")
                name = " ".join(server_of(info)) if isinstance(info, dict) else "unknown version (INFO is not allowed)"
                servers[name] = servers.get(name, 0) + 1
        finally:
            conn.close()
    except failures as e:
        why = f"{type(e).__name__}: {e}"
        for secret in url_passwords(url):
            if secret:
                why = why.replace(secret, "***")
        return f"server: not reachable at {shown} ({why}); the package version above does not need it"
    if len(servers) == 1 and sum(servers.values()) == 1:
        return f"server: {next(iter(servers))} at {shown}"
    return "server: " + ", ".join(f"{name} on {n} master{'s' * (n > 1)}" for name, n in servers.items()) + f" at {shown}"


def _version(argv: Sequence[str]) -> int:
    """``mq --version [--url URL]``."""
    parser = argparse.ArgumentParser(prog="mq --version", description="the package version and the Redis server's")
    parser.add_argument("--url", default=None, help="store URL whose server to show (default: $MQ_URL)")
    args = parser.parse_args(argv)
    print("\n".join(version_lines(args.url)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mq`` with ``argv``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--version"]:
        return _version(argv[1:])
    args = build_parser().parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args)
    except MQError as e:
        print(f"mq: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
