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
- ``rocketredis_brokers_healthy``: broker services that reported within the health timeout;
- ``rocketredis_group_consumed_messages{group,topic}``: the group's committed offsets summed over the
  topic's queues (what it consumed since offset 0; its rate is the group's rate out). A gauge, not a
  counter: an offset reset moves it back, which ``rate()`` would read as a restart and a burst;
- ``rocketredis_group_clients{group}``: members of the group whose last heartbeat (Redis clock) is
  within the heartbeat timeout. 0 with a lag above 0: nobody consumes the group's messages.

With the broker service's store check (``watch``, its :class:`~scheduler.storewatch.StoreWatch`), as of
its last run (every ``store_check_interval_s``), per master (label ``node``, ``host:port``):

- ``rocketredis_store_misconfigured{node}``: 1 while the master's ``maxmemory-policy`` lets Redis evict
  keys (anything but ``noeviction``), else 0; no series while the policy cannot be read;
- ``rocketredis_store_memory_used_ratio{node}``: ``used_memory / maxmemory`` (no series without a limit);
- ``rocketredis_store_evicted_keys_total{node}`` (counter, Redis's own ``evicted_keys``: reset by a
  restart of that server): keys the master evicted.

With a tier (the broker service's uploader passed as ``tier``):

- ``rocketredis_tier_lag_messages{topic,queue}``: messages not in the tier yet (upload lag);
- ``rocketredis_tier_bytes{topic}``, ``rocketredis_tier_segments{topic}``: what the tier holds;
- ``rocketredis_tier_stalled_messages{topic,queue}``: messages past hot retention that Redis keeps
  because the tier does not hold them yet (non-zero: uploads are failing or behind);
- ``rocketredis_tier_upload_errors_total``, ``rocketredis_tier_uploaded_bytes_total``,
  ``rocketredis_tier_uploaded_segments_total`` (counters of this broker service).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mq.consumer.registry import HEARTBEAT_TIMEOUT_S
from mq.errors import MQError
from mq.store import Store
from mq.store.connection import Connection
from scheduler.stats import read_figures
from scheduler.storewatch import StoreWatch
from scheduler.tier import TierUploader

log = logging.getLogger("scheduler.metrics")


class StoreCollector(Collector):
    """Reads the namespace's figures when Prometheus scrapes."""

    def __init__(
        self, store: Store, health_timeout_s: float, tier: TierUploader | None = None, watch: StoreWatch | None = None
    ) -> None:
        self._store = store
        self._health_timeout_s = health_timeout_s
        self._tier = tier
        self._watch = watch

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        if self._watch is not None:  # no store read: the service's last check (shown also when Redis is down)
            yield from _store_series(self._watch)
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
        consumed = GaugeMetricFamily(
            "rocketredis_group_consumed_messages",
            "Committed offsets of a group summed over a topic's queues (messages consumed since offset 0)",
            labels=["group", "topic"],
        )
        for (group, topic), n in sorted(f.consumed.items()):
            consumed.add_metric([group, topic], n)
        yield consumed
        yield self._clients()
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
        if self._tier is not None:
            yield from self._tier_series(self._tier)

    def _clients(self) -> GaugeMetricFamily:
        """Live members per group: heartbeats are stamped by the Redis clock, so they are aged by it too."""
        clients = GaugeMetricFamily(
            "rocketredis_group_clients", "Members of a group that heartbeat within the timeout", labels=["group"]
        )
        groups = self._store.groups()
        oldest_ms = self._store.server_time_ms() - int(HEARTBEAT_TIMEOUT_S * 1000)
        for group, (_, beats) in zip(groups, self._store.groups_clients_raw(groups)):
            clients.add_metric([group], sum(1 for last_ms in beats.values() if last_ms >= oldest_ms))
        return clients

    def _tier_series(self, tier: TierUploader) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        lag = GaugeMetricFamily("rocketredis_tier_lag_messages", "Messages not in the tier yet", labels=["topic", "queue"])
        size = GaugeMetricFamily("rocketredis_tier_bytes", "Bytes of a topic's segments in the tier", labels=["topic"])
        count = GaugeMetricFamily("rocketredis_tier_segments", "Segments of a topic in the tier", labels=["topic"])
        for topic, (_, span) in sorted(self._store.topic_spans().items()):
            queues = list(range(span))
            manifests = self._store.segments_of([(topic, q) for q in queues])
            stats = self._store.queue_stats(topic, queues)
            for q, segs in zip(queues, manifests):
                lag.add_metric([topic, str(q)], stats[q].max_offset - (segs[-1].end if segs else stats[q].min_offset))
            size.add_metric([topic], sum(s.size_bytes for m in manifests for s in m))
            count.add_metric([topic], sum(len(m) for m in manifests))
        yield lag
        yield size
        yield count
        counters = tier.counters
        stalled = GaugeMetricFamily(
            "rocketredis_tier_stalled_messages",
            "Messages past hot retention the tier does not hold yet",
            labels=["topic", "queue"],
        )
        for (topic, q), n in sorted(dict(counters.stalled).items()):
            stalled.add_metric([topic, str(q)], n)
        yield stalled
        yield CounterMetricFamily("rocketredis_tier_upload_errors", "Failed tier uploads", value=counters.errors)
        yield CounterMetricFamily("rocketredis_tier_uploaded_bytes", "Bytes uploaded to the tier", value=counters.bytes)
        yield CounterMetricFamily("rocketredis_tier_uploaded_segments", "Segments uploaded to the tier", value=counters.segments)


def _store_series(watch: StoreWatch) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The store check's series (see the module docstring), from ``watch``'s last readings."""
    readings = list(watch.readings.values())
    bad = GaugeMetricFamily(
        "rocketredis_store_misconfigured",
        "1 while the master's maxmemory-policy lets Redis evict rocketredis's keys (not noeviction)",
        labels=["node"],
    )
    ratio = GaugeMetricFamily("rocketredis_store_memory_used_ratio", "used_memory / maxmemory of the master", labels=["node"])
    evicted = CounterMetricFamily("rocketredis_store_evicted_keys", "Keys the master evicted since it started", labels=["node"])
    for r in readings:
        if r.policy is not None:
            bad.add_metric([r.node], 1 if r.misconfigured else 0)
        if r.used_ratio is not None:
            ratio.add_metric([r.node], r.used_ratio)
        if r.evicted_keys is not None:
            evicted.add_metric([r.node], r.evicted_keys)
    yield bad
    yield ratio
    yield evicted


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
    port: int,
    url: str | None,
    namespace: str,
    *,
    health_timeout_s: float = 10.0,
    addr: str = "127.0.0.1",
    tier: TierUploader | None = None,
    watch: StoreWatch | None = None,
) -> MetricsServer:
    """Serve the namespace's metrics on ``http://addr:port/metrics`` (with the tier's series when
    ``tier``, the broker service's uploader, is given, and the store check's when ``watch``, its
    :class:`~scheduler.storewatch.StoreWatch`, is) until the returned server is closed (before,
    the server and its store connection lived until the process ended: a caller that was done with
    them could not let them go)."""
    registry = CollectorRegistry()
    store = Store(Connection(url, namespace))
    registry.register(StoreCollector(store, health_timeout_s, tier, watch))
    httpd, thread = start_http_server(port, addr=addr, registry=registry)
    return MetricsServer(registry, store, httpd, thread)
