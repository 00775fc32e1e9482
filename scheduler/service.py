"""``BrokerService``: the timed work of a namespace, run by APScheduler [RocketMQ broker's
``ScheduleMessageService``, ``TransactionalMessageCheckService`` and clean-up services].

Jobs (each ``coalesce=True``, ``max_instances=1``):

- timer delivery: a watchdog that keeps the delivery thread running;
- transaction check-back every ``transaction_check_interval_s``;
- the timer index sweep;
- retention;
- removal of dead clients from group registries (expired orderly locks vanish by their Redis TTL);
- a stats snapshot for ``Admin.broker_stats`` (topic totals, lag, DLQ sizes, backlogs);
- with ``tier_url``: the tier uploader (segments, then hot retention in place of retention) and its
  sweep (unrecorded files, segments past ``file_reserved_time_h``), see :mod:`scheduler.tier`;
- a health beat read by ``mq broker --check``;
- the store check every ``store_check_interval_s``: each master's ``maxmemory-policy``, memory use
  and evictions, logged once per change (see :mod:`scheduler.storewatch`) and shown as metrics.

Several services may run against one namespace: delivery is one atomic script per queue, retention
and clean-up are idempotent, so replicas add availability and never deliver twice.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from mq.consumer.registry import HEARTBEAT_TIMEOUT_S
from mq.errors import MQError
from mq.producer.producer import sync_socket_timeout_s
from mq.store import Store
from mq.store.connection import Connection, mask_url, translate_errors
from mq.store.replication import SyncReplicas
from mq.store.tier import TIER_URL_SETTING
from scheduler.config import BrokerConfig
from scheduler.retention import apply_retention
from scheduler.stats import read_figures, save_snapshot
from scheduler.storewatch import NodeReading, StoreWatch
from scheduler.tier import TierUploader
from scheduler.timers import TimerDelivery
from scheduler.transactions import TransactionChecker

log = logging.getLogger("scheduler")


class BrokerService:
    """Runs the broker jobs for one namespace until :meth:`shutdown`.

    Args:
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix of the deployment.
        config: settings (delay levels, retention, transaction check-back, …).
    """

    def __init__(self, url: str | None = None, namespace: str = "mq", config: BrokerConfig | None = None) -> None:
        self.config = config or BrokerConfig()
        self.id = f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:6]}"
        sync = SyncReplicas(self.config.sync_replicas, self.config.sync_replicas_timeout_ms, self.config.sync_flush)
        self._conn = Connection(url, namespace, socket_timeout_s=sync_socket_timeout_s(sync))
        self._store = Store(self._conn, sync=sync)
        self._stop = threading.Event()
        self.timers = TimerDelivery(
            self._store, poll_ms=self.config.timer_poll_ms, batch=self.config.timer_batch, stop=self._stop
        )
        self.transactions = TransactionChecker(self._store, self.config)
        #: the tier uploader (None without ``tier_url``); its ``step`` hook is for fault tests
        self.tier: TierUploader | None = None
        if self.config.tier_url:
            from mq.tier.location import open_tier

            self.tier = TierUploader(self._store, self.config, open_tier(self.config.tier_url), self.id)
        #: what the periodic store check saw (the metrics endpoint shows it)
        self.store_watch = StoreWatch()
        self._scheduler: BackgroundScheduler | None = None

    def __repr__(self) -> str:
        return f"BrokerService(id={self.id!r}, {mask_url(self._conn.url)!r}, namespace={self._conn.namespace!r})"

    def start(self) -> BrokerService:
        """Publish the namespace settings and start the jobs. Returns self."""
        if self._scheduler is not None:
            return self
        self._store.check_writes()  # a server that cannot confirm as asked is refused before any write
        settings: dict[str, object] = {
            "message_delay_level": self.config.message_delay_level,
            "transaction_timeout_s": self.config.transaction_timeout_s,
        }
        if self.config.tier_url:
            settings[TIER_URL_SETTING] = self.config.tier_url  # a place, never a credential (open_tier refuses them)
        self._store.publish_settings(settings)
        self._beat()
        told = self._check_store()
        # a failed check never keeps the service from starting; the policy the start's checks just
        # logged is not logged a second time by the watch's first reading
        self._guard(self._watch_store, told)()
        c = self.config
        scheduler = BackgroundScheduler(job_defaults={"coalesce": True, "max_instances": 1})
        scheduler.add_job(
            self.timers.ensure_running,
            "interval",
            seconds=1.0,
            id="timer-delivery",
            misfire_grace_time=1,
            next_run_time=datetime.now(),
        )
        scheduler.add_job(
            self._guard(self.timers.sweep),
            "interval",
            seconds=c.timer_sweep_interval_s,
            id="timer-sweep",
            misfire_grace_time=_grace(c.timer_sweep_interval_s),
            next_run_time=datetime.now(),
        )
        guarded: list[tuple[Callable[[], None], float, str]] = [
            (self._guard(self.transactions.run), c.transaction_check_interval_s, "transaction-check"),
            (self._guard(self.transactions.index.sweep), c.timer_sweep_interval_s, "transaction-sweep"),
            (self._guard(self._remove_dead_clients), c.cleanup_interval_s, "dead-clients"),
            (self._guard(self._snapshot), c.stats_interval_s, "stats"),
            (self._guard(self._beat), c.health_interval_s, "health"),
            (self._guard(self._watch_store), c.store_check_interval_s, "store-check"),
        ]
        if self.tier is None:
            guarded.append(
                (self._guard(apply_retention, self._store, c.file_reserved_time_h), c.retention_interval_s, "retention")
            )
        else:  # the uploader trims Redis itself, never past what the tier holds
            guarded.append((self._guard(self.tier.run), c.tier_interval_s, "tier-upload"))
            guarded.append((self._guard(self.tier.sweep, c.tier_orphan_grace_s), c.tier_sweep_interval_s, "tier-sweep"))
        for job, seconds, job_id in guarded:
            scheduler.add_job(job, "interval", seconds=seconds, id=job_id, misfire_grace_time=_grace(seconds))
        scheduler.start()
        self._scheduler = scheduler
        log.info("broker service %s started on %s", self.id, mask_url(self._conn.url))
        return self

    def shutdown(self) -> None:
        """Stop the jobs (a delivery in progress finishes its current step) and leave the health set."""
        if self._scheduler is None:
            self._conn.close()
            return
        self._stop.set()
        self._scheduler.shutdown(wait=True)
        self._scheduler = None
        self.timers.join()
        try:
            self._store.leave_brokers(self.id)
        except MQError as e:
            log.warning("could not remove broker %s from the health set: %s", self.id, e)
        self._conn.close()

    def __enter__(self) -> BrokerService:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.shutdown()

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Callable[[], None]:
        """A job body that logs store errors instead of killing the job."""

        def job() -> None:
            try:
                fn(*args)
            except MQError as e:
                log.warning("broker job %s failed (retried at its next run): %s", getattr(fn, "__name__", fn), e)

        return job

    def _check_store(self) -> bool:
        """Run ``mq doctor``'s checks once and log them (a FAIL is logged as an error; the service still
        starts). Returns whether they logged the eviction policy."""
        from mq.operator.doctor import check, log_findings

        try:
            findings = check(self._conn.url, self._conn.namespace, keys=False)
        except Exception as e:  # a check never keeps the service from starting
            log.warning("store checks could not run: %s", e)
            return False
        log_findings(findings, log, self._conn.url)
        return any(f.check.startswith("maxmemory-policy") for f in findings)

    def _watch_store(self, policy_told: bool = False) -> None:
        """Read every master's eviction policy, memory use and eviction count; log what changed (not the
        policy when ``policy_told``: the start's checks logged it)."""
        from mq.store.health import NOT_ALLOWED, Health

        if self._conn.kind == "memory":
            return
        health = Health(self._conn)
        readings = []
        with translate_errors(self._conn.url, "checking the store's eviction policy and memory"):
            for node in health.masters():
                policy = health.config(node, "maxmemory-policy")
                memory, stats = health.info(node, "memory"), health.info(node, "stats")
                readings.append(
                    NodeReading(
                        node.name,
                        None if policy == NOT_ALLOWED else policy,
                        _int_of(memory, "used_memory"),
                        _int_of(memory, "maxmemory"),
                        _int_of(stats, "evicted_keys"),
                    )
                )
        told = self.store_watch.observe(readings, policy_told=True) if policy_told else self.store_watch.observe(readings)
        for level, message in told:
            log.log(level, "%s", message)

    def _snapshot(self) -> None:
        save_snapshot(self._store, read_figures(self._store), self.id)

    def _beat(self) -> None:
        self._store.beat(self.id, int(time.time() * 1000))

    def _remove_dead_clients(self) -> None:
        """Remove clients silent for the heartbeat timeout, by the Redis clock (remove-dead-clients.lua)."""
        self._store.remove_dead_clients(self._store.groups(), int(HEARTBEAT_TIMEOUT_S * 1000))


def healthy_brokers(url: str | None, namespace: str, timeout_s: float = BrokerConfig.health_timeout_s) -> list[str]:
    """Ids of the broker services that reported within ``timeout_s``."""
    conn = Connection(url, namespace)
    try:
        return Store(conn).brokers_since(int((time.time() - timeout_s) * 1000))
    finally:
        conn.close()


def _int_of(info: dict[str, Any] | str, field: str) -> int | None:
    """``INFO`` field ``field`` as an int; None when the section could not be read or lacks it."""
    value = info.get(field) if isinstance(info, dict) else None
    return int(value) if isinstance(value, (int, float, str)) and str(value).lstrip("-").isdigit() else None


def _grace(interval_s: float) -> int:
    """APScheduler's misfire grace (whole seconds, at least 1): a late run within one interval still runs."""
    return max(1, int(interval_s))
