"""``BrokerConfig``: every setting of the broker service, with RocketMQ's defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from mq.errors import MQClientError
from mq.model.timer import DEFAULT_MESSAGE_DELAY_LEVEL, parse_delay_levels
from mq.store.replication import SyncReplicas


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of a broker service (the same for every replica of a namespace).

    Attributes:
        message_delay_level: the delay of each level [RocketMQ ``messageDelayLevel``].
        transaction_timeout_s: a half message is checked back after this long [``transactionTimeOut``].
        transaction_check_interval_s: how often half messages are checked [``transactionCheckInterval``].
        transaction_check_max: checks before an unresolved half message is rolled back [``transactionCheckMax``].
        transaction_reserve_h: an unresolved half message older than this is rolled back [72 h].
        file_reserved_time_h: messages older than this are removed, consumed or not [``fileReservedTime``];
            fractions of an hour are allowed.
        retention_interval_s: how often retention runs.
        timer_poll_ms: the longest the timer waits before looking for due messages again; bounds the
            lateness of delayed messages (RocketMQ 4.x checks every 100 ms, 5.x has 1 s precision).
        timer_batch: most messages moved per queue per delivery call.
        timer_sweep_interval_s: how often lost entries of the timer index are repaired.
        health_interval_s: how often the service reports itself healthy.
        health_timeout_s: a service silent this long counts as down (``mq broker --check``).
        cleanup_interval_s: how often dead clients are removed from group registries.
        stats_interval_s: how often the stats snapshot for ``Admin.broker_stats`` is taken.
        store_check_interval_s: how often each master's ``maxmemory-policy``, memory use and evicted
            keys are read (an ERROR is logged, once, when a policy lets Redis evict rocketredis's keys).
        sync_replicas: replicas that must confirm the service's own message writes (timer delivery, the
            end of a transaction) [RocketMQ ``SYNC_MASTER`` when ≥ 1]; a write they do not confirm in
            time is kept on the master and logged.
            ``"all"``: every replica the master has.
        sync_replicas_timeout_ms: how long each such write waits for them, milliseconds.
        sync_flush: those writes also wait until they are fsynced to the master's AOF (and the
            replicas' when ``sync_replicas`` asks for some): ``WAITAOF``, Redis ≥ 7.2 with
            ``appendonly yes``; the service refuses to start on other servers.
        tier_url: tiered storage (``file:///path`` or ``s3://bucket/prefix``; None: no tier): each
            queue's older messages go into Parquet segments there and are read back at their offsets;
            S3 credentials come from the environment, never from here. Published to the namespace so
            clients find it.
        hot_retention_s: with a tier, Redis keeps a message this long once it is tiered [Kafka
            ``local.retention.ms``]; None: ``file_reserved_time_h``.
        hot_retention_bytes: with a tier, Redis keeps at most about this much of each queue's log,
            bytes (its ``MEMORY USAGE``) [Kafka ``local.retention.bytes``]; None: no bound.
        tier_interval_s: how often the uploader looks at every queue.
        tier_segment_messages: most messages in one segment.
        tier_segment_bytes: most message bytes (bodies) in one segment.
        tier_segment_age_s: a smaller segment is cut once its oldest message waited this long.
        tier_lease_s: how long a broker service holds a queue's upload (renewed each run; a crashed
            holder's queue waits this long for another replica).
        tier_sweep_interval_s: how often files no manifest lists, and segments past
            ``file_reserved_time_h``, are removed from the tier.
        tier_orphan_grace_s: an unlisted file is removed once it is this old.
    """

    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    transaction_timeout_s: float = 6.0
    transaction_check_interval_s: float = 60.0
    transaction_check_max: int = 15
    transaction_reserve_h: float = 72.0
    file_reserved_time_h: float = 72.0
    retention_interval_s: float = 60.0
    timer_poll_ms: int = 20
    timer_batch: int = 1000
    timer_sweep_interval_s: float = 30.0
    health_interval_s: float = 2.0
    health_timeout_s: float = 10.0
    cleanup_interval_s: float = 10.0
    stats_interval_s: float = 10.0
    store_check_interval_s: float = 30.0
    sync_replicas: int | Literal["all"] = 0
    sync_replicas_timeout_ms: int = 1000
    sync_flush: bool = False
    tier_url: str | None = None
    hot_retention_s: float | None = None
    hot_retention_bytes: int | None = None
    tier_interval_s: float = 10.0
    tier_segment_messages: int = 100_000
    tier_segment_bytes: int = 64 * 1024 * 1024
    tier_segment_age_s: float = 600.0
    tier_lease_s: float = 300.0
    tier_sweep_interval_s: float = 600.0
    tier_orphan_grace_s: float = 3600.0

    def __post_init__(self) -> None:
        parse_delay_levels(self.message_delay_level)  # raises on a bad level
        SyncReplicas(self.sync_replicas, self.sync_replicas_timeout_ms, self.sync_flush)  # raises on bad values
        for name in (
            "transaction_timeout_s",
            "transaction_check_interval_s",
            "transaction_reserve_h",
            "file_reserved_time_h",
            "retention_interval_s",
            "timer_sweep_interval_s",
            "health_interval_s",
            "health_timeout_s",
            "cleanup_interval_s",
            "stats_interval_s",
            "store_check_interval_s",
            "tier_interval_s",
            "tier_segment_age_s",
            "tier_lease_s",
            "tier_sweep_interval_s",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):  # nan passes "<= 0" and inf never elapses
                raise MQClientError(f"{name} must be a positive finite number, got {value!r}")
        if not all(isinstance(v, int) and v >= 1 for v in (self.transaction_check_max, self.timer_batch, self.timer_poll_ms)):
            raise MQClientError("transaction_check_max, timer_batch and timer_poll_ms must be whole numbers of at least 1")
        if self.tier_segment_messages < 1 or self.tier_segment_bytes < 1 or self.tier_orphan_grace_s < 0:
            raise MQClientError("tier_segment_messages and tier_segment_bytes must be at least 1, tier_orphan_grace_s at least 0")
        for name in ("hot_retention_s", "hot_retention_bytes"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise MQClientError(f"{name} must be a positive finite number or None, got {value!r}")
        if (self.hot_retention_s is not None or self.hot_retention_bytes is not None) and not self.tier_url:
            raise MQClientError("hot_retention_s and hot_retention_bytes need a tier: set tier_url too")
        if self.tier_url:
            from mq.tier.location import open_tier

            open_tier(self.tier_url)  # raises on a bad URL, before the service starts
