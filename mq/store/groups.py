"""Store operations of consumer groups: the registry, queue ownership (claims and orderly locks),
committed offsets, pulls, long-poll reads, simple-consumer receipts and group configs.

Every per-queue operation runs in the queue's hash slot (one script, or one pipeline grouped by
node on a cluster); the registry and a group's config live in the group's slot.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from redis.exceptions import NoScriptError

from mq.errors import MQBrokerError, ReplicaAckTimeout, StoreEvictedError, evicted_message
from mq.keys import offset_of, stream_id
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue
from mq.store import codec, scripts
from mq.store.base import QUEUE_BATCH, ScriptCall, StoreBase, all_or_raise, chunks, without_dicts
from mq.store.ops import Cmd, NodeCmd, Op, operation
from mq.store.replication import SyncReplicas

#: Guards a committing call can ask the store to check (see commit-offset-4.lua).
NO_GUARD, OWNER_GUARD, LOCK_GUARD = "", "owner", "lock"


@dataclass(frozen=True)
class PullRequest:
    """One queue to pull from: where, how much, the store-side filter (see pull-messages-5.lua), and
    the group's offset to commit in the same call.

    Attributes:
        max_bytes: most bytes of entries the call scans (at least one entry is read).
        commit: offset to commit for ``group`` (None: commit nothing).
        guard: ``""``, ``"owner"`` or ``"lock"``: what must hold for the commit and the read.
        read_after: an unfiltered pull whose entries are read by a plain ``XRANGE`` queued right
            after the script in the same pipeline, the script only checking the guard and
            committing: entries that pass through Lua cost the server several times a native
            read to convert into Lua values and back (D61). The reply is cut
            after the entry whose body reaches ``max_bytes`` (cached memory is bounded as
            before); the read itself is bounded by ``max_messages`` only, so ask for it when the
            queue's messages are known to be small (see :class:`mq.consumer.puller.Puller`).
        last_entry: the fingerprint of the entry at ``offset - 1`` as the caller was handed it
            (:func:`fingerprint`; "" when not known): the store checks that it is still there, and
            rewinds the caller when a failover gave that offset to another message (D70).
    """

    topic: str
    queue_id: int
    offset: int
    max_messages: int
    max_scan: int
    filter_type: str = ""
    filter_data: str = ""
    max_bytes: int = 4 * 1024 * 1024
    group: str = ""
    commit: int | None = None
    guard: str = NO_GUARD
    client_id: str = ""
    read_after: bool = False
    last_entry: str = ""


@dataclass(frozen=True)
class PullResult:
    """What a pull found: matching messages, where to pull next, the queue's max offset, and whether
    the caller still holds the queue (False: nothing was read or committed).

    Attributes:
        last_entry: the fingerprint of the entry at ``next_offset - 1`` ("" when not known).
        rewound: the request's offset was beyond the queue's end, or the entry before it is not the
            one the caller was handed (a lossy failover, D70): nothing was read or committed, and
            ``next_offset`` is where the caller continues, at or below the request's offset.
    """

    messages: list[MessageExt]
    next_offset: int
    max_offset: int
    held: bool = True
    last_entry: str = ""
    rewound: bool = False


#: ``status`` of a ``pull-messages`` reply: rewound (see :attr:`PullResult.rewound`).
REWOUND = 2


def fingerprint(msg: MessageExt) -> str:
    """What the store compares to tell the message at an offset from another one a failover put
    there (includes/position.lua): its store time and msg id."""
    return f"{msg.store_timestamp_ms}:{msg.msg_id}"


def _pull_result(p: PullRequest, reply: Sequence[Any]) -> PullResult | None:
    """The result of a ``pull-messages`` reply that read nothing for the caller: not held, or
    rewound; None when it read (or let the caller read) what follows ``p.offset``."""
    status = int(reply[2])
    if status == 1:
        return None
    last = _text(reply[3])
    return PullResult([], int(reply[0]), int(reply[1]), status != 0, last, status == REWOUND)


_BODY = attrgetter("body")


def _by_stream(reply: Any, logs: Sequence[str]) -> list[Any]:
    """The entries of each of ``logs`` in an ``XREAD`` reply (``[[stream, entries], …]``, or a map in
    RESP3; streams without new entries are left out, and nothing at all is None); the reply itself
    for each when it is a failed slot."""
    if isinstance(reply, MQBrokerError):
        return [reply] * len(logs)
    pairs = reply.items() if isinstance(reply, dict) else (reply or [])
    found = {(k.decode() if isinstance(k, bytes) else k): entries for k, entries in pairs}
    return [found.get(log, []) for log in logs]


def _read_after(p: PullRequest, max_offset: int, held: bool, entries: list[Any]) -> PullResult:
    """The result of a ``read_after`` pull: the script's guard (``held``) and ``max_offset``, and the
    entries its ``XRANGE`` read, where the next pull starts as ``pull-messages`` would have set it."""
    if not held:
        return PullResult([], p.offset, max_offset, False)  # taken over: what was read is not ours
    if not entries:  # as the script: nothing (more) to read
        return PullResult([], max_offset, max_offset, last_entry=p.last_entry if p.offset == max_offset else "")
    msgs = codec.decode_entries(p.topic, p.queue_id, entries)
    next_offset = offset_of(entries[-1][0]) + 1
    if sum(map(len, map(_BODY, msgs))) > p.max_bytes:  # a message larger than the puller expected
        size = 0
        for i, m in enumerate(msgs):
            size += len(m.body)
            if size >= p.max_bytes:
                msgs, next_offset = msgs[: i + 1], m.queue_offset + 1
                break
    elif len(entries) < p.max_messages:  # the log's end: what follows was not written yet
        next_offset = max(next_offset, max_offset)
    last = msgs[-1] if msgs else None
    last_entry = fingerprint(last) if last is not None and last.queue_offset == next_offset - 1 else ""
    return PullResult(msgs, next_offset, max(max_offset, next_offset), last_entry=last_entry)


@dataclass(frozen=True)
class Heartbeat:
    """A heartbeat's answer: the server time (ms), the group's live client ids (sorted), its config
    JSON ("" when it has none) and its offset-reset counter."""

    now_ms: int
    members: list[str]
    config: str = ""
    reset_seq: int = 0


@dataclass(frozen=True)
class SimpleDelivery:
    """One message handed out by ``receive-simple``: ``dead`` when its attempts are used up; ``message``
    None when the entry could not be decoded (it is acked and passed by)."""

    offset: int
    attempt: int
    visible_at_ms: int
    dead: bool
    message: MessageExt | None = field(default=None)


class GroupOps(StoreBase):
    """Registry, ownership, offsets, pulls and simple-consumer operations."""

    # -- registry -------------------------------------------------------------------------------

    @operation
    def heartbeat(self, group: str, client_id: str, info_json: str, timeout_ms: int) -> Op[Heartbeat]:
        """Say ``client_id`` is alive (sending ``info_json`` unless ""), drop clients silent for
        ``timeout_ms``; returns the live members and the group's config."""
        keys = self.keys.group(group)
        reply = yield from self._script(
            "heartbeat",
            [keys.clients, keys.info, keys.config],
            [client_id, info_json, int(timeout_ms)],
            f"heartbeat of group {group!r}",
        )
        config = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1] or "")
        return Heartbeat(int(reply[0]), sorted(_text(c) for c in reply[3:]), config, int(reply[2]))

    @operation
    def announce_reset(self, group: str, topic: str, offsets: Mapping[int, int]) -> Op[int]:
        """Tell ``group``'s running members that its offsets on ``topic`` were reset to ``offsets``
        (queue id → offset); returns the reset's sequence number (announce-reset.lua)."""
        keys = self.keys.group(group)
        data = json.dumps({str(q): int(o) for q, o in offsets.items()}, separators=(",", ":"))
        return int(
            (yield from self._script("announce-reset", [keys.resets, keys.config], [topic, data], f"resetting group {group!r}"))
        )

    @operation
    def group_resets(self, group: str) -> Op[dict[str, tuple[int, dict[int, int]]]]:
        """The last offset reset of ``group`` per topic: ``(sequence number, {queue id: offset})``."""
        with self._errors(f"reading offset resets of group {group!r}"):
            raw = yield Cmd(lambda c: c.hgetall(self.keys.group(group).resets))
        out = {}
        for topic, value in raw.items():
            seq, _, data = _text(value).partition("\x1f")
            out[_text(topic)] = (int(seq), {int(q): int(o) for q, o in json.loads(data).items()})
        return out

    @operation
    def register_group(self, group: str) -> Op[None]:
        """Record ``group`` in the namespace's group list (``mq group list``)."""
        with self._errors(f"registering group {group!r}"):
            (yield Cmd(lambda c: c.sadd(self.keys.groups, group)))

    @operation
    def unregister_client(self, group: str, client_id: str) -> Op[None]:
        """Remove a client from its group at once (a clean shutdown)."""
        keys = self.keys.group(group)
        all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: (p.zrem(keys.clients, client_id), p.hdel(keys.info, client_id)), "unregistering"
                )
            )
        )

    @operation
    def group_clients_raw(self, group: str) -> Op[tuple[dict[str, str], dict[str, int]]]:
        """The registry of ``group``: client id → info JSON, and client id → last heartbeat (server ms)."""
        return (yield from self._clients_of([group], f"reading clients of group {group!r}"))[0]

    @operation
    def groups_clients_raw(self, groups: Sequence[str]) -> Op[list[tuple[dict[str, str], dict[str, int]]]]:
        """:meth:`group_clients_raw` of each of ``groups``, in one pipeline per
        :data:`~mq.store.base.QUEUE_BATCH` groups."""
        return (yield from self._clients_of(groups, "reading the clients of groups"))

    def _clients_of(self, groups: Sequence[str], doing: str) -> Op[list[tuple[dict[str, str], dict[str, int]]]]:
        out: list[tuple[dict[str, str], dict[str, int]]] = []
        for batch in chunks(groups, QUEUE_BATCH):
            keys = [self.keys.group(g) for g in batch]

            def build(p: Any, keys: Sequence[Any] = keys) -> None:
                for k in keys:
                    p.hgetall(k.info)
                    p.zrange(k.clients, 0, -1, withscores=True)

            r = all_or_raise((yield from self._pipeline(build, doing)))
            out += [
                ({_text(k): _text(v) for k, v in r[i].items()}, {_text(c): int(s) for c, s in r[i + 1]})
                for i in range(0, len(r), 2)
            ]
        return out

    @operation
    def groups(self) -> Op[list[str]]:
        """Every group that registered or was created in the namespace, sorted."""
        with self._errors("listing groups"):
            return sorted(_text(g) for g in (yield Cmd(lambda c: c.smembers(self.keys.groups))))

    @operation
    def remove_dead_clients(self, groups: Sequence[str], timeout_ms: int) -> Op[int]:
        """Remove the clients of ``groups`` silent for ``timeout_ms`` (Redis clock); returns how many."""
        calls: list[ScriptCall] = [
            ("remove-dead-clients", [self.keys.group(g).clients, self.keys.group(g).info], [int(timeout_ms)]) for g in groups
        ]
        return sum(int(r) for r in all_or_raise((yield from self._scripts(calls, "removing dead clients"))))

    # -- group configs --------------------------------------------------------------------------

    @operation
    def group_config_json(self, group: str) -> Op[str | None]:
        """The stored config JSON of ``group``, or None."""
        with self._errors(f"reading the config of group {group!r}"):
            raw = yield Cmd(lambda c: c.hget(self.keys.group(group).config, "json"))
        return _text(raw) if raw is not None else None

    @operation
    def group_configs_json(self, groups: Sequence[str]) -> Op[list[str | None]]:
        """:meth:`group_config_json` of each of ``groups``, in one pipeline."""
        replies = all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: [p.hget(self.keys.group(g).config, "json") for g in groups], "reading group configs"
                )
            )
        )
        return [None if r is None else _text(r) for r in replies]

    @operation
    def save_group_config(self, group: str, config_json: str) -> Op[bool]:
        """Store the config of ``group`` (and list the group); True when it was new."""
        key = self.keys.group(group).config
        added, _ = all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: (p.hset(key, "json", config_json), p.sadd(self.keys.groups, group)),
                    f"saving the config of group {group!r}",
                )
            )
        )
        return bool(added)

    @operation
    def delete_group_config(self, group: str) -> Op[bool]:
        """Delete the config of ``group`` and drop it from the group list; False when it had none."""
        key = self.keys.group(group).config
        deleted, _ = all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: (p.hdel(key, "json"), p.srem(self.keys.groups, group)), f"deleting group {group!r}"
                )
            )
        )
        return bool(deleted)

    # -- ownership ------------------------------------------------------------------------------

    @operation
    def claim_queues(self, group: str, client_id: str, members: Sequence[str], queues: Sequence[MessageQueue]) -> Op[list[bool]]:
        """Take each queue unless a live member (of ``members``) owns it (claim-queue.lua)."""
        live = "\x1f".join(members)
        calls: list[ScriptCall] = [
            ("claim-queue", [self.queue_keys(q.topic, q.queue_id).owners], [group, client_id, live]) for q in queues
        ]
        return [r == 1 for r in all_or_raise((yield from self._scripts(calls, "claiming queues")))]

    @operation
    def release_queue(
        self, group: str, client_id: str, queue: MessageQueue, offset: int | None, position: tuple[int, str] | None = None
    ) -> Op[bool]:
        """Commit ``offset`` (None: nothing) and give ``queue`` up, if the caller owns it (release-queue.lua);
        the offset is checked as :meth:`commit_offsets` checks it, with the caller's ``position``."""
        keys = self.queue_keys(queue.topic, queue.queue_id)
        return bool(
            (
                yield from self._script(
                    "release-queue",
                    [keys.owners, keys.offsets, keys.meta, keys.log],
                    [group, client_id, "" if offset is None else int(offset), *_position_argv(position)],
                    f"releasing {queue}",
                )
            )
        )

    @operation
    def lock_queues(
        self, group: str, client_id: str, queues: Sequence[MessageQueue], ttl_ms: int, *, sync: SyncReplicas | None = None
    ) -> Op[list[bool]]:
        """Take or renew the orderly locks of ``queues`` (lock-queue.lua); True where the caller holds it.

        With ``sync`` (replicas ≥ 1), ``WAIT`` goes in the same pipeline and a lock counts as held only
        when that many replicas confirmed it in time, so a failover cannot lose a lock (or a renewal)
        its holder trusts (docs/decisions.md D36). Without it, the store's own ``sync`` is not applied:
        locks are not message writes.
        """
        calls: list[ScriptCall] = [
            ("lock-queue", [self.queue_keys(q.topic, q.queue_id).lock(group)], [client_id, int(ttl_ms)]) for q in queues
        ]
        if sync is None or not sync.enabled:
            return [r == 1 for r in all_or_raise((yield from self._scripts(calls, "locking queues")))]
        with self._errors("locking queues"):
            replies = yield from StoreBase.write_scripts.op(self, calls, sync=sync)
        # an unconfirmed lock is taken on the master but not trusted: not held (renewed next round)
        confirmed = [0 if isinstance(r, ReplicaAckTimeout) else r for r in replies]
        return [r == 1 for r in all_or_raise([self._slot(r, "locking queues") for r in confirmed])]

    @operation
    def unlock_queue(
        self, group: str, client_id: str, queue: MessageQueue, offset: int | None, position: tuple[int, str] | None = None
    ) -> Op[bool]:
        """Release the caller's lock of ``queue``, committing ``offset`` (None: nothing) with it, checked as
        :meth:`commit_offsets` checks it with the caller's ``position``."""
        keys = self.queue_keys(queue.topic, queue.queue_id)
        return bool(
            (
                yield from self._script(
                    "unlock-queue",
                    [keys.lock(group), keys.offsets, keys.meta, keys.log],
                    [client_id, group, "" if offset is None else int(offset), *_position_argv(position)],
                    f"unlocking {queue}",
                )
            )
        )

    # -- offsets --------------------------------------------------------------------------------

    @operation
    def read_offsets(self, group: str, queues: Iterable[MessageQueue]) -> Op[dict[MessageQueue, int]]:
        """Committed offsets of ``group`` on ``queues`` (queues without one are left out)."""
        qs = list(queues)
        values = all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: [p.hget(self.queue_keys(q.topic, q.queue_id).offsets, group) for q in qs],
                    f"reading offsets of group {group!r}",
                )
            )
        )
        return {q: int(v) for q, v in zip(qs, values) if v is not None}

    @operation
    def commit_offsets(
        self,
        group: str,
        offsets: Mapping[MessageQueue, int],
        *,
        guard: str = NO_GUARD,
        client_id: str = "",
        positions: Mapping[MessageQueue, tuple[int, str]] | None = None,
    ) -> Op[dict[MessageQueue, bool]]:
        """Commit offsets of ``group``, each only while ``guard`` holds for ``client_id``
        (commit-offset.lua); False for a queue whose guard did not hold (nothing written there).

        An offset beyond the queue's end is not written, nor one whose queue's position in
        ``positions`` (the caller's next offset and the fingerprint of the entry before it) is beyond
        the end or on another message than the caller was handed (D70): such a commit counts as
        made (the guard held) and the caller's next pull rewinds."""
        qs = list(offsets)
        keys = [self.queue_keys(q.topic, q.queue_id) for q in qs]
        calls: list[ScriptCall] = [
            ("commit-offset", k.commit(group, guard), _commit_argv(group, offsets[q], guard, client_id, (positions or {}).get(q)))
            for q, k in zip(qs, keys)
        ]
        return {
            q: r != 0
            for q, r in zip(qs, all_or_raise((yield from self._scripts(calls, f"committing offsets of group {group!r}"))))
        }

    @operation
    def seed_offsets(self, group: str, offsets: Mapping[MessageQueue, int]) -> Op[dict[MessageQueue, int]]:
        """Store each offset unless the group has one on that queue already (``HSETNX``, so members
        starting together agree); returns the offsets stored now."""
        qs = list(offsets)

        def build(p: Any) -> None:
            for q in qs:
                key = self.queue_keys(q.topic, q.queue_id).offsets
                p.hsetnx(key, group, int(offsets[q]))
                p.hget(key, group)

        replies = all_or_raise((yield from self._pipeline(build, f"fixing where group {group!r} starts")))
        return {q: int(v) for q, v in zip(qs, replies[1::2])}

    @operation
    def group_since(self, group: str, topic: str, now_ms: int) -> Op[int]:
        """When ``group`` first consumed ``topic`` (ms): ``now_ms`` unless a member recorded it before."""
        key = self.keys.group(group).since
        _, since = all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: (p.hsetnx(key, topic, int(now_ms)), p.hget(key, topic)),
                    f"reading when group {group!r} began on {topic!r}",
                )
            )
        )
        return int(since)

    # -- reading --------------------------------------------------------------------------------

    @operation
    def pull_many(self, pulls: Sequence[PullRequest]) -> Op[list[PullResult | MQBrokerError]]:
        """Run ``pull-messages`` for several queues in one pipeline (filtering in the store, committing
        each request's offset); each slot holds a result or the store's error for that queue. The
        entries of a ``read_after`` request come from an ``XRANGE`` queued after the scripts (see
        :class:`PullRequest`)."""
        keys = [self.queue_keys(p.topic, p.queue_id) for p in pulls]
        calls: list[ScriptCall] = [
            (
                "pull-messages",
                k.pull(p.group, p.guard),
                [
                    p.offset,
                    0 if p.read_after else p.max_messages,  # 0: the guard and the commit only
                    p.max_scan,
                    p.filter_type,
                    p.filter_data,
                    p.max_bytes,
                    p.group,
                    "" if p.commit is None else int(p.commit),
                    p.guard,
                    p.client_id,
                    p.last_entry,
                ],
            )
            for p, k in zip(pulls, keys)
        ]
        reads = [(p, k.log) for p, k in zip(pulls, keys) if p.read_after]
        # One XREAD of every stream when they are on one server (not a cluster's slots) and read alike:
        # a command less per queue in the pipeline (redis-py's cost a command: D61); else an XRANGE each.
        one_read = (
            self.conn.kind != "cluster"
            and len({p.max_messages for p, _ in reads}) == 1
            and len({log for _, log in reads}) == len(reads)
        )

        def read_after(pipe: Any) -> None:
            without_dicts(pipe)
            if one_read:
                pipe.xread({log: stream_id(p.offset - 1) for p, log in reads}, count=reads[0][0].max_messages)
                return
            for p, log in reads:
                pipe.xrange(log, stream_id(p.offset), "+", count=p.max_messages)

        replies = yield from self._scripts(calls, "pulling messages", read_after if reads else None)
        read_replies = iter(_by_stream(replies[len(calls)], [log for _, log in reads]) if one_read else replies[len(calls) :])
        out: list[PullResult | MQBrokerError] = []
        for p, reply in zip(pulls, replies):
            entries = next(read_replies) if p.read_after else None
            if isinstance(reply, MQBrokerError):
                out.append(_evicted(p.topic, p.queue_id, reply) if EVICTED_REPLY in str(reply) else reply)
            elif (done := _pull_result(p, reply)) is not None:  # not held, or rewound: nothing read
                out.append(done)
            elif isinstance(entries, MQBrokerError):
                out.append(entries)
            elif entries is not None:
                out.append(_read_after(p, int(reply[1]), True, entries))
            else:
                msgs = codec.decode_entries(p.topic, p.queue_id, reply[4:])  # each entry an [id, fields] pair
                out.append(PullResult(msgs, int(reply[0]), int(reply[1]), True, _text(reply[3])))
        through = yield from self.read_through(pulls, out)
        # a rewound pull read nothing and must not be read from the tier at its stale offset (D70)
        return [o if isinstance(o, PullResult) and o.rewound else t for o, t in zip(out, through)]

    def read_through(
        self, pulls: Sequence[PullRequest], results: list[PullResult | MQBrokerError]
    ) -> Op[list[PullResult | MQBrokerError]]:
        """The pulls' results with those that landed below what Redis holds read from the tier instead
        (:class:`mq.store.tier.TierOps` does it; a store without tier operations keeps them)."""
        return results
        yield  # an operation (a generator) like the override

    @operation
    def wait_for_messages(
        self,
        queue: MessageQueue,
        offset: int,
        count: int,
        block_ms: int,
        *,
        group: str,
        last_entry: str = "",
        check: bool = True,
    ) -> Op[tuple[PullResult | None, tuple[list[MessageExt], int] | None]]:
        """Block up to ``block_ms`` until ``queue`` has a message at or after ``offset``; returns up to
        ``count`` of them unfiltered with the offset after the last entry read, or None when none
        arrived (``XREAD BLOCK``; use a connection whose reply timeout is longer than ``block_ms``).

        The position is checked first in the same round trip (``pull-messages`` reading nothing,
        with ``group`` and ``last_entry``, see :class:`PullRequest`): the first item is the rewound
        result when the position is beyond the queue's end or on another history (D70; what the
        wait read is then not the caller's), else None. ``check=False`` leaves the check out (a plain
        ``XREAD BLOCK``: a caller that knows its connection still reaches the server it checked on)."""
        k = self.queue_keys(queue.topic, queue.queue_id)
        doing = f"waiting for messages of {queue}"
        if not check:
            with self._errors(doing):
                reply = yield NodeCmd(k.log, lambda c: c.xread({k.log: stream_id(offset - 1)}, count=count, block=block_ms))
            return (yield from self._waited(queue, offset, last_entry, None, [offset, 0, 1, last_entry], reply, doing))
        call = _position_check(k, group, offset, last_entry)
        with self._errors(doing):
            checked, reply = yield scripts.EvalThen(
                k.log, [call], lambda p: p.xread({k.log: stream_id(offset - 1)}, count=count, block=block_ms)
            )
        return (yield from self._waited(queue, offset, last_entry, call, checked, reply, doing))

    def _waited(
        self, queue: MessageQueue, offset: int, last_entry: str, check: ScriptCall | None, checked: Any, reply: Any, doing: str
    ) -> Op[tuple[PullResult | None, tuple[list[MessageExt], int] | None]]:
        """What a wait with its position check ``check`` found (see :meth:`wait_for_messages`)."""
        if isinstance(reply, Exception):
            raise self._slot(reply, doing)
        if isinstance(checked, NoScriptError) and check is not None:  # not loaded yet: load it, check now
            checked = (yield from self._scripts([check], doing))[0]
        if isinstance(checked, Exception):
            raise self._slot(checked, doing)
        request = PullRequest(queue.topic, queue.queue_id, offset, 0, 0, last_entry=last_entry)
        rewound = _pull_result(request, checked)
        if rewound is not None:
            return rewound, None
        if not reply or not reply[0][1]:
            return None, None
        entries = reply[0][1]
        return None, (codec.decode_entries(queue.topic, queue.queue_id, entries), offset_of(entries[-1][0]) + 1)

    @operation
    def commit_and_wait(
        self,
        group: str,
        queue: MessageQueue,
        commit: int,
        offset: int,
        count: int,
        block_ms: int,
        *,
        guard: str,
        client_id: str,
        last_entry: str = "",
    ) -> Op[tuple[bool | MQBrokerError, PullResult | None, tuple[list[MessageExt], int] | None]]:
        """:meth:`commit_offsets` of ``queue`` at ``commit``, then :meth:`wait_for_messages` from
        ``offset`` (the position ``offset``/``last_entry`` checked by both), in one round trip (every
        key is in the queue's slot: one node of a cluster).

        Returns whether the commit's guard held (or the store's error, the commit not made), the
        rewound result when the position was rewound (else None), and what the wait read."""
        k = self.queue_keys(queue.topic, queue.queue_id)
        call: ScriptCall = (
            "commit-offset",
            k.commit(group, guard),
            _commit_argv(group, commit, guard, client_id, (offset, last_entry)),
        )
        check = _position_check(k, group, offset, last_entry)
        doing = f"committing the offset of group {group!r} and waiting for messages of {queue}"
        with self._errors(doing):
            committed, checked, reply = yield scripts.EvalThen(
                k.log, [call, check], lambda p: p.xread({k.log: stream_id(offset - 1)}, count=count, block=block_ms)
            )
        if isinstance(committed, NoScriptError) and not isinstance(reply, Exception):  # not loaded yet: load, commit again
            committed = (yield from self._scripts([call], doing))[0]
        done = committed != 0 if not isinstance(committed, Exception) else self._slot(committed, doing)
        rewound, news = yield from self._waited(queue, offset, last_entry, check, checked, reply, doing)
        return done, rewound, news

    @operation
    def wait_for_any(self, cursors: Mapping[MessageQueue, int], block_ms: int) -> Op[None]:
        """Block up to ``block_ms`` until any queue of ``cursors`` has an entry at or after its cursor
        (one ``XREAD`` over every stream: standalone only, the streams are in different slots)."""
        streams = {self.queue_keys(q.topic, q.queue_id).log: stream_id(c - 1) for q, c in cursors.items()}
        with self._errors("waiting for messages"):
            (yield Cmd(lambda c: c.xread(streams, count=1, block=max(1, int(block_ms)))))

    # -- simple consumers -----------------------------------------------------------------------

    @operation
    def receive_simple(
        self,
        group: str,
        queue: MessageQueue,
        *,
        now_ms: int,
        invisible_ms: int,
        max_messages: int,
        max_attempts: int,
        filter_type: str,
        filter_data: str,
        max_scan: int,
        fifo: bool = False,
    ) -> Op[list[SimpleDelivery]]:
        """Hand out messages of one queue to a simple-consumer group (receive-simple.lua; with ``fifo``,
        message groups in order: receive-fifo.lua)."""
        keys = self.queue_keys(queue.topic, queue.queue_id).simple(group)
        argv = [
            group,
            int(now_ms),
            int(invisible_ms),
            int(max_messages),
            int(max_attempts),
            filter_type,
            filter_data,
            int(max_scan),
        ]
        keys = [*keys, self.queue_keys(queue.topic, queue.queue_id).segments]
        try:
            reply = yield from self._script("receive-fifo" if fifo else "receive-simple", keys, argv, f"receiving from {queue}")
        except MQBrokerError as e:
            if EVICTED_REPLY in str(e):
                raise _evicted(queue.topic, queue.queue_id, e) from e
            raise
        out, tiered, cursor = [], [], None
        for kind, offset, attempt, visible_at, fields in reply:
            if kind == b"t":  # the cursor is below what Redis holds: read the tier from there
                cursor = int(offset)
                continue
            if fields is None:  # handed out again, its entry now in the tier only
                tiered.append(SimpleDelivery(int(offset), int(attempt), int(visible_at), kind == b"d"))
                continue
            decoded = codec.decode_entries(queue.topic, queue.queue_id, [(stream_id(int(offset)).encode(), fields)])
            out.append(SimpleDelivery(int(offset), int(attempt), int(visible_at), kind == b"d", decoded[0] if decoded else None))
        if tiered or cursor is not None:
            out += yield from self.receive_from_tier(
                group, queue, tiered, cursor, int(now_ms) + int(invisible_ms), int(max_messages) - len(out),
                (filter_type, filter_data, int(max_scan)), fifo,
            )  # fmt: skip
        return out

    def receive_from_tier(
        self,
        group: str,
        queue: MessageQueue,
        again: list[SimpleDelivery],
        cursor: int | None,
        visible_at_ms: int,
        want: int,
        scan: tuple[str, str, int],
        fifo: bool = False,
    ) -> Op[list[SimpleDelivery]]:
        """The tier's part of :meth:`receive_simple` (:class:`mq.store.tier.TierOps` does it; a store
        without tier operations hands out nothing from a tier)."""
        return []
        yield  # an operation (a generator) like the override

    @operation
    def ack_simple(
        self, group: str, queue: MessageQueue, offset: int, visible_at_ms: int, new_visible_at_ms: int | None
    ) -> Op[bool]:
        """Acknowledge (``new_visible_at_ms`` None) or re-time a handed-out message; False when the
        receipt expired (ack-simple.lua)."""
        keys = self.queue_keys(queue.topic, queue.queue_id).simple(group)[3:]
        argv = [int(offset), int(visible_at_ms), "" if new_visible_at_ms is None else int(new_visible_at_ms)]
        return bool((yield from self._script("ack-simple", keys, argv, f"acknowledging offset {offset} of {queue}")))


def _commit_argv(group: str, offset: int, guard: str, client_id: str, position: tuple[int, str] | None) -> list[Any]:
    """The arguments of a ``commit-offset`` call (``position``: the caller's next offset and the
    fingerprint of the entry before it, checked by the script; None: the offset alone is checked)."""
    return [group, int(offset), guard, client_id, *_position_argv(position)]


def _position_argv(position: tuple[int, str] | None) -> list[Any]:
    """A committing script's position arguments: the caller's next offset and the fingerprint of the
    entry before it ("" and "": not known)."""
    return ["", ""] if position is None else [int(position[0]), position[1]]


def _position_check(keys: Any, group: str, offset: int, last_entry: str) -> ScriptCall:
    """A ``pull-messages`` call that reads and commits nothing: it checks the position ``offset``
    (and ``last_entry``) of ``group``, answering as a pull does (rewound or not, D70)."""
    return ("pull-messages", keys.pull(group, NO_GUARD), [offset, 0, 0, "", "", 0, group, "", NO_GUARD, "", last_entry])


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


#: The error the read scripts raise for a queue whose meta Redis evicted (see lua/includes/evicted.lua).
EVICTED_REPLY = "EVICTED the queue meta is gone"


def _evicted(topic: str, queue_id: int, reply: MQBrokerError) -> StoreEvictedError:
    """The read scripts' eviction error for queue ``queue_id`` of ``topic``, saying what to do."""
    error = StoreEvictedError(evicted_message(f"queue {queue_id} of topic {topic!r} has stored messages but no meta", topic))
    error.__cause__ = reply
    return error
