"""Store operations of tiered storage: a queue's manifest of segments, the upload lease, the commit
of an upload (``record-segment-4.lua``), and the pull path's read-through to the tier.

The manifest of queue ``Q`` is the sorted set ``{ns:T:Q}:segments`` in the queue's slot (see
:mod:`mq.keys`): one member per segment (its JSON, :class:`mq.tier.segment.Segment`), scored by its
start offset. The broker service publishes its ``tier_url`` in the namespace settings; a store opens
that tier the first time a pull lands below what Redis holds.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from mq.errors import MQBrokerError
from mq.keys import offset_of
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue
from mq.store.base import StoreBase, all_or_raise
from mq.store.groups import PullRequest, PullResult, SimpleDelivery
from mq.store.ops import Blocking, Cmd, Op, operation
from mq.tier.segment import Segment

log = logging.getLogger("mq.store")

#: The namespace setting holding the tier's URL (published by the broker service).
TIER_URL_SETTING = "tier_url"
#: Seconds a store trusts what it read of the namespace's tier setting before reading it again.
TIER_SETTING_TTL_S = 30.0

#: ``record-segment``'s refusals and what they mean.
RECORD_REFUSALS = {
    -1: "the upload lease was lost (another broker service took the queue over)",
    -2: "the segment is not contiguous with the manifest and the log (a gap or an overlap)",
    -3: "the segment's range is empty or reaches past the queue's next offset",
}


def _every(message: MessageExt) -> bool:
    """The matcher of unfiltered reads."""
    return True


def one_per_message_group(messages: Sequence[MessageExt], next_offset: int) -> tuple[list[MessageExt], int]:
    """A FIFO batch of ``messages`` (in offset order, read up to ``next_offset``): up to the first
    message whose message group (system property ``__SHARDINGKEY``; a message without one is a group
    of its own) is already in the batch, and where the group's cursor goes (that message's offset, or
    ``next_offset``) — ``receive-fifo-6.lua``'s rule."""
    taken: set[str] = set()
    for i, m in enumerate(messages):
        group = m.system_properties.get("__SHARDINGKEY")
        key = f"g{group}" if isinstance(group, str) else f"o{m.queue_offset}"
        if key in taken:
            return list(messages[:i]), m.queue_offset
        taken.add(key)
    return list(messages), next_offset


class SegmentRefused(MQBrokerError):
    """``record-segment`` refused a segment (nothing changed; the uploaded file is an orphan)."""


@dataclass(frozen=True)
class HotQueue:
    """What Redis holds of one queue: its first and next offsets, entries and memory, bytes."""

    first: int
    seq: int
    length: int
    memory_bytes: int


class TierOps(StoreBase):
    """The manifest, the upload lease and the tier read-through of pulls."""

    # -- manifest -------------------------------------------------------------------------------

    @operation
    def segments(self, topic: str, queue_id: int) -> Op[list[Segment]]:
        """The queue's recorded segments, in offset order (empty without a tier)."""
        return (yield from TierOps.segments_of.op(self, [(topic, queue_id)]))[0]

    @operation
    def segments_of(self, queues: Sequence[tuple[str, int]]) -> Op[list[list[Segment]]]:
        """:meth:`segments` of each ``(topic, queue_id)``, in one round trip."""
        keys = [self.queue_keys(t, q).segments for t, q in queues]
        replies = all_or_raise(
            (yield from self._pipeline(lambda p: [p.zrange(k, 0, -1) for k in keys], "reading tier manifests"))
        )
        return [[Segment.from_member(m) for m in members] for members in replies]

    @operation
    def record_segment(self, topic: str, queue_id: int, segment: Segment, token: str) -> Op[int]:
        """Record an uploaded segment in the queue's manifest; returns the manifest's new end.

        Raises:
            SegmentRefused: the caller lost its lease, or the segment would leave a gap or an overlap
                (nothing changed).
        """
        k = self.queue_keys(topic, queue_id)
        result = yield from self._script(
            "record-segment",
            [k.segments, k.log, k.meta, k.tier_lease],
            [segment.start, segment.end, segment.to_member(), token],
            f"recording a tier segment of {topic!r} queue {queue_id}",
        )
        code = int(result)
        if code < 0:
            raise SegmentRefused(
                f"segment [{segment.start}, {segment.end}) of {topic!r} queue {queue_id} refused: {RECORD_REFUSALS[code]}"
            )
        return code

    @operation
    def forget_segments(self, topic: str, queue_id: int, segments: Sequence[Segment]) -> Op[dict[str, int] | None]:
        """Remove segments from the front of the manifest (the tier's retention) and count, per group,
        the removed messages it had not consumed (``forget-segments-3.lua``, with the removal: the
        same counter as Redis's retention, D83); returns group → messages lost in this call, or None
        when ``segments`` are not the manifest's first ones any more (nothing changed)."""
        members = [s.to_member() for s in segments]
        if not members:
            return {}
        k = self.queue_keys(topic, queue_id)
        reply = yield from self._script(
            "forget-segments",
            [k.segments, k.offsets, k.expired],
            members,
            f"removing tier segments of {topic!r} queue {queue_id}",
        )
        if int(reply[0]) < 0:
            return None
        return {(g.decode() if isinstance(g, bytes) else str(g)): int(n) for g, n in zip(reply[1::2], reply[2::2])}

    # -- the upload lease -----------------------------------------------------------------------

    @operation
    def take_tier_lease(self, topic: str, queue_id: int, token: str, ttl_ms: int) -> Op[bool]:
        """Take the queue's upload lease for ``ttl_ms`` (``SET NX PX``, also at ``maxmemory``); False when
        another holds it."""
        key = self.queue_keys(topic, queue_id).tier_lease
        doing = f"taking the tier lease of {topic!r} queue {queue_id}"
        return bool((yield from self._script("take-lease", [key], [token, int(ttl_ms)], doing)))

    @operation
    def release_tier_lease(self, topic: str, queue_id: int, token: str) -> Op[bool]:
        """Give the lease back if the caller still holds it (compare and delete)."""
        key = self.queue_keys(topic, queue_id).tier_lease
        result = yield from self._script(
            "release-lease", [key], [token], f"releasing the tier lease of {topic!r} queue {queue_id}"
        )
        return bool(result)

    # -- what Redis holds -----------------------------------------------------------------------

    @operation
    def hot_queue(self, topic: str, queue_id: int, *, memory: bool = True) -> Op[HotQueue]:
        """The queue's first and next offsets in Redis, its entries and the log's memory (``MEMORY
        USAGE``, bytes, which walks the whole log: asked only with ``memory``; 0 without it or where
        the server cannot tell)."""
        k = self.queue_keys(topic, queue_id)

        def build(p: Any) -> None:
            p.xrange(k.log, "-", "+", count=1)
            p.hget(k.meta, "seq")
            p.xlen(k.log)
            if memory:
                p.execute_command("MEMORY USAGE", k.log, "SAMPLES", "0")

        first, seq, length, *measured = yield from self._pipeline(build, f"sizing {topic!r} queue {queue_id}")
        for r in (first, seq, length):
            if isinstance(r, MQBrokerError):
                raise r
        size = measured[0] if measured else 0
        next_offset = int(seq or 0)
        return HotQueue(
            offset_of(first[0][0]) if first else next_offset,
            next_offset,
            int(length),
            0 if isinstance(size, Exception) or size is None else int(size),
        )

    # -- reading through to the tier ------------------------------------------------------------

    @operation
    def tier_reader(self) -> Op[Any]:
        """The namespace's :class:`~mq.tier.reader.TierReader` (None without a tier): for readers that
        plan their own reads (the Spark source)."""
        return (yield from self._tier_reader())

    def _tier_reader(self) -> Op[Any]:
        """The namespace's :class:`~mq.tier.reader.TierReader`, or None without a tier (the setting is
        read again every :data:`TIER_SETTING_TTL_S`)."""
        state: dict[str, Any] = self.__dict__.setdefault("_tier_state", {"at": -1e9, "url": None, "reader": None})
        if time.monotonic() - state["at"] >= TIER_SETTING_TTL_S:
            with self._errors("reading the namespace's tier setting"):
                raw = yield Cmd(lambda c: c.hget(self.keys.config, TIER_URL_SETTING))
            url = raw.decode() if isinstance(raw, bytes) else raw
            if url != state["url"]:
                state["url"], state["reader"] = url, None
                if url:
                    from mq.tier.location import open_tier
                    from mq.tier.reader import TierReader

                    state["reader"] = TierReader(open_tier(url), self.keys.namespace)
            state["at"] = time.monotonic()
        return state["reader"]

    def read_through(
        self, pulls: Sequence[PullRequest], results: list[PullResult | MQBrokerError]
    ) -> Op[list[PullResult | MQBrokerError]]:
        """Replace the result of each pull that landed below Redis's first offset, where the tier holds
        the messages, with what the tier holds from the pull's offset on (its filter evaluated in
        Python). A pull whose first message is the one it asked for costs nothing more; a suspect one
        costs one round trip for the log's first offset and the manifest around the offset."""
        suspects = [
            i
            for i, (p, r) in enumerate(zip(pulls, results))
            if isinstance(r, PullResult)
            and r.held
            and p.offset < r.max_offset
            and (not r.messages or r.messages[0].queue_offset > p.offset)
        ]
        if not suspects:
            return results
        reader = yield from self._tier_reader()
        if reader is None:
            return results
        keys = [self.queue_keys(pulls[i].topic, pulls[i].queue_id) for i in suspects]

        def build(p: Any) -> None:
            for i, k in zip(suspects, keys):
                p.xrange(k.log, "-", "+", count=1)
                p.zrevrangebyscore(k.segments, pulls[i].offset, "-inf", start=0, num=1)
                p.zrange(k.segments, 0, 0)

        replies = yield from self._pipeline(build, "reading tier manifests")
        out = list(results)
        for n, i in enumerate(suspects):
            first, covering, lowest = replies[3 * n : 3 * n + 3]
            if any(isinstance(r, MQBrokerError) for r in (first, covering, lowest)):
                out[i] = next(r for r in (first, covering, lowest) if isinstance(r, MQBrokerError))
                continue
            p, r = pulls[i], cast(PullResult, results[i])
            log_first = offset_of(first[0][0]) if first else r.max_offset
            if p.offset >= log_first or not lowest:
                continue  # Redis holds the offset (the filter skipped ahead), or nothing is tiered
            segs = [Segment.from_member(m) for m in (covering or lowest)]
            offset = max(p.offset, segs[0].start)  # below the tier's start: gone from both (retention)
            if offset >= segs[-1].end:  # a hole no tier covers (removed by something else): go on in Redis
                out[i] = PullResult([], log_first, r.max_offset)
                continue
            out[i] = yield from self._read_tier(reader, p, segs, offset, r.max_offset)
        return out

    def _read_tier(
        self, reader: Any, p: PullRequest, segs: list[Segment], offset: int, max_offset: int
    ) -> Op[PullResult | MQBrokerError]:
        from mq.tier.reader import matcher

        try:
            read = yield Blocking(
                lambda: reader.read(
                    p.topic,
                    p.queue_id,
                    segs,
                    offset,
                    p.max_messages or 1,
                    p.max_scan or p.max_messages,
                    matcher(p.filter_type, p.filter_data),
                )
            )
        except Exception as e:  # pyarrow raises OSError subclasses and ArrowException: the pull failed, nothing moved
            log.warning("reading the tier for %r queue %d at offset %d failed: %s", p.topic, p.queue_id, offset, e)
            return MQBrokerError(f"reading the tier for {p.topic!r} queue {p.queue_id} at offset {offset} failed: {e}")
        return PullResult(read.messages, read.next_offset, max(max_offset, read.next_offset))

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
        """The tier's part of a simple-consumer receive (see ``receive-simple-6.lua``): the messages
        handed out ``again`` whose entries are in the tier only, read there by offset, and, with a
        ``cursor`` below what Redis holds, up to ``want`` new messages from the tier that pass the
        group's filter (``scan``: filter type, filter data, most rows scanned), handed out by
        ``claim-tiered-3.lua`` only if no other receiver moved the cursor meanwhile. With ``fifo``
        (``receive-fifo-6.lua``), at most one message a message group: the batch ends before the
        first message whose group it already holds, and the cursor stays there.

        A tier that cannot be read hands out nothing: the messages again stay invisible until their
        time passes once more, the cursor does not move (logged at WARNING).
        """
        from mq.tier.reader import matcher

        reader = yield from self._tier_reader()
        if reader is None:
            log.warning("%s: the group's cursor is in the tier, but this store sees no tier_url yet", queue)
            return []
        topic, qid = queue.topic, queue.queue_id
        segs = yield from TierOps.segments.op(self, topic, qid)
        out: list[SimpleDelivery] = []
        try:
            for d in again:
                read = yield Blocking(functools.partial(reader.read, topic, qid, segs, d.offset, 1, 1, lambda m: True))
                found = [m for m in read.messages if m.queue_offset == d.offset]
                if found:
                    out.append(SimpleDelivery(d.offset, d.attempt, d.visible_at_ms, d.dead, found[0]))
                else:  # gone from the tier too (its retention): nothing to hand out any more
                    out.append(SimpleDelivery(d.offset, d.attempt, d.visible_at_ms, d.dead, None))
            if cursor is None or want <= len(out):
                return out
            ftype, fdata, max_scan = scan
            read = yield Blocking(
                functools.partial(reader.read, topic, qid, segs, cursor, want - len(out), max_scan, matcher(ftype, fdata))
            )
        except Exception as e:  # pyarrow raises OSError subclasses and ArrowException: nothing handed out from the tier
            log.warning("reading the tier for %s (simple group %r) failed: %s", queue, group, e)
            return out
        handed, next_offset = read.messages, read.next_offset
        if fifo:
            handed, next_offset = one_per_message_group(read.messages, read.next_offset)
        if next_offset <= cursor:
            return out
        k = self.queue_keys(topic, qid).simple(group)
        claimed = yield from self._script(
            "claim-tiered",
            k[2:5],
            [group, cursor, next_offset, visible_at_ms, *(m.queue_offset for m in handed)],
            f"handing out tiered messages of {queue}",
        )
        if int(claimed) == 1:
            out += [SimpleDelivery(m.queue_offset, 1, visible_at_ms, False, m) for m in handed]
        return out

    @operation
    def read_tiered(self, topic: str, queue_id: int, offset: int, count: int) -> Op[tuple[list[MessageExt], int]]:
        """Up to ``count`` messages of the queue from ``offset`` on that the tier holds (an offset below
        the tier's start moves up to it: retention removed those), and the offset Redis takes over
        from (``offset`` itself when the tier holds nothing there). Costs a manifest read, and the row
        groups read; nothing more without a tier.

        Raises:
            MQBrokerError: the tier could not be read.
        """
        reader = yield from self._tier_reader()
        if reader is None or count <= 0:
            return [], offset
        segs = yield from TierOps.segments.op(self, topic, queue_id)
        if not segs or offset >= segs[-1].end:
            return [], offset
        at, out = max(offset, segs[0].start), list[MessageExt]()
        while len(out) < count and at < segs[-1].end:
            try:
                read = yield Blocking(
                    functools.partial(reader.read, topic, queue_id, segs, at, count - len(out), count - len(out), _every)
                )
            except Exception as e:  # pyarrow's OSError subclasses and ArrowException
                raise MQBrokerError(f"reading the tier of {topic!r} queue {queue_id} at offset {at} failed: {e}") from e
            out += read.messages
            if read.next_offset <= at:  # a hole no segment covers: Redis from there
                break
            at = read.next_offset
        return out, at

    @operation
    def delete_tier_files(self, topic: str) -> Op[str | None]:
        """Delete every file the tier holds of ``topic`` (its folder: segments, orphans, uploads in
        progress); returns the folder's URL-free path, or None without a tier. For a topic already
        deleted from Redis: no manifest lists those files any more, and nothing else would remove them
        (the sweep walks the topics that exist).

        Raises:
            MQBrokerError: the tier refused (the files stay; nothing else changed).
        """
        reader = yield from self._tier_reader()
        if reader is None:
            return None
        location = reader.location
        folder: str = location.topic_dir(self.keys.namespace, topic)

        def delete() -> None:
            location.fs.delete_dir_contents(folder, missing_dir_ok=True)
            with contextlib.suppress(FileNotFoundError):  # an object store has no folders; a disk had none for this topic
                location.fs.delete_dir(folder)

        try:
            yield Blocking(delete)
        except Exception as e:  # pyarrow's OSError subclasses and ArrowException
            raise MQBrokerError(f"the tier's files of topic {topic!r} under {folder} could not be removed: {e}") from e
        return folder  # cached footers and row groups are keyed by file names no upload reuses

    def search_tier(self, topic: str, found: dict[int, int], timestamp_ms: int) -> Op[dict[int, int]]:
        """Correct Redis's answers to "the first offset stored at or after ``timestamp_ms``" where the
        tier holds a message that late: the first segment whose last store time reaches the time holds
        the answer, found in its store-time column. Costs a read of each queue's manifest, and of one
        column of one segment per queue whose answer is in the tier."""
        keys = {q: self.queue_keys(topic, q).segments for q in found}
        if not keys:
            return found
        replies = all_or_raise(
            (yield from self._pipeline(lambda p: [p.zrange(k, 0, -1) for k in keys.values()], "reading tier manifests"))
        )
        out = dict(found)
        for q, members in zip(keys, replies):
            segs = [Segment.from_member(m) for m in members]
            seg = next((s for s in segs if s.max_store_ms >= timestamp_ms), None)
            if seg is None:
                continue  # every tiered message is older: Redis's answer stands
            if seg.min_store_ms >= timestamp_ms:
                out[q] = seg.start
                continue
            reader = yield from self._tier_reader()
            if reader is None:
                continue
            with self._errors(f"searching the tier of {topic!r} queue {q}"):
                out[q] = yield Blocking(functools.partial(reader.first_stored_at, topic, q, seg, timestamp_ms))
        return out

    @operation
    def find_in_tier(
        self,
        topic: str,
        queue_ids: Sequence[int],
        column: str,
        wanted: str,
        limit: int,
        *,
        begin_ms: int | None = None,
        end_ms: int | None = None,
    ) -> Op[list[MessageExt]]:
        """Tiered messages of ``topic`` whose ``column`` (``"msg_id"`` or ``"keys"``) holds ``wanted``,
        oldest first per queue, at most ``limit`` per queue, stored within ``[begin_ms, end_ms]`` when
        given (segments and row groups outside it are not read).

        Cost: one manifest read per queue, then the ``column`` of every segment (every row group) the
        time bounds leave: a lookup without bounds reads that column of the whole tier.
        """
        reader = yield from self._tier_reader()
        if reader is None:
            return []
        manifests = yield from TierOps.segments_of.op(self, [(topic, q) for q in queue_ids])
        out: list[MessageExt] = []
        for q, segs in zip(queue_ids, manifests):
            found: list[MessageExt] = []
            for seg in segs:
                if (begin_ms is not None and seg.max_store_ms < begin_ms) or (end_ms is not None and seg.min_store_ms > end_ms):
                    continue
                with self._errors(f"searching the tier of {topic!r} queue {q}"):
                    found += yield Blocking(
                        functools.partial(reader.find, topic, q, seg, column, wanted, limit - len(found), begin_ms)
                    )
                if len(found) >= limit:
                    break
            out += found
        return out
