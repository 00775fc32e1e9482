"""``mq broker``: run the broker service (timers, retention, clean-up) or check its health."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from mq.cli.common import Commands, add_leaf, warn_if_memory
from mq.cli.numbers import FIXED_PORT, number
from mq.cli.signals import StopSignals
from scheduler.config import BrokerConfig

_DEFAULTS = BrokerConfig()


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq broker``."""
    b = add_leaf(commands, "broker", _broker, "run the broker service (timers, retention, clean-up) or check its health", common)
    b.add_argument(
        "--check",
        action="store_true",
        help="exit 0 when a broker service is healthy and mq doctor finds no FAIL, else 1, instead of running one "
        "(default: run one)",
    )
    b.add_argument(
        "--sync-replicas",
        type=_replicas,
        default=_DEFAULTS.sync_replicas,
        help="replicas that must confirm the service's writes (timer delivery, transactions), or 'all' "
        "(every replica the master has) (default: %(default)s)",
    )
    b.add_argument(
        "--sync-flush",
        action="store_true",
        help="those writes also wait until they are fsynced to the AOF (WAITAOF: Redis >= 7.2, appendonly yes) (default: off)",
    )
    b.add_argument(
        "--sync-replicas-timeout-ms",
        type=int,
        default=_DEFAULTS.sync_replicas_timeout_ms,
        help="how long each such write waits for them, ms (default: %(default)s)",
    )
    b.add_argument(
        "--delay-levels",
        default=None,
        help=f'message_delay_level, e.g. "1s 5s 10s 30s 1m" (default: "{_DEFAULTS.message_delay_level}")',
    )
    b.add_argument(
        "--retention-h",
        type=number(float, low=0, low_open=True),
        default=None,
        help=f"file_reserved_time_h: hours messages are kept (default: {_DEFAULTS.file_reserved_time_h:g})",
    )
    b.add_argument(
        "--tier-url",
        default=None,
        help="tiered storage: file:///path or s3://bucket/prefix (S3 credentials and endpoint from the standard "
        "AWS_* environment) (default: no tier)",
    )
    b.add_argument(
        "--hot-retention-s",
        type=float,
        default=None,
        help="with a tier: seconds Redis keeps a message once tiered (default: --retention-h)",
    )
    b.add_argument(
        "--hot-retention-bytes",
        type=int,
        default=None,
        help="with a tier: about how many bytes of each queue's log Redis keeps (default: no bound)",
    )
    b.add_argument(
        "--metrics-port",
        type=FIXED_PORT,
        default=None,
        help="serve Prometheus metrics on this port (/metrics) (default: no metrics endpoint)",
    )
    b.add_argument(
        "--metrics-host",
        "--metrics-addr",  # the first spelling, kept: deployments use it
        dest="metrics_host",
        default="127.0.0.1",
        help="address the metrics endpoint listens on, e.g. 0.0.0.0 for a scraper in another pod or container "
        "(--metrics-addr is the same option) (default: %(default)s)",
    )


def _replicas(text: str) -> int | str:
    """``--sync-replicas``: a count, or ``all``."""
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of replicas or 'all', got {text!r}") from None


def _broker(args: argparse.Namespace) -> int:
    from scheduler import BrokerService, healthy_brokers

    if args.check:
        from mq.operator.doctor import FAIL, check

        alive = healthy_brokers(args.url, args.namespace)
        print(f"healthy: {', '.join(alive)}" if alive else "no healthy broker service")
        failed = [f for f in check(args.url, args.namespace, keys=False) if f.level == FAIL]
        for f in failed:
            print(f)
        return 0 if alive and not failed else 1
    warn_if_memory(args.url, writes=True)
    options: dict[str, Any] = {
        "sync_replicas": args.sync_replicas,
        "sync_replicas_timeout_ms": args.sync_replicas_timeout_ms,
        "sync_flush": args.sync_flush,
    }
    if args.delay_levels:
        options["message_delay_level"] = args.delay_levels
    if args.retention_h is not None:
        options["file_reserved_time_h"] = args.retention_h
    for name in ("tier_url", "hot_retention_s", "hot_retention_bytes"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    stop = StopSignals()  # not a threading.Event set by a handler: that can deadlock (D66)
    with BrokerService(args.url, args.namespace, BrokerConfig(**options)) as service, contextlib.ExitStack() as metrics:
        if args.metrics_port:
            from scheduler.metrics import serve_metrics

            metrics.enter_context(
                serve_metrics(
                    args.metrics_port,
                    args.url,
                    args.namespace,
                    health_timeout_s=service.config.health_timeout_s,
                    addr=args.metrics_host,
                    tier=service.tier,
                    watch=service.store_watch,
                )
            )
            print(f"metrics on http://{args.metrics_host}:{args.metrics_port}/metrics", flush=True)
        print(f"{service!r} running; Ctrl-C to stop", flush=True)
        stop.wait()
    return 0
