"""The tier uploader: copies each queue's oldest messages into Parquet segments, records them in the
queue's manifest, then lets hot retention trim Redis below the manifest's end [RocketMQ 5 tiered
store, Kafka KIP-405 ``local.retention.*``].

The commit protocol, per queue, under the queue's upload lease (one uploader per queue across broker
replicas; the lease token also fences the commit):

1. write the segment under a unique temporary name in the tier, then move it to its final name;
2. record it in the manifest (``record-segment-4.lua``: one script, one slot, refusing gaps and
   overlaps) — the commit point;
3. trim Redis, never at or past the manifest's end.

A crash before 2 leaves an orphan file nobody reads (the sweep removes it); a crash between 2 and 3
leaves the messages in both tiers, and readers take the tier's copy below the manifest's end and
Redis's above it, so nothing is read twice. An unreachable tier stops step 1: Redis keeps everything
(hot retention waits), logged at WARNING and counted (:class:`TierCounters`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from mq.errors import MQError
from mq.model.message import MessageExt
from mq.model.topic import TopicConfig
from mq.store import Store
from mq.tier.location import TierLocation
from mq.tier.plan import TierPolicy, hot_cut, upload_range
from mq.tier.segment import Segment
from mq.tier.writer import write_segment
from scheduler.config import BrokerConfig
from scheduler.retention import report_expired

log = logging.getLogger("scheduler.tier")

#: Messages read from Redis per round trip while a segment is written (its reply sits in the
#: connection's output buffer, counted in Redis's used memory: 256 KiB of 1 KiB messages).
READ_BATCH = 256
#: Messages trimmed per script call (each call is short: Redis serves others between them).
TRIM_BATCH = 1000
#: Most segments one queue uploads in one run (the other queues get their turn).
SEGMENTS_PER_RUN = 4
#: Most times hot retention by bytes measures the log again and trims more in one run.
TRIM_ROUNDS = 4


@dataclass
class TierCounters:
    """What this uploader did since it started (read by the metrics endpoint)."""

    segments: int = 0
    bytes: int = 0
    messages: int = 0
    errors: int = 0
    trimmed: int = 0
    #: per ``(topic, queue id)``: messages past hot retention that the tier does not hold yet
    stalled: dict[tuple[str, int], int] = field(default_factory=dict)


class TierUploader:
    """Uploads the queues of one namespace to its tier (see the module docstring).

    Attributes:
        step: called with the name of each step an upload passes ("uploading" mid-file, "uploaded"
            before the manifest, "recorded" before the trim, "trimming" between trim calls): a hook
            for fault tests; does nothing by default.
    """

    def __init__(self, store: Store, config: BrokerConfig, location: TierLocation, owner: str) -> None:
        self._store = store
        self._config = config
        self.location = location
        self._owner = owner
        self.counters = TierCounters()
        self.step: Callable[[str], None] = lambda name: None
        self._lock = threading.Lock()
        self.policy = TierPolicy(
            segment_messages=config.tier_segment_messages,
            segment_age_s=config.tier_segment_age_s,
            hot_retention_s=config.hot_retention_s,
            hot_retention_bytes=config.hot_retention_bytes,
            reserved_s=config.file_reserved_time_h * 3600,
        )

    def run(self) -> None:
        """One pass over every queue of every topic (a shrunk topic's high queues too)."""
        for name, (config, span) in sorted(self._store.topic_spans().items()):
            policy = self.policy_of(config)
            for qid in range(span):
                self._with_lease(name, qid, functools.partial(self._upload_and_trim, policy=policy))

    def policy_of(self, config: TopicConfig) -> TierPolicy:
        """The namespace's policy with the topic's own hot retention, where it has one (``Admin.update_topic``)."""
        return dataclasses.replace(
            self.policy,
            hot_retention_s=self.policy.hot_retention_s if config.hot_retention_s is None else config.hot_retention_s,
            hot_retention_bytes=self.policy.hot_retention_bytes
            if config.hot_retention_bytes is None
            else config.hot_retention_bytes,
        )

    def sweep(self, grace_s: float) -> int:
        """Remove files of the tier no manifest lists (crashed uploads, and uploads that finished after
        their topic was deleted) older than ``grace_s``, and segments past ``file_reserved_time_h``;
        returns how many files were removed."""
        removed = 0
        for name, (_, span) in sorted(self._store.topic_spans().items()):
            for qid in range(span):
                removed += self._with_lease(name, qid, lambda t, q, _token: self._sweep_queue(t, q, grace_s)) or 0
        return removed + self._sweep_deleted_topics(grace_s)

    def _sweep_deleted_topics(self, grace_s: float) -> int:
        """Files under the folders of topics that no longer exist. ``Admin.delete_topic`` removes a
        topic's folder, but an upload writing at that moment finishes after it: no manifest lists its
        file, and :meth:`_sweep_queue` walks only the topics that exist. The folder is listed before
        the topics are read, so a topic made in between (its files are newer than the listing) is kept."""
        from pyarrow import fs as pafs

        folder = self.location.namespace_dir(self._store.conn.namespace)
        infos = self.location.fs.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
        existing = set(self._store.topic_spans())
        now, kept_topics, removed = time.time(), set(), collections.Counter[str]()
        for info in infos:
            topic = info.path[len(folder) + 1 :].split("/", 1)[0]
            if info.type != pafs.FileType.File or topic in existing:
                continue
            age_s = now - info.mtime.timestamp() if info.mtime is not None else grace_s
            if age_s < grace_s:
                kept_topics.add(topic)
                continue
            self.location.fs.delete_file(info.path)
            removed[topic] += 1
        for topic, count in sorted(removed.items()):
            log.warning(
                "tier: removed %d file(s) of topic %r, which no longer exists (an upload that ended after it was deleted)",
                count,
                topic,
            )
        for info in infos:  # a disk keeps the emptied folders: remove those of deleted topics
            topic = info.path[len(folder) + 1 :]
            if info.type == pafs.FileType.Directory and "/" not in topic and topic not in existing | kept_topics:
                with contextlib.suppress(FileNotFoundError, OSError):
                    self.location.fs.delete_dir(info.path)
        return sum(removed.values())

    def _with_lease(self, topic: str, queue_id: int, work: Callable[[str, int, str], int | None]) -> int | None:
        token = f"{self._owner}.{uuid.uuid4().hex}"
        try:
            if not self._store.take_tier_lease(topic, queue_id, token, int(self._config.tier_lease_s * 1000)):
                return None  # another broker service works on this queue now
        except MQError as e:
            log.warning("tier: could not take the lease of %r queue %d: %s", topic, queue_id, e)
            return None
        try:
            return work(topic, queue_id, token)
        finally:
            try:
                self._store.release_tier_lease(topic, queue_id, token)
            except MQError as e:  # it expires by itself
                log.warning("tier: could not release the lease of %r queue %d: %s", topic, queue_id, e)

    def _upload_and_trim(self, topic: str, queue_id: int, token: str, policy: TierPolicy) -> None:
        store = self._store
        now_ms = store.server_time_ms()
        hot = store.hot_queue(topic, queue_id, memory=policy.hot_retention_bytes is not None)
        segments = store.segments(topic, queue_id)
        keep_s = policy.hot_retention_s if policy.hot_retention_s is not None else policy.reserved_s
        time_cut = store.search_offset(topic, queue_id, now_ms - int(keep_s * 1000))
        cut = hot_cut(hot.first, hot.seq, hot.length, hot.memory_bytes, time_cut, policy)
        tiered = segments[-1].end if segments else hot.first
        try:
            for _ in range(SEGMENTS_PER_RUN):
                oldest = store.read(topic, queue_id, tiered, 1)
                oldest_ms = oldest[0].store_timestamp_ms if oldest and oldest[0].queue_offset == tiered else None
                planned = upload_range(tiered, hot.seq, oldest_ms, now_ms, cut, policy)
                if planned is None:
                    break
                segment = self._upload(topic, queue_id, token, *planned)
                if segment is None:
                    break
                tiered = store.record_segment(topic, queue_id, segment, token)
                self._count_upload(segment)
                self.step("recorded")
        except Exception as e:  # the store's, pyarrow's (OSError, ArrowException): counted and logged, never a dead job
            self._failed(topic, queue_id, e)
        first = hot.first
        for _ in range(TRIM_ROUNDS):
            if min(cut, tiered) <= first or not self._trim(topic, queue_id, min(cut, tiered), first):
                break
            if policy.hot_retention_bytes is None:
                break
            # a log's memory is not linear in its entries (node headers stay): measure again
            hot = store.hot_queue(topic, queue_id)
            first, cut = hot.first, max(cut, hot_cut(hot.first, hot.seq, hot.length, hot.memory_bytes, time_cut, policy))
        self._stall(topic, queue_id, cut - tiered)

    def _upload(self, topic: str, queue_id: int, token: str, start: int, end: int) -> Segment | None:
        segment = write_segment(
            self.location, self._store.conn.namespace, topic, queue_id, self._read(topic, queue_id, start, end), token, self.step
        )
        if segment is not None:
            self.step("uploaded")
        return segment

    def _read(self, topic: str, queue_id: int, start: int, end: int) -> Iterator[list[MessageExt]]:
        """The messages ``[start, end)`` from Redis in batches, bounded by ``tier_segment_bytes``."""
        offset, size = start, 0
        while offset < end and size < self._config.tier_segment_bytes:
            batch = self._store.read(topic, queue_id, offset, min(READ_BATCH, end - offset))
            if not batch or batch[0].queue_offset != offset:
                raise MQError(
                    f"{topic!r} queue {queue_id}: offset {offset} is not in Redis any more (removed by something "
                    "that ignored the tier: a broker service without tier_url?); the tier cannot continue past it"
                )
            batch = [m for m in batch if m.queue_offset < end]
            yield batch
            size += sum(len(m.body) for m in batch)
            offset = batch[-1].queue_offset + 1

    def _trim(self, topic: str, queue_id: int, below: int, first: int) -> bool:
        """Trim Redis below ``below`` (never past the manifest's end: the caller's bound); False when
        the store failed."""
        try:
            while True:
                removed = self._store.trim(
                    topic, queue_id, 2**62, TRIM_BATCH, count_unconsumed=False, before_offset=below, once=True
                ).removed
                with self._lock:
                    self.counters.trimmed += removed
                if removed < TRIM_BATCH:
                    return True
                self.step("trimming")
        except MQError as e:
            self._failed(topic, queue_id, e)
            return False

    def _stall(self, topic: str, queue_id: int, waiting: int) -> None:
        with self._lock:
            if waiting > 0:
                self.counters.stalled[(topic, queue_id)] = waiting
            else:
                self.counters.stalled.pop((topic, queue_id), None)
        if waiting > 0:
            log.warning(
                "tier: hot retention of %r queue %d waits: %d messages past it are not in the tier yet (Redis keeps them)",
                topic,
                queue_id,
                waiting,
            )

    def _failed(self, topic: str, queue_id: int, e: BaseException) -> None:
        with self._lock:
            self.counters.errors += 1
        log.warning(
            "tier: upload of %r queue %d to %s failed (retried at the next run): %s", topic, queue_id, self.location.url, e
        )

    def _count_upload(self, segment: Segment) -> None:
        with self._lock:
            self.counters.segments += 1
            self.counters.bytes += segment.size_bytes
            self.counters.messages += segment.messages

    def _sweep_queue(self, topic: str, queue_id: int, grace_s: float) -> int:
        from pyarrow import fs as pafs

        store, namespace = self._store, self._store.conn.namespace
        segments = store.segments(topic, queue_id)
        reserved_ms = store.server_time_ms() - int(self.policy.reserved_s * 1000)
        expired: list[Segment] = []
        for seg in segments[:-1]:  # the last one stays: it marks where Redis takes over
            if seg.max_store_ms >= reserved_ms:
                break
            expired.append(seg)
        if expired:
            lost = store.forget_segments(topic, queue_id, expired)
            if lost is None:  # the manifest changed under us (another sweep): its files stay until the next sweep
                return 0
            log.info("tier: %d segments of %r queue %d past retention removed", len(expired), topic, queue_id)
            report_expired(topic, queue_id, lost)  # what groups never consumed: WARNING, counted in the store
        listed = {s.name for s in segments if s not in expired}
        folder = self.location.queue_dir(namespace, topic, queue_id)
        infos = self.location.fs.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
        removed, now = 0, time.time()
        for info in infos:
            if info.type != pafs.FileType.File or info.base_name in listed:
                continue
            age_s = now - info.mtime.timestamp() if info.mtime is not None else grace_s
            if age_s >= grace_s:
                self.location.fs.delete_file(info.path)
                removed += 1
        if removed:
            log.info("tier: removed %d unrecorded or expired files of %r queue %d", removed, topic, queue_id)
        return removed
