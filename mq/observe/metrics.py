"""Opt-in client metrics for Prometheus: send and consume latency, rebalances.

Call :func:`enable_client_metrics` once per process (optionally with a port, and the ``host`` to listen
on, to serve them; :func:`close_client_metrics_server` stops serving);
producers and consumers then record into the process-wide registry::

    rocketredis_send_latency_seconds{topic}          histogram of successful sends
    rocketredis_consume_latency_seconds{group,topic} histogram of listener calls
    rocketredis_rebalance_total{group}               rebalances that changed this client's queues
    rocketredis_offset_rewinds_total{group,topic,queue}
                                                     positions the store rewound after a failover
                                                     lost messages a consumer had read (D70)
    rocketredis_offset_rewound_messages_total{group,topic,queue}
                                                     messages read again because of those rewinds

Disabled (the default), the hooks cost one attribute check. Broker-side series (lag, DLQ size,
backlogs) come from ``mq broker --metrics-port``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server

#: Latency buckets, seconds.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass(frozen=True)
class ClientMetrics:
    """The client series of one registry."""

    send_latency: Histogram
    consume_latency: Histogram
    rebalances: Counter
    offset_rewinds: Counter
    rewound_messages: Counter


#: The enabled metrics, or None.
CLIENT_METRICS: ClientMetrics | None = None


@dataclass(frozen=True)
class _Exporter:
    """The HTTP server serving the client metrics, and where it listens."""

    server: WSGIServer
    thread: threading.Thread
    host: str
    port: int


#: The registry the enabled metrics record into (what the exporter serves).
_RECORDED_IN: CollectorRegistry = REGISTRY
#: The client metrics' HTTP server, or None (guarded by ``_EXPORTER_LOCK``).
_EXPORTER: _Exporter | None = None
_EXPORTER_LOCK = threading.Lock()


def enable_client_metrics(
    port: int | None = None, *, registry: CollectorRegistry = REGISTRY, host: str | None = None, addr: str | None = None
) -> ClientMetrics:
    """Start recording client metrics (idempotent); with ``port``, serve them on ``http://host:port/metrics``.

    ``host`` is the address the exporter listens on: 127.0.0.1 (the default, None) is reachable from this
    machine only; a scraper in another pod or container needs the pod's address or ``0.0.0.0``.
    ``addr`` is its first name, kept for callers that pass it (the broker service's ``--metrics-addr``
    likewise became ``--metrics-host``); giving both with different values is refused.

    A later call with a port starts the server if none runs (metrics enabled without one first);
    asking for another host or port while one runs is refused (:func:`close_client_metrics_server`
    first) rather than silently left on the old address.

    Raises:
        ValueError: ``host`` and ``addr`` differ, or a server already serves on another address.
    """
    global CLIENT_METRICS, _RECORDED_IN
    if host is not None and addr is not None and host != addr:
        raise ValueError(f"enable_client_metrics: host={host!r} and addr={addr!r} name the same setting; pass host only")
    host = host or addr or "127.0.0.1"
    running = _EXPORTER
    if port is not None and running is not None and (running.host, running.port) != (host, port):
        raise ValueError(
            f"enable_client_metrics: the client metrics are already served on {running.host}:{running.port}; "
            "call close_client_metrics_server() before serving them elsewhere"
        )
    if CLIENT_METRICS is None:
        CLIENT_METRICS = ClientMetrics(
            Histogram("rocketredis_send_latency_seconds", "Send latency", ["topic"], buckets=BUCKETS, registry=registry),
            Histogram(
                "rocketredis_consume_latency_seconds",
                "Listener call duration",
                ["group", "topic"],
                buckets=BUCKETS,
                registry=registry,
            ),
            Counter("rocketredis_rebalance_total", "Rebalances that changed the queues", ["group"], registry=registry),
            Counter(
                "rocketredis_offset_rewinds_total",
                "Consumer positions rewound: beyond the queue's end or on another history after a failover",
                ["group", "topic", "queue"],
                registry=registry,
            ),
            Counter(
                "rocketredis_offset_rewound_messages_total",
                "Messages read again because a consumer position was rewound",
                ["group", "topic", "queue"],
                registry=registry,
            ),
        )
        _RECORDED_IN = registry
    if port is not None:
        _serve(port, host, _RECORDED_IN)  # where the series are, whatever a later call passes
    return CLIENT_METRICS


def _serve(port: int, host: str, registry: CollectorRegistry) -> None:
    global _EXPORTER
    with _EXPORTER_LOCK:
        if _EXPORTER is None:
            server, thread = start_http_server(port, addr=host, registry=registry)
            _EXPORTER = _Exporter(server, thread, host, port)


def close_client_metrics_server(timeout_s: float = 5.0) -> bool:
    """Stop serving the client metrics (they keep being recorded); True when a server was running.

    Args:
        timeout_s: seconds to wait for the server's thread to end.
    """
    global _EXPORTER
    with _EXPORTER_LOCK:
        exporter, _EXPORTER = _EXPORTER, None
    if exporter is None:
        return False
    exporter.server.shutdown()
    exporter.server.server_close()
    exporter.thread.join(timeout_s)
    return True
