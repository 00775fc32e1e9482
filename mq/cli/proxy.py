"""``mq proxy``: the RocketMQ 5 gRPC endpoint (needs the ``proxy`` extra: grpcio, protobuf)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from mq.cli.common import Commands, add_leaf, warn_if_memory
from mq.cli.numbers import FIXED_PORT, PORT, number

#: Largest --max-body-mib: the endpoint holds a whole request in memory (RocketMQ's default is 4 MiB).
MAX_BODY_MIB = 64.0
#: Largest --max-delay-h: a year (RocketMQ's proxy allows 24 h by default); more is a unit mistake.
MAX_DELAY_H = 24.0 * 366
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq proxy``."""
    p = add_leaf(
        commands,
        "proxy",
        _proxy,
        "run the RocketMQ 5 gRPC endpoint: official RocketMQ clients produce and consume through it",
        common,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    p.add_argument("--port", type=PORT, default=8081, help="plaintext gRPC port; 0 picks a free one (default: %(default)s)")
    p.add_argument("--tls-port", type=PORT, default=None, help="TLS gRPC port, with --tls-cert and --tls-key (default: no TLS)")
    p.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate chain of the TLS port (default: none)")
    p.add_argument("--tls-key", type=Path, default=None, help="PEM private key of the TLS port (default: none)")
    p.add_argument(
        "--access-key",
        default=None,
        help="require requests signed with this access key (default: $MQ_PROXY_ACCESS_KEY, else none)",
    )
    p.add_argument(
        "--secret-key",
        default=None,
        help="the secret key of --access-key; prefer the variable, which ps does not show (default: $MQ_PROXY_SECRET_KEY)",
    )
    p.add_argument(
        "--max-clock-skew-min",
        type=number(float, low=0, high=24 * 60, low_open=True),
        default=15.0,
        help="how far a signed request's x-mq-date-time may be from this host's UTC clock, minutes; a captured "
        "signature works this long (default: %(default)s, as RocketMQ's proxy)",
    )
    p.add_argument(
        "--max-body-mib",
        type=number(float, low=0, high=MAX_BODY_MIB, low_open=True),
        default=4.0,
        help=f"largest message body, MiB, above 0 and at most {MAX_BODY_MIB:g} (default: %(default)s)",
    )
    p.add_argument(
        "--max-delay-h",
        type=number(float, low=0, high=MAX_DELAY_H, low_open=True),
        default=24.0,
        help=f"furthest ahead a delivery time may be, hours, above 0 and at most {MAX_DELAY_H:g} (default: %(default)s)",
    )
    p.add_argument(
        "--workers",
        type=number(int, low=1, high=64),
        default=1,
        help="endpoint processes serving the same port (SO_REUSEPORT; Linux): one process uses one core (default: %(default)s)",
    )
    p.add_argument(
        "--metrics-port", type=FIXED_PORT, default=None, help="serve Prometheus metrics on this port (/metrics) (default: none)"
    )
    p.add_argument(
        "--metrics-host",
        "--metrics-addr",  # the first spelling, kept: deployments use it
        dest="metrics_host",
        default="127.0.0.1",
        help="address the metrics endpoint listens on (--metrics-addr is the same option) (default: %(default)s)",
    )


def _proxy(args: argparse.Namespace) -> int:
    try:
        from mq.proxy.auth import Credentials
        from mq.proxy.metrics import ProxyMetrics
        from mq.proxy.server import ProxyConfig, serve
        from mq.proxy.settings import Limits
    except ImportError as e:
        print(f"mq proxy needs the proxy extra: pip install 'rocketredis[proxy]' ({e})")
        return 2
    warn_if_memory(args.url, writes=True)
    access_key = args.access_key or os.environ.get("MQ_PROXY_ACCESS_KEY")
    secret_key = args.secret_key or os.environ.get("MQ_PROXY_SECRET_KEY")
    if bool(access_key) != bool(secret_key):
        print("mq proxy: set both --access-key and --secret-key (or their variables), or neither")
        return 2
    if not access_key and args.host not in LOOPBACK:
        print(
            f"WARNING: mq proxy listens on {args.host} without --access-key/--secret-key: anyone who reaches this "
            "address can send, receive and acknowledge messages of every topic. Set keys, or bind 127.0.0.1",
            file=sys.stderr,
            flush=True,
        )
    config = ProxyConfig(
        url=args.url,
        namespace=args.namespace,
        host=args.host,
        port=args.port,
        tls_port=args.tls_port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        credentials=(
            Credentials(access_key, secret_key, max_skew_s=args.max_clock_skew_min * 60) if access_key and secret_key else None
        ),
        limits=Limits(max_body_size=int(args.max_body_mib * 1024 * 1024)),
        max_delay_ms=int(args.max_delay_h * 3_600_000),
    )
    metrics = ProxyMetrics()
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=args.metrics_host)
        print(f"metrics on http://{args.metrics_host}:{args.metrics_port}/metrics", flush=True)
    asyncio.run(serve(config, metrics, workers=args.workers))
    return 0
