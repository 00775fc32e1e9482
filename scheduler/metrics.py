"""Prometheus metrics of a namespace, computed from the store at scrape time
(``mq broker --metrics-port``), in the spirit of RocketMQ's exporter.

Series (gauges, and one counter kept in the store, so every broker service replica exports the same
value and a restart neither loses nor repeats any of it):

- ``rocketredis_topic_messages{topic}``: messages ever stored in the topic (sum of max offsets);
- ``rocketredis_group_lag{group,topic,queue}``: messages a group has not consumed yet;
- ``rocketredis_dlq_messages{group}``: messages in the group's dead-letter queue;
- ``rocketredis_messages_expired_unconsumed_total{group,topic}`` (counter): messages retention removed
  before the group consumed them;
- ``rocketredis_timer_backlog``: delayed messages waiting to be due;
- ``rocketredis_half_backlog``: transaction half messages waiting for commit, rollback or check-back;
- ``rocketredis_brokers_healthy``: broker services that reported within the health timeout.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mq.connection import Connection
from mq.errors import MQError
from mq.store import Store
from scheduler.stats import read_figures

log = logging.getLogger("scheduler.metrics")


class StoreCollector(Collector):
    """Reads the namespace's figures when Prometheus scrapes."""

    def __init__(self, store: Store, health_timeout_s: float) -> None:
        self._store = store
        self._health_timeout_s = health_timeout_s

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        try:
            yield from self._collect()
        except MQError as e:  # a scrape during a Redis outage shows no series, not an exception
            log.warning("collecting metrics failed: %s", e)

    def _collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        f = read_figures(self._store)
        topics = GaugeMetricFamily("rocketredis_topic_messages", "Messages ever stored in a topic", labels=["topic"])
        for topic, n in f.topic_messages.items():
            topics.add_metric([topic], n)
        yield topics
        dlq = GaugeMetricFamily("rocketredis_dlq_messages", "Messages in a group's dead-letter queue", labels=["group"])
        for group, n in f.dlq_messages.items():
            dlq.add_metric([group], n)
        yield dlq
        lag = GaugeMetricFamily("rocketredis_group_lag", "Messages a group has not consumed", labels=["group", "topic", "queue"])
        for (group, topic, qid), n in f.lag.items():
            lag.add_metric([group, topic, str(qid)], n)
        yield lag
        expired = CounterMetricFamily(
            "rocketredis_messages_expired_unconsumed",
            "Messages retention removed before the group consumed them",
            labels=["group", "topic"],
        )
        for (group, topic), n in sorted(f.expired.items()):
            expired.add_metric([group, topic], n)
        yield expired
        yield GaugeMetricFamily("rocketredis_timer_backlog", "Delayed messages waiting to be due", value=f.timer_backlog)
        yield GaugeMetricFamily("rocketredis_half_backlog", "Transaction half messages not resolved yet", value=f.half_backlog)
        from scheduler.service import healthy_brokers

        alive = healthy_brokers(self._store.conn.url, self._store.conn.namespace, self._health_timeout_s)
        yield GaugeMetricFamily("rocketredis_brokers_healthy", "Broker services reporting healthy", value=len(alive))


class MetricsServer:
    """The HTTP server :func:`serve_metrics` started: ``registry`` is what it serves; :meth:`close`
    stops the server and closes its store connection (also on leaving a ``with`` block)."""

    def __init__(self, registry: CollectorRegistry, store: Store, httpd: Any, thread: threading.Thread) -> None:
        self.registry = registry
        self._store, self._httpd, self._thread = store, httpd, thread

    def close(self) -> None:
        """Stop serving (waits for the request being answered) and close the store connection."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
        self._store.conn.close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(
    port: int, url: str | None, namespace: str, *, health_timeout_s: float = 10.0, addr: str = "127.0.0.1"
) -> MetricsServer:
    """Serve the namespace's metrics on ``http://addr:port/metrics`` until the returned server is
    closed (before, the server and its store connection lived until the process ended: a caller that
    was done with them could not let them go)."""
    registry = CollectorRegistry()
    store = Store(Connection(url, namespace))
    registry.register(StoreCollector(store, health_timeout_s))
    httpd, thread = start_http_server(port, addr=addr, registry=registry)
    return MetricsServer(registry, store, httpd, thread)
