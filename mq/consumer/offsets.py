"""Consumer offsets: in the store per (group, queue) for clustering, in a local file for broadcasting.

The offset of a queue is the next offset to consume. Consumers commit with every pull (the
``pull-messages`` script stores the group's offset in the same call, as RocketMQ's
``FLAG_COMMIT_OFFSET``), every ``PERSIST_INTERVAL_S`` for queues whose offset moved since, when a
queue is given up, and at shutdown [RocketMQ ``persistConsumerOffsetInterval``]. A clustering commit
is guarded: it is written only while the store still says the queue is this client's.

Every method is an operation (:mod:`mq.store.ops`): the sync consumer core runs it with redis-py, the
asyncio one (:mod:`mq.aio`) with ``redis.asyncio`` — the same code for both.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import threading
from collections.abc import Iterable, Mapping
from typing import Protocol, TypeVar

from mq.model.queue import MessageQueue
from mq.store import Store
from mq.store.groups import NO_GUARD
from mq.store.ops import Op
from mq.store.store import StoreOps

T = TypeVar("T")

#: Seconds between persisting offsets.
PERSIST_INTERVAL_S = 5.0
#: Environment variable naming the folder of broadcasting offset files.
OFFSET_DIR_ENV = "MQ_OFFSET_DIR"
#: Default folder of broadcasting offset files [RocketMQ ``~/.rocketmq_offsets``].
DEFAULT_OFFSET_DIR = pathlib.Path.home() / ".rocketredis_offsets"


def at_once(value: T) -> Op[T]:
    """An operation that asks the store nothing: ``value`` (for parts whose work is local)."""
    yield from ()
    return value


class OffsetStore(Protocol):
    """Where a consumer's committed offsets live."""

    #: Whether commits may ride along with pulls (the store's copy), or live elsewhere (a file).
    in_store: bool

    def read(self, queues: Iterable[MessageQueue]) -> Op[dict[MessageQueue, int]]:
        """Committed offsets of ``queues`` (queues without one are left out)."""
        ...

    def commit(
        self, offsets: Mapping[MessageQueue, int], positions: Mapping[MessageQueue, tuple[int, str]] | None = None
    ) -> Op[set[MessageQueue]]:
        """Commit ``offsets`` now; returns the queues whose commit the store refused (no longer ours).

        ``positions``: the consumer's next offset of each queue and the fingerprint of the entry before
        it (:meth:`~mq.consumer.process_queue.ProcessQueue.position`); the store writes no offset beyond
        a queue's end or past a position on another history (D70)."""
        ...

    def seed(self, offsets: Mapping[MessageQueue, int]) -> Op[dict[MessageQueue, int]]:
        """Fix starting offsets of queues that have none yet; returns the offsets in force."""
        ...


class RemoteOffsetStore:
    """Clustering offsets: field ``group`` of each queue's ``offsets`` hash, in the queue's slot.

    Commits carry ``guard`` (see :mod:`mq.consumer.ownership`): "" writes unconditionally (manual
    assignment), "owner"/"lock" only while this client owns or locks the queue.
    """

    in_store = True

    def __init__(self, store: Store, group: str, client_id: str = "", guard: str = NO_GUARD) -> None:
        self._store = store
        self._group = group
        self._client_id = client_id
        self.guard = guard

    def read(self, queues: Iterable[MessageQueue]) -> Op[dict[MessageQueue, int]]:
        """Stored offsets of ``queues``."""
        return (yield from StoreOps.read_offsets.op(self._store, self._group, queues))

    def commit(
        self, offsets: Mapping[MessageQueue, int], positions: Mapping[MessageQueue, tuple[int, str]] | None = None
    ) -> Op[set[MessageQueue]]:
        """One pipeline of guarded commits (each checked against its position, D70)."""
        if not offsets:
            return set()
        done = yield from StoreOps.commit_offsets.op(
            self._store, self._group, offsets, guard=self.guard, client_id=self._client_id, positions=positions
        )
        return {q for q, ok in done.items() if not ok}

    def seed(self, offsets: Mapping[MessageQueue, int]) -> Op[dict[MessageQueue, int]]:
        """``HSETNX`` each: the first member to start a queue fixes where the whole group starts."""
        return (yield from StoreOps.seed_offsets.op(self._store, self._group, offsets)) if offsets else {}


class LocalFileOffsetStore:
    """Broadcasting offsets: a JSON file per client, written atomically (temp file + rename).

    The file is ``$MQ_OFFSET_DIR/<namespace>/<group>/<client_id>.json`` (default folder
    ``~/.rocketredis_offsets``); a restarted client with the same ``client_id`` resumes from it.
    """

    in_store = False

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

    def read(self, queues: Iterable[MessageQueue]) -> Op[dict[MessageQueue, int]]:
        """Offsets of ``queues`` as last persisted or updated."""
        with self._lock:
            return (yield from at_once({q: self._table[q] for q in queues if q in self._table}))

    def commit(
        self, offsets: Mapping[MessageQueue, int], positions: Mapping[MessageQueue, tuple[int, str]] | None = None
    ) -> Op[set[MessageQueue]]:
        """Remember ``offsets`` and write every remembered offset to the file (atomically; a small
        local write, done in place also by the asyncio consumer). ``positions`` are not checked: the
        file is this client's own."""
        return (yield from at_once(self._write(offsets)))

    def _write(self, offsets: Mapping[MessageQueue, int]) -> set[MessageQueue]:
        with self._lock:
            self._table.update(offsets)
            rows = [
                {"topic": q.topic, "broker_name": q.broker_name, "queue_id": q.queue_id, "offset": o}
                for q, o in sorted(self._table.items())
            ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".offsets-")
        with os.fdopen(fd, "w") as f:
            json.dump(rows, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        return set()

    def seed(self, offsets: Mapping[MessageQueue, int]) -> Op[dict[MessageQueue, int]]:
        """Remember starting offsets of queues without one (written at the next commit)."""
        with self._lock:
            for q, o in offsets.items():
                self._table.setdefault(q, o)
            return (yield from at_once({q: self._table[q] for q in offsets}))
