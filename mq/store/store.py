"""The store: every read and write of messages, queues and topic configs goes through here.

One :class:`Store` wraps one :class:`~mq.store.connection.Connection`. Writes that must be atomic are Lua
scripts over one queue's keys (one hash slot); views over many queues are pipelined, which redis-py
groups by node on a cluster.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import NoScriptError

from mq.errors import (
    MessageFencedError,
    MQBrokerError,
    QueueNotWritableError,
    ReplicaAckTimeout,
    StoreEvictedError,
    TopicNotFoundError,
    evicted_message,
)
from mq.keys import Keys, key_index_offset, key_index_range, stream_id, timer_member
from mq.model.message import Duplicate, MessageExt
from mq.model.topic import QueueStats, TopicConfig
from mq.store import codec, lane, scripts
from mq.store.admin import AdminOps
from mq.store.base import ScriptCall, StoreBase, all_or_raise
from mq.store.broker import BrokerOps
from mq.store.connection import REDIS_ERRORS
from mq.store.groups import GroupOps, PullRequest, PullResult
from mq.store.lite import LiteOps
from mq.store.ops import Cmd, Op, SyncRunner, operation
from mq.store.proxy import ProxyOps
from mq.store.recall import RecallOps
from mq.store.recovery import RecoveryOps
from mq.store.tier import TierOps
from mq.store.trace import TraceOps
from mq.store.transactions import TransactionOps
from mq.store.views import ViewOps

log = logging.getLogger("mq.store")

#: A field of the topics hash no topic can have (":" is not allowed in names): the permission probe.
TOPICS_PROBE_FIELD = ":permission-probe"

__all__ = ["MessageOps", "PullRequest", "PullResult", "Store", "StoreOps", "Trimmed", "check_put_result", "decode_half", "pairs"]


class MessageOps(StoreBase):
    """Topics and messages: configs, puts, pending (delayed and half) messages, reads and lookups."""

    # -- topics ---------------------------------------------------------------------------------

    @operation
    def topic(self, name: str) -> Op[TopicConfig | None]:
        """The config of topic ``name``, or None when it does not exist."""
        with self._errors(f"reading topic {name!r}"):
            raw = yield Cmd(lambda c: c.hget(self.keys.topics, name))
        return _config_from_stored(raw)[0] if raw else None

    @operation
    def topics(self) -> Op[list[TopicConfig]]:
        """Every topic of the namespace, sorted by name."""
        with self._errors("listing topics"):
            raw = yield Cmd(lambda c: c.hgetall(self.keys.topics))
        return sorted((_config_from_stored(v)[0] for v in raw.values()), key=lambda c: c.name)

    @operation
    def save_topic(self, config: TopicConfig, *, create_only: bool = False) -> Op[None]:
        """Create or update a topic: queue flags first, then the config producers read.

        Queues beyond the new counts keep their messages and offsets (they become unreadable and
        unwritable), so shrinking loses nothing and growing back continues the offsets. A new topic
        is added with ``HSETNX`` (allowed to the ``client`` ACL role); changing an existing one needs
        ``HSET`` on the topics hash (the ``admin`` role). With ``create_only`` an existing topic (or
        one created meanwhile by someone else) is left as it is.
        """
        with self._errors(f"saving topic {config.name!r}"):
            raw = yield Cmd(lambda c: c.hget(self.keys.topics, config.name))
            if raw is not None and create_only:
                return
            if raw is not None:
                yield from self._probe_topics_write()  # an update: refused here, before any queue flag changes
            span = max(config.queue_count, _config_from_stored(raw)[1] if raw else 0)
            yield from MessageOps.restore_queues.op(self, config, span)
            stored = json.dumps(json.loads(config.to_json()) | {"span": span}, separators=(",", ":"))
            if raw is None and ((yield Cmd(lambda c: c.hsetnx(self.keys.topics, config.name, stored))) or create_only):
                return
            (yield Cmd(lambda c: c.hset(self.keys.topics, config.name, stored)))

    @operation
    def restore_queues(self, config: TopicConfig, span: int) -> Op[list[tuple[int, int]]]:
        """Set the permission flags of queues ``0..span-1`` of ``config``'s topic and raise each queue's
        seq to what its log and its groups' offsets hold (``restore-queue``: a meta Redis evicted comes
        back with its offset, never a lower one); ``(seq before or -1, seq after)`` per queue."""
        calls: list[ScriptCall] = [
            (
                "restore-queue",
                self.queue_keys(config.name, q).restore(),
                [int(config.writable(q)), int(config.readable(q)), config.dedup_window_s * 1000],
            )
            for q in range(span)
        ]
        replies = all_or_raise((yield from self._scripts(calls, f"saving the queues of topic {config.name!r}")))
        return [(int(r[0]), int(r[1])) for r in replies]

    def _probe_topics_write(self) -> Op[None]:
        """Fail with the caller's missing permission before an admin change writes anything: ``HDEL`` of a
        field no topic can have is a write that changes nothing (the ``client`` role may not write there)."""
        (yield Cmd(lambda c: c.hdel(self.keys.topics, TOPICS_PROBE_FIELD)))

    @operation
    def delete_topic(self, name: str) -> Op[bool]:
        """Delete a topic and every message it stores. Returns False when it did not exist.

        The queues' keys go first, the config last: a caller without the permission (a ``client``
        ACL user: no ``UNLINK``) is refused at the first command and nothing changes, and a failure
        half-way leaves the config, so calling again finishes the job.
        """
        with self._errors(f"deleting topic {name!r}"):
            raw = yield Cmd(lambda c: c.hget(self.keys.topics, name))
            if not raw:
                return False
            yield from self._probe_topics_write()

            def unlink(pipe: Any) -> None:
                for qid in range(_config_from_stored(raw)[1]):
                    for key in self.queue_keys(name, qid).all():  # one key per command: cluster pipelines need it
                        pipe.execute_command("UNLINK", key)  # not unlink(): a coroutine on asyncio cluster pipelines

            all_or_raise((yield from self._pipeline(unlink, f"deleting topic {name!r}")))
            (yield Cmd(lambda c: c.hdel(self.keys.topics, name)))
        return True

    # -- messages -------------------------------------------------------------------------------

    @operation
    def put(self, topic: str, queue_id: int, encoded: Sequence[Sequence[Any]], *, copies: bool = False) -> Op[tuple[int, int]]:
        """Append encoded messages (see :func:`codec.encode`) to one queue atomically.

        A put whose first msg id the queue holds already stores nothing and answers where it is, and
        one a producer retry fenced is refused (D140) — unless ``copies``: copies of stored messages
        under their own ids (retries, dead letters, resends), which may meet their id again.

        Returns:
            ``(first_offset, store_timestamp_ms)`` — a :class:`Duplicate` (the first send's, with its
            msg id) when a message's dedup id was seen in the queue's window and nothing was stored.

        Raises:
            TopicNotFoundError: the queue does not exist.
            QueueNotWritableError: the queue takes no new messages.
            MQBrokerError: the store failed.
        """
        try:
            result = yield from self._write(
                "put-messages", _put_keys(self.keys.namespace, topic, queue_id), _put_argv(encoded, copies=copies)
            )
        except ReplicaAckTimeout as e:
            e.result = check_put_result(topic, queue_id, e.result)
            raise
        except REDIS_ERRORS:  # translated here, not by a context manager around every send (D53)
            with self._errors(f"sending to {topic!r} queue {queue_id}"):
                raise
        return check_put_result(topic, queue_id, result)

    @operation
    def fence(self, topic: str, queue_id: int, msg_id: str, ttl_ms: int) -> Op[int]:
        """A producer retry's look at the queue of an attempt whose outcome it does not know (D140):
        the offset of ``msg_id`` when it is stored there, else -1 — and then ``msg_id`` is fenced on the
        queue for ``ttl_ms``: a put of it arriving later is refused (:class:`MessageFencedError`)."""
        with self._errors(f"looking for message {msg_id} in {topic!r} queue {queue_id}"):
            try:
                result = yield from self._write("fence-message", self.queue_keys(topic, queue_id).fence(), [msg_id, int(ttl_ms)])
            except ReplicaAckTimeout as e:  # in force on the master, which is where a late put would run
                log.warning("fence of %s in %r queue %d: %s", msg_id, topic, queue_id, e)
                result = e.result
        return int(result)

    @operation
    def put_many(self, puts: Sequence[tuple[str, int, Sequence[Sequence[Any]]]]) -> Op[list[tuple[int, int] | Exception]]:
        """Several :meth:`put` calls in one pipeline; each slot holds a result or the exception."""
        namespace = self.keys.namespace
        calls = [("put-messages", _put_keys(namespace, t, q), _put_argv(e)) for t, q, e in puts]
        with self._errors("sending a pipeline of messages"):
            results = yield from StoreBase.write_scripts.op(self, calls)
        return self._put_results(puts, results)

    def _put_results(
        self, puts: Sequence[tuple[str, int, Sequence[Sequence[Any]]]], results: Sequence[Any]
    ) -> list[tuple[int, int] | Exception]:
        """:meth:`put_many`'s result of each put from its script reply (or exception)."""
        out: list[tuple[int, int] | Exception] = []
        for (topic, qid, _), result in zip(puts, results):
            try:
                if isinstance(result, ReplicaAckTimeout):
                    result.result = check_put_result(topic, qid, result.result)
                    out.append(result)
                    continue
                if isinstance(result, Exception):
                    with self._errors(f"sending to {topic!r} queue {qid}"):
                        raise result
                out.append(check_put_result(topic, qid, result))
            except Exception as e:  # each caller gets its own error
                out.append(e)
        return out

    def put_pipeline(self) -> PutPipeline | None:
        """A :class:`PutPipeline` over a connection of its own, or None where there is none (replicas to
        wait for, a cluster, the embedded store, a single-connection client): use :meth:`put_many`.
        Its methods run as this store's do: at once (:class:`Store`) or awaited (``AsyncStore``)."""
        if self.sync.enabled:
            return None
        pipe = lane.pipe_lane_of(self._client)
        return PutPipeline(self, pipe) if pipe is not None else None

    @operation
    def put_delayed(self, topic: str, queue_id: int, encoded: Sequence[Any], due_ms: int) -> Op[str]:
        """Keep one encoded message in a queue's timer until ``due_ms`` (then index the queue).

        Returns its entry id in the queue's timer (what a recall handle names, :mod:`mq.model.recall`).

        Raises:
            TopicNotFoundError / QueueNotWritableError: as :meth:`put`.
        """
        keys = self.queue_keys(topic, queue_id)
        return (yield from self._put_pending(topic, queue_id, encoded, due_ms, keys.delayed, keys.timer, self.keys.timers))

    @operation
    def put_half(self, topic: str, queue_id: int, encoded: Sequence[Any], first_check_ms: int) -> Op[str]:
        """Store a transaction's half message (invisible) and index its queue for check-backs.

        Returns the half id. Raises as :meth:`put` for a missing or unwritable queue.
        """
        keys = self.queue_keys(topic, queue_id)
        return (yield from self._put_pending(topic, queue_id, encoded, first_check_ms, keys.half, keys.halfidx, self.keys.halves))

    def _put_pending(
        self, topic: str, queue_id: int, encoded: Sequence[Any], at_ms: int, stream: str, schedule: str, index: str
    ) -> Op[str]:
        unconfirmed: ReplicaAckTimeout | None = None
        with self._errors(f"storing a pending message in {topic!r} queue {queue_id}"):
            try:
                result = yield from self._write(
                    "put-pending", [self.queue_keys(topic, queue_id).meta, stream, schedule], [int(at_ms), *encoded[1:]]
                )
            except ReplicaAckTimeout as e:
                result, unconfirmed = e.result, e
            if result == scripts.QUEUE_MISSING:  # the refusal path only: is the queue's log there without it?
                logged = yield Cmd(lambda c: c.exists(self.queue_keys(topic, queue_id).log))
                check_put_result(topic, queue_id, scripts.QUEUE_EVICTED if logged else result)
            if result == scripts.QUEUE_NOT_WRITABLE:
                check_put_result(topic, queue_id, result)
        # Stored now: a failure of the index write (another slot) must not report it as not stored —
        # a retry would store a second copy. The broker's periodic sweep re-indexes the queue.
        try:
            with self._errors(f"indexing {topic!r} queue {queue_id} for the broker service"):
                (yield Cmd(lambda c: c.zadd(index, {timer_member(topic, queue_id): int(at_ms)}, lt=True)))
        except MQBrokerError as e:
            log.warning("message stored; its index entry was not (the broker's sweep adds it): %s", e)
        pending_id = result.decode() if isinstance(result, bytes) else str(result)
        if unconfirmed is not None:
            unconfirmed.result = pending_id
            raise unconfirmed
        return pending_id

    @operation
    def end_transaction(self, topic: str, queue_id: int, half_id: str, commit: bool) -> Op[tuple[bool, int]]:
        """Commit or roll back a half message; ``(changed, offset)`` (offset -1 unless committed now).

        A half message the log cannot take (malformed) is discarded to the queue's discarded-transactions
        stream instead of committed: ``(True, -1)``, logged at ERROR.
        """
        keys = self.queue_keys(topic, queue_id)
        with self._errors(f"ending a transaction in {topic!r} queue {queue_id}"):
            try:
                done, offset = yield from self._write(
                    "end-transaction", keys.end_transaction(), ["commit" if commit else "rollback", half_id]
                )
            except ReplicaAckTimeout as e:
                e.result = (bool(e.result[0]), int(e.result[1]))
                raise
        if int(done) == END_DISCARDED:
            log.error(
                "half message %s of %r queue %d is malformed: discarded instead of committed (see Admin.discarded_transactions)",
                half_id,
                topic,
                queue_id,
            )
        return bool(done), int(offset)

    @operation
    def read_half(self, topic: str, queue_id: int, half_id: str) -> Op[MessageExt | None]:
        """The half message ``half_id``, or None once it is resolved."""
        with self._errors(f"reading a half message of {topic!r}"):
            entries = yield Cmd(lambda c: c.xrange(self.queue_keys(topic, queue_id).half, half_id, half_id))
        if not entries:
            return None
        return decode_half(topic, queue_id, half_id, entries[0][1])

    @operation
    def check_halves(
        self, queues: Sequence[tuple[str, int]], now_ms: int, interval_ms: int, check_max: int, reserve_ms: int, limit: int
    ) -> Op[list[tuple[int, list[tuple[str, str, int]]]]]:
        """Count and take the half messages due for a check-back; per queue ``(next_ms, [(kind, id, checks)])``."""
        calls: list[tuple[str, Sequence[str], Sequence[Any]]] = [
            ("check-halves", self.queue_keys(t, q).check_halves(), [now_ms, interval_ms, check_max, reserve_ms, limit])
            for t, q in queues
        ]
        with self._errors("checking half messages"):
            replies = yield from StoreBase.write_scripts.op(
                self, calls
            )  # it rolls back the overdue ones: a write the replicas should confirm
            for i, r in enumerate(replies):
                if isinstance(r, ReplicaAckTimeout):
                    log.warning("transaction check not confirmed by replicas: %s", r)
                    replies[i] = r.result
                elif isinstance(r, Exception):
                    raise r
        return [(int(r[0]), [(k.decode(), i.decode(), int(c)) for k, i, c in r[1:]]) for r in replies]

    @operation
    def deliver_due(self, queues: Sequence[tuple[str, int]], now_ms: int, limit: int) -> Op[list[DeliverResult | MQBrokerError]]:
        """Move due delayed messages of ``queues`` into their logs; per queue a result or its error.

        A queue's error changed nothing in that queue (the script checks before it writes); the other
        queues' results stand.
        """
        calls: list[tuple[str, Sequence[str], Sequence[Any]]] = [
            ("deliver-due", self.queue_keys(t, q).deliver(), [int(now_ms), int(limit)]) for t, q in queues
        ]
        with self._errors("delivering due messages"):
            results = yield from StoreBase.write_scripts.op(self, calls)
        out: list[DeliverResult | MQBrokerError] = []
        for (topic, qid), r in zip(queues, results):
            if isinstance(r, ReplicaAckTimeout):  # moved on the master: carry on, and say the replicas may not have it
                log.warning("timer delivery of %r queue %d not confirmed by replicas: %s", topic, qid, r)
                r = r.result
            if isinstance(r, Exception):
                out.append(MQBrokerError(f"delivering due messages of {topic!r} queue {qid} failed: {r}"))
            else:
                out.append(DeliverResult(int(r[0]), int(r[1]), int(r[2])))
        return out

    @operation
    def timer_dead_letters(self, topic: str, queue_id: int) -> Op[list[tuple[str, str, MessageExt | None]]]:
        """Delayed messages of a queue the timer could not deliver: ``(delayed id, reason, message)``
        (message None when its fields cannot even be decoded)."""
        with self._errors(f"reading timer dead letters of {topic!r} queue {queue_id}"):
            entries = yield Cmd(lambda c: c.xrange(self.queue_keys(topic, queue_id).timerdead))
        out: list[tuple[str, str, MessageExt | None]] = []
        for _, fields in entries:
            delayed_id = fields.pop(b"delayed_id", b"").decode(errors="replace")
            reason = fields.pop(b"reason", b"").decode(errors="replace")
            try:
                msg: MessageExt | None = decode_half(topic, queue_id, delayed_id, fields)
            except (KeyError, ValueError):
                msg = None
            out.append((delayed_id, reason, msg))
        return out

    @operation
    def trim(
        self,
        topic: str,
        queue_id: int,
        cutoff_ms: int,
        limit: int = 1000,
        *,
        count_unconsumed: bool = True,
        before_offset: int | None = None,
        once: bool = False,
    ) -> Op[Trimmed]:
        """Remove messages of a queue stored before ``cutoff_ms`` and their index entries, ``limit`` a call.

        Args:
            count_unconsumed: count per group (in the store, with the removal) the removed messages it had
                not consumed: retention does; an admin's explicit purge does not (nor the tier uploader:
                what it removes is in the tier).
            before_offset: no offset at or past it is removed (with a tier, the manifest's end).
            once: one call of at most ``limit`` messages (the caller repeats while it removed ``limit``).
        """
        keys = self.queue_keys(topic, queue_id)
        bound = "" if before_offset is None else int(before_offset)
        argv = [int(cutoff_ms), int(limit), "1" if count_unconsumed else "", bound]
        trimmed, doing = Trimmed(), f"trimming {topic!r} queue {queue_id}"
        while True:
            reply = yield from self._script("trim-queue", keys.trim(), argv, doing)
            trimmed.removed += int(reply[0])
            for group, lost in zip(reply[2::2], reply[3::2]):
                name = group.decode() if isinstance(group, bytes) else str(group)
                trimmed.expired_unconsumed[name] = trimmed.expired_unconsumed.get(name, 0) + int(lost)
            if not int(reply[1]) or once:
                return trimmed

    @operation
    def ensure_topic(self, config: TopicConfig) -> Op[TopicConfig]:
        """The topic's config, creating it with ``config`` when missing (system topics: retry, DLQ)."""
        existing = yield from MessageOps.topic.op(self, config.name)
        if existing is not None:
            return existing
        # added with HSETNX, never rewriting one created meanwhile
        yield from MessageOps.save_topic.op(self, config, create_only=True)
        return (yield from MessageOps.topic.op(self, config.name)) or config

    @operation
    def read(self, topic: str, queue_id: int, offset: int, count: int) -> Op[list[MessageExt]]:
        """Up to ``count`` messages of a queue from ``offset`` on (trimmed ones are skipped)."""
        with self._errors(f"reading {topic!r} queue {queue_id}"):
            entries = yield Cmd(lambda c: c.xrange(self.queue_keys(topic, queue_id).log, stream_id(offset), "+", count))
        return [codec.decode(topic, queue_id, eid, fields) for eid, fields in entries]

    @operation
    def read_at(self, topic: str, locations: Iterable[tuple[int, int]]) -> Op[list[MessageExt]]:
        """The messages at ``(queue_id, offset)`` locations (missing ones are skipped), in order."""
        found = yield from self._read_each([(topic, q, o) for q, o in locations], f"reading messages of {topic!r}")
        return [m for m in found if m is not None]

    @operation
    def read_each(self, locations: Sequence[tuple[str, int, int]]) -> Op[list[MessageExt | None]]:
        """The message at each ``(topic, queue_id, offset)`` location, any topics, in one round trip
        (None where none is stored: trimmed, or never there)."""
        return (yield from self._read_each(locations, "reading messages"))

    def _read_each(self, locs: Sequence[tuple[str, int, int]], doing: str) -> Op[list[MessageExt | None]]:
        results = all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: [p.xrange(self.queue_keys(t, q).log, stream_id(o), stream_id(o)) for t, q, o in locs], doing
                )
            )
        )
        return [codec.decode(t, qid, e[0][0], e[0][1]) if e else None for (t, qid, _), e in zip(locs, results)]

    @operation
    def find_ids(self, topic: str, queue_ids: Sequence[int], msg_id: str) -> Op[list[tuple[int, int]]]:
        """``(queue_id, offset)`` of every stored message of ``topic`` with id ``msg_id``."""
        queues = [(topic, q) for q in queue_ids]
        found = yield from self._each_queue(queues, lambda p, k: p.hget(k.ids, msg_id), f"looking up msg id {msg_id!r}")
        return [(qid, int(off)) for qid, off in zip(queue_ids, found) if off is not None]

    @operation
    def find_keys(
        self, topic: str, queue_ids: Sequence[int], key: str, limit: int, *, start: int = 0
    ) -> Op[list[tuple[int, int]]]:
        """``(queue_id, offset)`` of up to ``limit`` messages per queue indexed under ``key``, from each
        queue's ``start``-th such message on (in offset order: index members end in the 20-digit offset)."""
        low, high = key_index_range(key)
        queues = [(topic, q) for q in queue_ids]
        found = yield from self._each_queue(
            queues, lambda p, k: p.zrangebylex(k.keys, low, high, int(start), int(limit)), f"looking up key {key!r}"
        )
        return [(qid, key_index_offset(m)) for qid, members in zip(queue_ids, found) for m in members]

    # -- offsets --------------------------------------------------------------------------------

    @operation
    def queue_stats(self, topic: str, queue_ids: Sequence[int]) -> Op[dict[int, QueueStats]]:
        """Min/max offset and last store time of each queue."""
        stats = yield from self._queue_stats([(topic, q) for q in queue_ids], f"reading offsets of {topic!r}")
        return dict(zip(queue_ids, stats))

    @operation
    def search_offset(self, topic: str, queue_id: int, timestamp_ms: int) -> Op[int]:
        """Offset of the first message stored at or after ``timestamp_ms`` (max offset if none)."""
        keys = self.queue_keys(topic, queue_id).read()
        result = yield from self._script("search-offset", keys, [int(timestamp_ms)], f"searching {topic!r} queue {queue_id}")
        return (yield from self.search_tier(topic, {queue_id: _searched(topic, queue_id, result)}, timestamp_ms))[queue_id]

    @operation
    def search_offsets(self, topic: str, queue_ids: Sequence[int], timestamp_ms: int) -> Op[dict[int, int]]:
        """:meth:`search_offset` of each of ``queue_ids``, in one pipeline."""
        calls: list[ScriptCall] = [("search-offset", self.queue_keys(topic, q).read(), [int(timestamp_ms)]) for q in queue_ids]
        results = all_or_raise((yield from self._scripts(calls, f"searching {topic!r}")))
        return (yield from self.search_tier(topic, {q: _searched(topic, q, r) for q, r in zip(queue_ids, results)}, timestamp_ms))

    def search_tier(self, topic: str, found: dict[int, int], timestamp_ms: int) -> Op[dict[int, int]]:
        """What Redis's search ``found`` per queue, corrected where the time lies in the tier
        (:class:`mq.store.tier.TierOps` does it; a store without tier operations keeps it)."""
        return found
        yield  # an operation (a generator) like the override


def _searched(topic: str, queue_id: int, result: Any) -> int:
    """The offset ``search-offset`` found (it answers -1 for a queue that does not exist)."""
    offset = int(result)
    if offset < 0:
        raise TopicNotFoundError(f"queue {queue_id} of topic {topic!r} does not exist")
    return offset


#: ``end-transaction``'s code for a half message discarded because the log could not take it.
END_DISCARDED = -3


@dataclass
class Trimmed:
    """What retention removed from one queue (:meth:`MessageOps.trim`).

    Attributes:
        removed: messages removed.
        expired_unconsumed: group → removed messages at or after its committed offset (it never consumed
            them); only groups that lost some.
    """

    removed: int = 0
    expired_unconsumed: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class DeliverResult:
    """What one ``deliver-due`` call did to a queue."""

    moved: int
    #: the earliest remaining due time, epoch ms; -1 when nothing waits
    next_due_ms: int
    #: messages moved to the queue's timer dead-letter stream (could not be delivered)
    dead: int


def decode_half(topic: str, queue_id: int, half_id: str, fields: dict[bytes, bytes]) -> MessageExt:
    """A half message as a :class:`MessageExt`: not in the log yet, so ``queue_offset`` is -1 and the
    store time is when the half message was stored (the time part of its id)."""
    fields = {b"st": half_id.partition("-")[0].encode(), **fields}
    msg = codec.decode(topic, queue_id, b"0-0", fields)
    msg.queue_offset = -1
    return msg


def pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    """A flat ``[field, value, …]`` list as a dict."""
    return dict(zip(flat[::2], flat[1::2]))


@functools.lru_cache(maxsize=4096)
def _put_keys(namespace: str, topic: str, queue_id: int) -> tuple[str, ...]:
    """The keys of ``put-messages`` for one queue, made once (``Keys.queue`` builds all 13 key names of
    a queue, a fifth of a sync send's own CPU before D53)."""
    return tuple(Keys(namespace).queue(topic, queue_id).put())


def _put_argv(encoded: Sequence[Sequence[Any]], *, copies: bool = False) -> list[Any]:
    argv: list[Any] = [-len(encoded) if copies else len(encoded)]
    for fields in encoded:
        argv += fields
    return argv


def check_put_result(topic: str, queue_id: int, result: Any) -> tuple[int, int]:
    """Turn a put script's reply into ``(first_offset, store_timestamp_ms)`` (a :class:`Duplicate` for
    a dedup id seen in the window) or its error."""
    if result.__class__ is list and len(result) == 4:
        msg_id = result[3].decode() if isinstance(result[3], bytes) else str(result[3])
        return Duplicate(int(result[0]), int(result[1]), msg_id)
    if result == scripts.QUEUE_MISSING:
        raise TopicNotFoundError(f"topic {topic!r} has no queue {queue_id}; create the topic with Admin.create_topic")
    if result == scripts.QUEUE_NOT_WRITABLE:
        raise QueueNotWritableError(f"queue {queue_id} of topic {topic!r} is not writable")
    if result == scripts.QUEUE_EVICTED:
        raise StoreEvictedError(evicted_message(f"queue {queue_id} of topic {topic!r} has stored messages but no meta", topic))
    if result == scripts.QUEUE_FENCED:
        raise MessageFencedError(f"queue {queue_id} of topic {topic!r} refused a message a producer retry fenced there (D140)")
    return int(result[0]), int(result[1])


def _config_from_stored(raw: bytes | str) -> tuple[TopicConfig, int]:
    """The config and the span (queues ever created) of a stored topic."""
    data = json.loads(raw)
    span = int(data.pop("span", 0))
    config = TopicConfig(**data)
    return config, max(span, config.queue_count)


class StoreOps(
    TierOps,
    MessageOps,
    GroupOps,
    BrokerOps,
    AdminOps,
    RecoveryOps,
    TraceOps,
    TransactionOps,
    ViewOps,
    ProxyOps,
    RecallOps,
    LiteOps,
):
    """Every store operation as a generator (see :mod:`mq.store.ops`): what :class:`Store` runs at
    once and :class:`mq.store.aio.AsyncStore` awaits."""


class Store(StoreOps, SyncRunner):
    """Typed operations on the Redis data of one namespace, run at once: topics and messages in
    :class:`MessageOps`, consumer groups
    in :class:`~mq.store.groups.GroupOps`, the broker service's in :class:`~mq.store.broker.BrokerOps`, operator tools' in
    :class:`~mq.store.admin.AdminOps`, the message trace's in :class:`~mq.store.trace.TraceOps`, the web
    console's bulk views in :class:`~mq.store.views.ViewOps`.

    Args:
        connection: the client and key names.
        sync: with ``sync.replicas`` ≥ 1, the message writes (:meth:`put`, :meth:`put_many`,
            :meth:`put_delayed`, :meth:`put_half`, :meth:`end_transaction`, :meth:`deliver_due`,
            :meth:`check_halves`) each send ``WAIT`` in the same pipeline as the write, and raise
            :class:`ReplicaAckTimeout` (carrying the write's result) when fewer replicas confirmed in time.
    """


class PutPipeline:
    """:meth:`Store.put_many` split in two for one thread (or task) that keeps two rounds in flight:
    :meth:`send` writes a round's put calls over a connection of its own
    (:class:`~mq.store.lane.PipeLane`, asyncio: :class:`~mq.store.lane.AioPipeLane`), :meth:`read`
    reads their replies later, so the next round is written before these are read.

    Results are :meth:`Store.put_many`'s. A lost connection (writing or reading) raises
    :class:`MQBrokerError` from the round it happened in and from :meth:`read` of every round sent and
    not yet read; a ``NOSCRIPT`` reply (nothing ran) is run again through :meth:`Store.put_many`.
    Made by :meth:`Store.put_pipeline`; each method runs as its store's operations do (at once for a
    :class:`Store`, a coroutine for an ``AsyncStore``).
    """

    def __init__(self, store: MessageOps, pipe: lane.PipeLane | lane.AioPipeLane) -> None:
        self._store = store
        self._pipe = pipe
        self._run: Any = store._run  # type: ignore[attr-defined]

    def send(self, puts: Sequence[tuple[str, int, Sequence[Sequence[Any]]]]) -> Any:
        """Write the put calls ``puts`` (as :meth:`Store.put_many` takes them); returns the handle for
        :meth:`read`. Raises :class:`MQBrokerError` when the connection fails."""
        return self._run(self._send(puts))

    def read(self, handle: tuple[Any, ...]) -> Any:
        """The results of the round :meth:`send` gave ``handle`` for (one result or exception a put).
        Raises :class:`MQBrokerError` when the round was lost with the connection."""
        return self._run(self._read(handle))

    def close(self) -> Any:
        """Give the connection back (rounds not read are lost)."""
        pipe = self._pipe
        return self._run(_once(Cmd(lambda _client: pipe.close())))

    def _send(self, puts: Sequence[tuple[str, int, Sequence[Sequence[Any]]]]) -> Op[tuple[Any, ...]]:
        store, pipe = self._store, self._pipe
        flagged = scripts._flagged(store._client)
        put = scripts.SCRIPTS["put-messages"]
        namespace = store.keys.namespace
        commands = [("EVALSHA", *put.args(_put_keys(namespace, t, q), _put_argv(e), flagged=flagged)) for t, q, e in puts]
        with store._errors("sending a pipeline of messages"):
            ticket = yield Cmd(lambda _client: pipe.send(commands))
        return ticket, puts

    def _read(self, handle: tuple[Any, ...]) -> Op[list[tuple[int, int] | Exception]]:
        ticket, puts = handle
        store, pipe = self._store, self._pipe
        with store._errors("sending a pipeline of messages"):
            replies = yield Cmd(lambda _client: pipe.read(ticket, len(puts)))
        missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
        if missing:  # the script is not loaded (a restarted or new server): these ran nothing
            again = yield from MessageOps.put_many.op(store, [puts[i] for i in missing])
            out = store._put_results(puts, replies)
            for i, result in zip(missing, again):
                out[i] = result
            return out
        return store._put_results(puts, replies)


def _once(request: Cmd) -> Op[Any]:
    """An operation of one request."""
    return (yield request)
