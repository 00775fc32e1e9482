"""Lite topics [RIP-83]: the store operations behind ``Message(…, lite_topic=…)`` sends, a simple
consumer's ``subscribe_lite`` / ``unsubscribe_lite`` and its receives and acks of lite messages, the
hand-over of a stopped member's lite topics, and the admin's listing (see D144 and ``mq/keys.py``).

Every key of one lite parent shares one hash slot, so each operation is one script (or one command)
on one node, and a send wakes the member that owns its lite topic in the same script.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mq.errors import ReplicaAckTimeout
from mq.keys import LiteKeys
from mq.model.message import MessageExt
from mq.store import codec
from mq.store.base import StoreBase
from mq.store.ops import Cmd, Op, operation

#: Messages a lite topic keeps: a send past them removes the oldest (a lite topic is a session's
#: conversation; an idle one expires whole).
LITE_KEEP_MESSAGES = 10_000

#: Low bits of a listing cursor: how many names of the ``SCAN`` step at the high bits a page took.
_SKIP_BITS = 24
_SKIP_MASK = (1 << _SKIP_BITS) - 1
#: Listing cursors are below this: a ``SCAN`` cursor (an unsigned 64-bit number) above the skip bits.
LITE_CURSOR_LIMIT = 1 << (64 + _SKIP_BITS)

#: The lite topics whose name starts with the prefix, a page: ``(names, cursor)``; cursor 0: the last page.
LitePage = tuple[list[str], int]


@dataclass(frozen=True)
class LiteDelivery:
    """One message a lite receive handed out.

    Attributes:
        lite_topic: its lite topic.
        offset: its offset there (dense from 0).
        attempt: 1 the first time it is handed out, then 2, 3, …
        visible_at_ms: when it is handed out again unless acked (the store's clock, epoch ms).
        dead: its attempts are exhausted: the caller moves it to the DLQ and acks it.
        message: the message (its ``topic`` the parent, ``queue_id`` 0), None for an entry that is
            not one (logged when decoding).
    """

    lite_topic: str
    offset: int
    attempt: int
    visible_at_ms: int
    dead: bool
    message: MessageExt | None


@dataclass(frozen=True)
class LiteRound:
    """What one lite receive returned: the deliveries, when a lite topic of the member is next ready
    (epoch ms, None: none is waiting for an invisible time) and the wake stream's last id (block for
    entries after it)."""

    deliveries: list[LiteDelivery]
    next_ready_ms: int | None
    wake_id: str


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class LiteOps(StoreBase):
    """Lite topics of lite parents: sends, subscriptions, receives, acks, hand-over, listing."""

    def lite_keys(self, parent: str) -> LiteKeys:
        """The keys of ``parent``'s lite topics."""
        return self.keys.lite(parent)

    @operation
    def put_lite(
        self, parent: str, lite: str, fields: Sequence[Any], expiration_ms: int, keep: int = LITE_KEEP_MESSAGES
    ) -> Op[tuple[int, int, bool]]:
        """Append one encoded message (:func:`codec.encode`'s put form: its item count, then its field/value
        pairs) to lite topic ``lite`` of ``parent``, creating it when it does not exist; it expires
        ``expiration_ms`` after this write and keeps its last ``keep`` messages.

        Returns:
            ``(offset, store_timestamp_ms, created)``.

        Raises:
            ReplicaAckTimeout: stored on the master; fewer replicas than ``sync_replicas`` confirmed
                (its ``result`` is ``(offset, store_timestamp_ms)``).
            MQBrokerError: the store failed.
        """
        k = self.lite_keys(parent)
        with self._errors(f"sending to lite topic {lite!r} of {parent!r}"):
            try:
                reply = yield from self._write(
                    "put-lite", [k.state(lite), k.groups], put_lite_argv(k, lite, fields, expiration_ms, keep)
                )
            except ReplicaAckTimeout as e:
                e.result = (int(e.result[0]), int(e.result[1]))
                raise
        return int(reply[0]), int(reply[1]), bool(int(reply[2]))

    @operation
    def subscribe_lite(self, parent: str, group: str, client: str, lite: str, now_ms: int) -> Op[bool]:
        """Make ``client`` of ``group`` the owner of lite topic ``lite`` (woken when it has messages);
        True when it had not subscribed it before."""
        k = self.lite_keys(parent)
        keys = [k.owner(group), k.subs(group, client), k.groups, k.ready(group, client), k.wake(group, client), k.alive(group)]
        reply = yield from self._script(
            "subscribe-lite", keys, [k.prefix, group, client, lite, now_ms], f"subscribing lite topic {lite!r}"
        )
        return bool(int(reply))

    @operation
    def unsubscribe_lite(self, parent: str, group: str, client: str, lite: str) -> Op[bool]:
        """Stop ``client`` consuming ``lite``; True when it had subscribed it."""
        k = self.lite_keys(parent)
        keys = [k.owner(group), k.subs(group, client), k.ready(group, client)]
        reply = yield from self._script("unsubscribe-lite", keys, [client, lite], f"unsubscribing lite topic {lite!r}")
        return bool(int(reply))

    @operation
    def lite_subscriptions(self, parent: str, group: str, client: str) -> Op[set[str]]:
        """The lite topics of ``parent`` that ``client`` of ``group`` owns now."""
        key = self.lite_keys(parent).subs(group, client)
        with self._errors(f"reading the lite subscriptions of {client!r}"):
            members = yield Cmd(lambda c: c.smembers(key))
        return {_text(m) for m in members}

    @operation
    def receive_lite(
        self,
        parent: str,
        group: str,
        client: str,
        *,
        now_ms: int,
        invisible_ms: int,
        max_messages: int,
        max_attempts: int,
        max_topics: int,
    ) -> Op[LiteRound]:
        """Hand out up to ``max_messages`` messages of the lite topics ``client`` owns (see receive-lite-4.lua)."""
        k = self.lite_keys(parent)
        keys = [k.ready(group, client), k.wake(group, client), k.alive(group), k.owner(group)]
        argv = [k.prefix, group, client, now_ms, invisible_ms, max_messages, max_attempts, max_topics]
        out, next_ready, wake_id = yield from self._script("receive-lite", keys, argv, f"receiving lite topics of {parent!r}")
        deliveries = []
        for kind, lite, offset, attempt, visible_at, packed in out:
            name = _text(lite)
            msgs = codec.decode_entries(parent, 0, [(f"0-{int(offset) + 1}".encode(), unpack_fields(packed))])
            msg = msgs[0] if msgs else None
            if msg is not None:
                msg.lite_topic = name
            deliveries.append(LiteDelivery(name, int(offset), int(attempt), int(visible_at), _text(kind) == "d", msg))
        nxt = int(next_ready)
        return LiteRound(deliveries, None if nxt < 0 else nxt, _text(wake_id))

    @operation
    def ack_lite(
        self,
        parent: str,
        group: str,
        client: str,
        lite: str,
        offset: int,
        visible_at_ms: int,
        new_visible_at_ms: int | None,
        now_ms: int,
    ) -> Op[bool]:
        """Acknowledge (``new_visible_at_ms`` None) or re-time a lite message handed out until
        ``visible_at_ms``; False when that receipt expired."""
        k = self.lite_keys(parent)
        keys = [k.inflight(group, lite), k.state(lite), k.alive(group)]
        new = "" if new_visible_at_ms is None else new_visible_at_ms
        reply = yield from self._script(
            "ack-lite", keys, [group, offset, visible_at_ms, new, client, now_ms], f"acking lite topic {lite!r}"
        )
        return bool(int(reply))

    @operation
    def lite_beat(
        self, parents: Sequence[str], group: str, client: str, now_ms: int, stale_before_ms: int
    ) -> Op[dict[str, list[str]]]:
        """Say ``client`` is alive on each lite parent; the members of ``group`` there last seen
        before ``stale_before_ms`` (stopped: their lite topics are to be taken over), by parent."""
        stale: dict[str, list[str]] = {}
        for parent in parents:
            alive = self.lite_keys(parent).alive(group)
            with self._errors(f"beating on lite parent {parent!r}"):
                yield Cmd(functools.partial(_seen, key=alive, member=client, at_ms=now_ms))
                found = yield Cmd(functools.partial(_stopped, key=alive, before_ms=stale_before_ms))
            stale[parent] = [_text(m) for m in found if _text(m) != client]
        return stale

    @operation
    def take_over_lite(
        self, parent: str, group: str, dead: str, client: str, *, stale_before_ms: int, most: int, now_ms: int
    ) -> Op[tuple[int, int]]:
        """Move up to ``most`` lite topics of stopped member ``dead`` to ``client``; ``(moved, left)``,
        moved -1 when ``dead`` is alive after all."""
        k = self.lite_keys(parent)
        keys = [
            k.alive(group),
            k.owner(group),
            k.subs(group, dead),
            k.subs(group, client),
            k.ready(group, dead),
            k.ready(group, client),
            k.wake(group, client),
        ]
        argv = [dead, client, stale_before_ms, most, now_ms]
        moved, left = yield from self._script("take-over-lite", keys, argv, f"taking over the lite topics of {dead!r}")
        return int(moved), int(left)

    @operation
    def leave_lite(self, parents: Sequence[str], group: str, client: str) -> Op[None]:
        """Mark ``client`` as stopped on each lite parent (its lite topics go to the next member that
        beats): a clean shutdown hands them over at once instead of after the member timeout."""
        for parent in parents:
            alive = self.lite_keys(parent).alive(group)
            with self._errors(f"leaving lite parent {parent!r}"):
                yield Cmd(functools.partial(_seen, key=alive, member=client, at_ms=0))

    @operation
    def wait_lite(self, streams: Mapping[str, str], block_ms: int) -> Op[None]:
        """Block up to ``block_ms`` until any of ``streams`` (key → the id to read after) has a newer
        entry: the member's wake streams and, standalone, its queues' logs (one ``XREAD``)."""
        with self._errors("waiting for lite messages"):
            (yield Cmd(lambda c: c.xread(dict(streams), count=1, block=max(1, int(block_ms)))))

    @operation
    def list_lite_topics(self, parent: str, prefix: str = "", *, cursor: int = 0, count: int = 100) -> Op[LitePage]:
        """Up to ``count`` live lite topics of ``parent`` whose names start with ``prefix``, and the
        cursor of the next page (0: this was the last). ``SCAN`` over the node holding the parent (no
        index to keep up to date on each send); the cursor is the ``SCAN`` cursor and how many names of
        that step's reply the page took (a step may return more than a page holds). A lite topic
        created or expiring while pages are read may be listed or not."""
        k = self.lite_keys(parent)
        skip_len = len(k.state(""))
        scan = functools.partial(
            _scan, cluster=self.conn.kind == "cluster", pattern=k.state_pattern(prefix), count=max(count, 10), node_key=k.groups
        )
        at, skip = cursor >> _SKIP_BITS, cursor & _SKIP_MASK
        names: list[str] = []
        with self._errors(f"listing the lite topics of {parent!r}"):
            while True:
                following, found = yield Cmd(functools.partial(scan, cursor=at))
                step = sorted(_text(key)[skip_len:] for key in found)
                taken = step[skip : skip + count - len(names)]
                names += taken
                if skip + len(taken) < len(step):  # the page is full within this step: resume inside it
                    return names, (at << _SKIP_BITS) | (skip + len(taken))
                at, skip = following, 0
                if at == 0 or len(names) >= count:
                    return names, at << _SKIP_BITS


def _scan(client: Any, *, cursor: int, cluster: bool, pattern: str, count: int, node_key: str) -> Any:
    """One ``SCAN`` step on the node holding ``node_key``'s slot: ``(next cursor, keys)`` (an awaitable of
    it on an asyncio client)."""
    if not cluster:
        return client.scan(cursor, match=pattern, count=count)
    reply = client.execute_command(
        "SCAN", cursor, "MATCH", pattern, "COUNT", count, target_nodes=client.get_node_from_key(node_key)
    )
    if inspect.isawaitable(reply):
        return _cluster_scan_reply(reply)
    return _one_node(reply)


async def _cluster_scan_reply(reply: Any) -> tuple[int, list[Any]]:
    return _one_node(await reply)


def _one_node(reply: Any) -> tuple[int, list[Any]]:
    """A cluster client's ``SCAN`` reply (cursors by node, keys) for one node."""
    cursors, keys = reply
    return (int(next(iter(cursors.values()))) if isinstance(cursors, dict) else int(cursors)), list(keys)


def _seen(client: Any, *, key: str, member: str, at_ms: int) -> Any:
    """Set ``member``'s last-seen time in alive zset ``key``."""
    return client.zadd(key, {member: at_ms})


def _stopped(client: Any, *, key: str, before_ms: int) -> Any:
    """Up to 16 members of alive zset ``key`` last seen before ``before_ms``."""
    return client.zrangebyscore(key, "-inf", f"({before_ms}", start=0, num=16)


def put_lite_argv(keys: LiteKeys, lite: str, fields: Sequence[Any], expiration_ms: int, keep: int) -> list[Any]:
    """The ``put-lite`` arguments of one encoded message (:func:`codec.encode`'s put form)."""
    return [keys.prefix, lite, expiration_ms, keep, pack_fields(fields[1:])]


def pack_fields(items: Sequence[Any]) -> bytes:
    """Field/value items as one value: netstrings (``LEN:BYTES`` each), what a lite topic's hash
    stores a message as (one hash field a message; D144)."""
    out = bytearray()
    for item in items:
        raw = item if isinstance(item, bytes) else str(item).encode()
        out += b"%d:" % len(raw)
        out += raw
    return bytes(out)


def unpack_fields(packed: bytes) -> list[bytes]:
    """The items :func:`pack_fields` packed (and ``put-lite`` appended to)."""
    items: list[bytes] = []
    at, end = 0, len(packed)
    while at < end:
        colon = packed.index(b":", at)
        size = int(packed[at:colon])
        items.append(packed[colon + 1 : colon + 1 + size])
        at = colon + 1 + size
    return items
