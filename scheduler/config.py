"""``BrokerConfig``: every setting of the broker service, with RocketMQ's defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from mq.errors import MQClientError
from mq.store.replication import SyncReplicas
from mq.timer import DEFAULT_MESSAGE_DELAY_LEVEL, parse_delay_levels


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
        sync_replicas: replicas that must confirm the service's own message writes (timer delivery, the
            end of a transaction) [RocketMQ ``SYNC_MASTER`` when ≥ 1]; a write they do not confirm in
            time is kept on the master and logged.
            ``"all"``: every replica the master has.
        sync_replicas_timeout_ms: how long each such write waits for them, milliseconds.
        sync_flush: those writes also wait until they are fsynced to the master's AOF (and the
            replicas' when ``sync_replicas`` asks for some): ``WAITAOF``, Redis ≥ 7.2 with
            ``appendonly yes``; the service refuses to start on other servers.
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
    sync_replicas: int | Literal["all"] = 0
    sync_replicas_timeout_ms: int = 1000
    sync_flush: bool = False

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
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):  # nan passes "<= 0" and inf never elapses
                raise MQClientError(f"{name} must be a positive finite number, got {value!r}")
        if not all(isinstance(v, int) and v >= 1 for v in (self.transaction_check_max, self.timer_batch, self.timer_poll_ms)):
            raise MQClientError("transaction_check_max, timer_batch and timer_poll_ms must be whole numbers of at least 1")
