"""Consumer offsets: in the store per (group, queue) for clustering, in a local file for broadcasting.

The offset of a queue is the next offset to consume. Consumers keep offsets in memory and persist
them every ``PERSIST_INTERVAL_S``, when a queue is taken away by rebalance, and at shutdown
[RocketMQ ``persistConsumerOffsetInterval``].
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import threading
from collections.abc import Iterable, Mapping
from typing import Protocol

from mq.connection import translate_errors
from mq.queue import MessageQueue
from mq.store import Store

#: Seconds between persisting offsets.
PERSIST_INTERVAL_S = 5.0
#: Environment variable naming the folder of broadcasting offset files.
OFFSET_DIR_ENV = "MQ_OFFSET_DIR"
#: Default folder of broadcasting offset files [RocketMQ ``~/.rocketmq_offsets``].
DEFAULT_OFFSET_DIR = pathlib.Path.home() / ".rocketredis_offsets"


class OffsetStore(Protocol):
    """Where a consumer's offsets live."""

    def read(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """Stored offsets of ``queues`` (queues without one are left out)."""
        ...

    def update(self, queue: MessageQueue, offset: int) -> None:
        """Remember ``offset`` for ``queue`` in memory."""
        ...

    def persist(self, queues: Iterable[MessageQueue] | None = None) -> None:
        """Write remembered offsets (of ``queues``, or all) to where they live."""
        ...

    def forget(self, queue: MessageQueue) -> None:
        """Drop the in-memory offset of a queue no longer consumed here."""
        ...

    def seed(self, offsets: Mapping[MessageQueue, int]) -> None:
        """Remember offsets known to be stored already (nothing to persist for them)."""
        ...


class RemoteOffsetStore:
    """Clustering offsets: field ``group`` of each queue's ``offsets`` hash, in the queue's slot."""

    def __init__(self, store: Store, group: str) -> None:
        self._store = store
        self._group = group
        self._table: dict[MessageQueue, int] = {}
        self._dirty: set[MessageQueue] = set()
        self._lock = threading.Lock()

    def read(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """Stored offsets of ``queues``."""
        return read_group_offsets(self._store, self._group, queues)

    def update(self, queue: MessageQueue, offset: int) -> None:
        """Remember ``offset`` for ``queue``."""
        with self._lock:
            if self._table.get(queue) != offset:
                self._table[queue] = offset
                self._dirty.add(queue)

    def persist(self, queues: Iterable[MessageQueue] | None = None) -> None:
        """One pipeline of HSETs for the offsets changed since the last persist."""
        wanted = None if queues is None else set(queues)
        with self._lock:
            chosen = {q: self._table[q] for q in self._dirty if wanted is None or q in wanted}
            self._dirty -= set(chosen)
        if chosen:
            try:
                write_group_offsets(self._store, self._group, chosen)
            except Exception:
                with self._lock:
                    self._dirty |= set(chosen)
                raise

    def forget(self, queue: MessageQueue) -> None:
        """Drop the in-memory offset of ``queue``."""
        with self._lock:
            self._table.pop(queue, None)
            self._dirty.discard(queue)

    def seed(self, offsets: Mapping[MessageQueue, int]) -> None:
        """Remember offsets known to be stored already."""
        with self._lock:
            self._table.update(offsets)


def read_group_offsets(store: Store, group: str, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
    """Committed offsets of ``group`` on ``queues`` (queues without one are left out)."""
    qs = list(queues)
    with translate_errors(store.conn.url, f"reading offsets of group {group!r}"):
        pipe = store.conn.client.pipeline(transaction=False)
        for q in qs:
            pipe.hget(store.queue_keys(q.topic, q.queue_id).offsets, group)
        values = pipe.execute()
    return {q: int(v) for q, v in zip(qs, values) if v is not None}


def write_group_offsets(store: Store, group: str, offsets: Mapping[MessageQueue, int]) -> None:
    """Store committed offsets of ``group``."""
    with translate_errors(store.conn.url, f"committing offsets of group {group!r}"):
        pipe = store.conn.client.pipeline(transaction=False)
        for q, offset in offsets.items():
            pipe.hset(store.queue_keys(q.topic, q.queue_id).offsets, group, int(offset))
        pipe.execute()


class LocalFileOffsetStore:
    """Broadcasting offsets: a JSON file per client, written atomically (temp file + rename).

    The file is ``$MQ_OFFSET_DIR/<namespace>/<group>/<client_id>.json`` (default folder
    ``~/.rocketredis_offsets``); a restarted client with the same ``client_id`` resumes from it.
    """

    def __init__(self, namespace: str, group: str, client_id: str) -> None:
        root = pathlib.Path(os.environ.get(OFFSET_DIR_ENV) or DEFAULT_OFFSET_DIR)
        safe_id = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in client_id)
        self.path = root / namespace / group / f"{safe_id}.json"
        self._lock = threading.Lock()
        self._table: dict[MessageQueue, int] = self._load()

    def _load(self) -> dict[MessageQueue, int]:
        try:
            raw = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return {MessageQueue(r["topic"], r["broker_name"], int(r["queue_id"])): int(r["offset"]) for r in raw}

    def read(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """Offsets of ``queues`` as last persisted or updated."""
        with self._lock:
            return {q: self._table[q] for q in queues if q in self._table}

    def update(self, queue: MessageQueue, offset: int) -> None:
        """Remember ``offset`` for ``queue``."""
        with self._lock:
            self._table[queue] = offset

    def persist(self, queues: Iterable[MessageQueue] | None = None) -> None:
        """Write every remembered offset to the file (all queues, whatever ``queues`` says)."""
        with self._lock:
            rows = [{"topic": q.topic, "broker_name": q.broker_name, "queue_id": q.queue_id, "offset": o}
                    for q, o in sorted(self._table.items())]  # fmt: skip
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".offsets-")
        with os.fdopen(fd, "w") as f:
            json.dump(rows, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def forget(self, queue: MessageQueue) -> None:
        """Broadcasting keeps every queue's offset: nothing to drop."""

    def seed(self, offsets: Mapping[MessageQueue, int]) -> None:
        """Remember starting offsets (written to the file at the next persist)."""
        with self._lock:
            self._table.update({q: o for q, o in offsets.items() if q not in self._table})
