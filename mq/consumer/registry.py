"""The client registry: who is alive in a group, for rebalance and ``Admin.consumer_connections``.

Each client heartbeats every ``HEARTBEAT_INTERVAL_S`` with one script call that also removes clients
silent for ``HEARTBEAT_TIMEOUT_S`` and returns the live client ids, so a member that joins, leaves
cleanly (unregisters at once) or dies is seen by the others within a second of the change (or of
its timeout) [RocketMQ: heartbeat 30 s, dead after 120 s, rebalance every 20 s].
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from mq.connection import translate_errors
from mq.errors import MQBrokerError
from mq.store import Store, scripts

#: Seconds between heartbeats (each also reads the group's live members).
HEARTBEAT_INTERVAL_S = 1.0
#: Seconds without a heartbeat after which a client counts as dead.
HEARTBEAT_TIMEOUT_S = 6.0
#: Seconds after which the client info is sent again even when unchanged (repairs a lost write).
INFO_REFRESH_S = 30.0


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
    """

    client_id: str
    host: str
    pid: int
    subscriptions: dict[str, str] = field(default_factory=dict)
    last_heartbeat_ms: int = 0
    message_model: str = "CLUSTERING"
    kind: str = "push"

    @classmethod
    def of_this_process(cls, client_id: str, **fields: Any) -> ClientInfo:
        """The info of a client running in this process (host name and pid filled in)."""
        return cls(client_id, socket.gethostname(), os.getpid(), **fields)


def new_client_id() -> str:
    """A client id unique across hosts and processes, readable in admin output."""
    return f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:8]}"


class Registry:
    """Registration of one client in one group."""

    def __init__(self, store: Store, group: str, info: ClientInfo) -> None:
        self._store = store
        self._group = group
        self.info = info
        self._keys = store.keys.group(group)
        self._sent_info = ""
        self._sent_at = 0.0

    def heartbeat(self) -> tuple[int, list[str]]:
        """Say this client is alive; returns the server time (ms) and every live client id, sorted.

        The client info travels only when it changed (or every ``INFO_REFRESH_S``).
        """
        info = json.dumps({k: v for k, v in asdict(self.info).items() if k != "last_heartbeat_ms"})
        fresh = info != self._sent_info or time.monotonic() - self._sent_at > INFO_REFRESH_S
        argv = [self.info.client_id, info if fresh else "", int(HEARTBEAT_TIMEOUT_S * 1000)]
        with translate_errors(self._store.conn.url, f"heartbeat of group {self._group!r}"):
            reply = scripts.run(self._store.conn.client, "heartbeat", [self._keys.clients, self._keys.info], argv)
        if fresh:
            self._sent_info, self._sent_at = info, time.monotonic()
        return int(reply[0]), sorted(c.decode() if isinstance(c, bytes) else str(c) for c in reply[1:])

    def register(self) -> tuple[int, list[str]]:
        """First heartbeat, and record the group's name for ``mq group list``."""
        with translate_errors(self._store.conn.url, f"registering in group {self._group!r}"):
            self._store.conn.client.sadd(self._store.keys.groups, self._group)
        return self.heartbeat()

    def unregister(self) -> None:
        """Leave the group at once (a clean shutdown), so the others rebalance without waiting."""
        with contextlib.suppress(MQBrokerError), translate_errors(self._store.conn.url, "unregistering"):
            pipe = self._store.conn.client.pipeline(transaction=False)
            pipe.zrem(self._keys.clients, self.info.client_id)
            pipe.hdel(self._keys.info, self.info.client_id)
            pipe.execute()


def group_clients(store: Store, group: str) -> list[ClientInfo]:
    """The live clients of ``group`` (heartbeat within the timeout), sorted by client id."""
    keys = store.keys.group(group)
    with translate_errors(store.conn.url, f"reading clients of group {group!r}"):
        pipe = store.conn.client.pipeline(transaction=False)
        pipe.hgetall(keys.info)
        pipe.zrange(keys.clients, 0, -1, withscores=True)
        raw, beats = pipe.execute()
    oldest = time.time() * 1000 - HEARTBEAT_TIMEOUT_S * 1000
    last = {cid.decode(): int(score) for cid, score in beats}
    clients = []
    for cid, value in raw.items():
        info = ClientInfo(**json.loads(value))
        info.last_heartbeat_ms = last.get(cid.decode(), 0)
        if info.last_heartbeat_ms >= oldest:
            clients.append(info)
    return sorted(clients, key=lambda c: c.client_id)


def groups(store: Store) -> list[str]:
    """Every group that ever registered in the namespace, sorted."""
    with translate_errors(store.conn.url, "listing groups"):
        return sorted(g.decode() for g in store.conn.client.smembers(store.keys.groups))
