"""The client registry: who is alive in a group, for rebalance and ``Admin.consumer_connections``.

Each client heartbeats every ``HEARTBEAT_INTERVAL_S`` with one script call that also removes clients
silent for ``HEARTBEAT_TIMEOUT_S`` and returns the live client ids, so a member that joins, leaves
cleanly (unregisters at once) or dies is seen by the others within a second of the change (or of
its timeout) [RocketMQ: heartbeat 30 s, dead after 120 s, rebalance every 20 s].
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from mq.errors import MQBrokerError, MQClientError
from mq.model.group import GroupConfig
from mq.store import Store
from mq.store.ops import Op
from mq.store.store import StoreOps

log = logging.getLogger("mq.consumer")

#: Seconds between heartbeats (each also reads the group's live members).
HEARTBEAT_INTERVAL_S = 1.0
#: Seconds without a heartbeat after which a client counts as dead.
HEARTBEAT_TIMEOUT_S = 6.0
#: Seconds after which the client info is sent again even when unchanged (repairs a lost write).
INFO_REFRESH_S = 30.0
#: Seconds between refreshes of a member's published runtime state (``ClientInfo.status``).
STATUS_INTERVAL_S = 10.0


@dataclass
class ClientInfo:
    """A registered client [RocketMQ ``ConsumerConnection``/``Connection``].

    Attributes:
        client_id: unique id of the client (``host@pid@random`` by default).
        host: host name.
        pid: process id.
        subscriptions: topic → filter expression.
        last_heartbeat_ms: server time of the last heartbeat, epoch ms.
        message_model: CLUSTERING or BROADCASTING.
        kind: "push", "pull", "simple" or "producer".
        status: the member's runtime state, refreshed every ``STATUS_INTERVAL_S`` [RocketMQ
            ``consumerStatus``]: per queue (``"topic:queue"``) the cached messages and bytes, next
            offset, committed offset and last pull (epoch ms); the consume rate (msg/s) over the last
            interval; whether the group is paused.
    """

    client_id: str
    host: str
    pid: int
    subscriptions: dict[str, str] = field(default_factory=dict)
    last_heartbeat_ms: int = 0
    message_model: str = "CLUSTERING"
    kind: str = "push"
    status: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_this_process(cls, client_id: str, **fields: Any) -> ClientInfo:
        """The info of a client running in this process (host name and pid filled in)."""
        return cls(client_id, socket.gethostname(), os.getpid(), **fields)


class Beat(NamedTuple):
    """What a heartbeat tells a member about its group."""

    members: list[str]
    config: GroupConfig | None
    reset_seq: int


class Registry:
    """Registration of one client in one group."""

    def __init__(self, store: Store, group: str, info: ClientInfo) -> None:
        self._store = store
        self._group = group
        self.info = info
        self._sent_info = ""
        self._sent_at = 0.0
        #: Server time of the last heartbeat, epoch ms.
        self.last_now_ms = 0

    def heartbeat(self) -> Op[Beat]:
        """Say this client is alive; returns every live client id (sorted), the group's config and
        its offset-reset counter (an operation: see :mod:`mq.store.ops`).

        The client info travels only when it changed (or every ``INFO_REFRESH_S``).
        """
        info = json.dumps({k: v for k, v in asdict(self.info).items() if k != "last_heartbeat_ms"})
        fresh = info != self._sent_info or time.monotonic() - self._sent_at > INFO_REFRESH_S
        beat = yield from StoreOps.heartbeat.op(
            self._store, self._group, self.info.client_id, info if fresh else "", int(HEARTBEAT_TIMEOUT_S * 1000)
        )
        if fresh:
            self._sent_info, self._sent_at = info, time.monotonic()
        self.last_now_ms = beat.now_ms
        return Beat(beat.members, parse_group_config(self._group, beat.config), beat.reset_seq)

    def unregister(self) -> Op[None]:
        """Leave the group at once (a clean shutdown), so the others rebalance without waiting."""
        with contextlib.suppress(MQBrokerError):
            yield from StoreOps.unregister_client.op(self._store, self._group, self.info.client_id)


def parse_group_config(group: str, raw: str | None) -> GroupConfig | None:
    """A stored group config, or None (absent, or unreadable: logged, and the consumer's own settings apply)."""
    if not raw:
        return None
    try:
        return GroupConfig.from_json(raw)
    except (ValueError, TypeError, MQClientError) as e:
        log.error("the stored config of group %s cannot be read (%s); the consumers' own settings apply", group, e)
        return None


def group_clients(store: Store, group: str) -> list[ClientInfo]:
    """The live clients of ``group`` (heartbeat within the timeout), sorted by client id."""
    return live_clients(*store.group_clients_raw(group))


def groups_clients(store: Store, groups: list[str]) -> dict[str, list[ClientInfo]]:
    """:func:`group_clients` of each of ``groups``, read in one pipeline."""
    return {g: live_clients(raw, last) for g, (raw, last) in zip(groups, store.groups_clients_raw(groups))}


def live_clients(raw: dict[str, str], last: dict[str, int]) -> list[ClientInfo]:
    """The clients of a group's registry (client id → info JSON, client id → last heartbeat ms) that beat
    within the timeout, sorted by client id."""
    oldest = time.time() * 1000 - HEARTBEAT_TIMEOUT_S * 1000
    clients = []
    for cid, value in raw.items():
        data = json.loads(value)
        info = ClientInfo(**{k: v for k, v in data.items() if k in ClientInfo.__dataclass_fields__})
        info.last_heartbeat_ms = last.get(cid, 0)
        if info.last_heartbeat_ms >= oldest:
            clients.append(info)
    return sorted(clients, key=lambda c: c.client_id)


def groups(store: Store) -> list[str]:
    """Every group that ever registered (or was created) in the namespace, sorted."""
    return store.groups()
