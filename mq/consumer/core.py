"""The machinery shared by push and pull consumers: registration, rebalance, pulling, long polling
and offsets [RocketMQ ``RebalanceImpl``, ``PullMessageService``, ``OffsetStore``].

Threads of one consumer:

- the APScheduler jobs: a heartbeat every second (which rebalances at once when the group's
  members changed, and keeps retrying hand-overs until they settle), the 20 s rebalance backstop,
  and persisting offsets every 5 s;
- one puller: pulls every queue that has something new, all in one pipelined round trip (the
  filter runs in the store), and hands the messages to ``deliver``;
- one long-poll waiter per idle queue: ``XREAD BLOCK`` on the queue's stream from its next offset,
  so a consumer with nothing to read waits in Redis and wakes within a millisecond of a new
  message. One waiter per queue works the same on a cluster, where one call cannot block on keys
  of different slots (see docs/decisions.md).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from mq import metrics
from mq.connection import REDIS_ERRORS, Connection, translate_errors
from mq.consumer.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from mq.consumer.locks import LOCAL_LOCK_EXPIRY_S, LOCK_RENEW_INTERVAL_S, try_lock, unlock
from mq.consumer.offsets import (
    PERSIST_INTERVAL_S,
    LocalFileOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
    read_group_offsets,
    write_group_offsets,
)
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.registry import HEARTBEAT_INTERVAL_S, ClientInfo, Registry, new_client_id
from mq.consumer.types import ConsumeFromWhere, MessageModel
from mq.errors import MQBrokerError, MQClientError
from mq.filter import MessageSelector
from mq.keys import stream_id
from mq.message import MessageExt
from mq.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.store import Store, codec, scripts
from mq.store.store import PullRequest, PullResult
from mq.validation import RETRY_PREFIX, check_group, check_topic

log = logging.getLogger("mq.consumer")

#: Seconds between rebalances when nothing changed [RocketMQ ``rebalanceInterval`` 20 s].
REBALANCE_INTERVAL_S = 20.0
#: Messages cached per queue before pulling pauses [RocketMQ ``pullThresholdForQueue``].
PULL_THRESHOLD_FOR_QUEUE = 1000
#: Body bytes cached per queue before pulling pauses [RocketMQ ``pullThresholdSizeForQueue`` 100 MiB].
PULL_THRESHOLD_SIZE_FOR_QUEUE = 100 * 1024 * 1024
#: Offset span of cached messages before pulling pauses (concurrent) [RocketMQ ``consumeConcurrentlyMaxSpan``].
CONSUME_CONCURRENTLY_MAX_SPAN = 2000
#: Entries a pull may scan past without a match before it returns (bounds work under a filter).
PULL_MAX_SCAN = 1024
#: Milliseconds a long-poll waiter blocks in Redis before it blocks again.
LONG_POLL_BLOCK_MS = 10_000
#: Seconds a released queue of a concurrent consumer waits for its cached messages to be consumed
#: before it is released anyway (the rest is then redelivered to the new owner). An orderly queue
#: is released between two batches instead, however long that takes.
RELEASE_WAIT_S = 10.0
#: At shutdown, how long an orderly queue's running batch may take before the queue is left locked, s.
SHUTDOWN_BATCH_WAIT_S = 30.0
#: Default of ``consume_timestamp_ms``: 30 minutes ago [RocketMQ ``consumeTimestamp``].
DEFAULT_CONSUME_TIMESTAMP_AGO_MS = 30 * 60 * 1000

#: The subscription of a topic with no expression: every message.
MATCH_ALL = MessageSelector.by_tag("*")

Deliver = Callable[[ProcessQueue, list[MessageExt]], None]


def filter_args(selector: MessageSelector) -> tuple[str, str]:
    """The ``pull-messages`` filter type and data of a subscription."""
    wire = selector.to_wire()
    if wire["type"] == "SQL92":
        return "SQL92", json.dumps(wire["ast"], separators=(",", ":"))
    tags = wire["tags"]
    return ("", "") if tags == ["*"] else ("TAG", "\x1f".join(tags))


class ConsumerCore:
    """Everything a consumer does except handing messages to the application."""

    def __init__(
        self,
        group: str,
        url: str | None,
        *,
        namespace: str,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        consume_timestamp_ms: int | None,
        allocate_strategy: AllocateMessageQueueStrategy | None,
        pull_batch_size: int,
        client_id: str | None,
        kind: str,
        deliver: Deliver,
        max_span: int | None = CONSUME_CONCURRENTLY_MAX_SPAN,
        track_offsets: bool = True,
    ) -> None:
        #: Orderly consumption: queues are held through store-side locks (set before start).
        self.orderly = False
        self.group = check_group(group)
        if not isinstance(pull_batch_size, int) or not 1 <= pull_batch_size <= 1024:
            raise MQClientError(f"pull_batch_size must be in 1..1024, got {pull_batch_size!r}")
        self.message_model = MessageModel(message_model)
        self.consume_from_where = ConsumeFromWhere(consume_from_where)
        self.consume_timestamp_ms = consume_timestamp_ms
        self.strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.pull_batch_size = pull_batch_size
        self.client_id = client_id or new_client_id()
        self.kind = kind
        self.deliver = deliver
        self.max_span = max_span
        #: Whether persisting reads offsets from the process queues (push) or callers set them (pull).
        self.track_offsets = track_offsets
        #: The offset committed when a queue is given up (rebalance, shutdown): by default the
        #: smallest still in flight; a pull consumer without auto-commit commits only what it committed.
        self.release_offset: Callable[[ProcessQueue], int] = ProcessQueue.commit_offset
        self.conn = Connection(url, namespace)
        self.store = Store(self.conn)
        # long polls block for LONG_POLL_BLOCK_MS: they get a connection with a longer reply timeout
        self._poll_conn = Connection(url, namespace, socket_timeout_s=LONG_POLL_BLOCK_MS / 1000 + 5)
        self.subscriptions: dict[str, MessageSelector] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.offsets: OffsetStore = (
            LocalFileOffsetStore(namespace, self.group, self.client_id)
            if self.message_model is MessageModel.BROADCASTING
            else RemoteOffsetStore(self.store, self.group)
        )
        info = ClientInfo.of_this_process(self.client_id, kind=kind, message_model=self.message_model.value)
        self.registry = Registry(self.store, self.group, info)
        self._assigned: list[MessageQueue] | None = None  # manual assignment (PullConsumer.assign)
        self._members: list[str] = []
        self._unsettled = False
        self._rebalance_lock = threading.RLock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._started_ms = 0
        self._since: dict[str, int] = {}  # topic -> when the group first consumed it (server ms)
        self._scheduler: BackgroundScheduler | None = None
        self._jobs: list[tuple[Callable[[], None], float, str]] = []
        self._puller: threading.Thread | None = None
        self.rebalance_count = 0

    # -- subscriptions --------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Subscribe to ``topic`` (the last subscription of a topic wins). Bad expressions raise now."""
        selector = MessageSelector.parse(expression)
        self.subscriptions[check_topic(topic)] = selector
        self.registry.info.subscriptions = {t: s.expression for t, s in self.subscriptions.items()}
        if self._scheduler is not None:
            self.rebalance()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``."""
        self.subscriptions.pop(topic, None)
        self.registry.info.subscriptions = {t: s.expression for t, s in self.subscriptions.items()}
        if self._scheduler is not None:
            self.rebalance()

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues`` with no rebalance (manual assignment)."""
        self._assigned = sorted(set(queues))
        if self._scheduler is not None:
            self.rebalance()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Register, rebalance, and start the puller and the timed jobs."""
        self._started_ms, self._members = self.registry.register()
        self._puller = threading.Thread(target=self._pull_loop, name=f"mq-puller-{self.group}", daemon=True)
        self._puller.start()
        scheduler = BackgroundScheduler(job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 5})
        scheduler.add_job(self._heartbeat, "interval", seconds=HEARTBEAT_INTERVAL_S, id="heartbeat")
        scheduler.add_job(self.rebalance, "interval", seconds=REBALANCE_INTERVAL_S, id="rebalance")
        scheduler.add_job(self.persist_offsets, "interval", seconds=PERSIST_INTERVAL_S, id="persist-offsets")
        for fn, seconds, job_id in self._jobs:
            scheduler.add_job(fn, "interval", seconds=seconds, id=job_id)
        if self._uses_locks:
            scheduler.add_job(self.renew_locks, "interval", seconds=LOCK_RENEW_INTERVAL_S, id="renew-locks")
        scheduler.start()
        self._scheduler = scheduler
        self.rebalance()

    def shutdown(self, wait_consumed: Callable[[], None] | None = None) -> None:
        """Stop pulling, let ``wait_consumed`` finish in-flight work, commit, release, unregister."""
        if self._scheduler is None:
            return
        self._scheduler.shutdown(wait=True)
        self._scheduler = None
        self._stopped.set()
        self._wake.set()
        for pq in self.process_queues.values():
            pq.releasing = True
            pq.idle.set()
        if self._puller is not None:
            self._puller.join(timeout=5)
        if wait_consumed is not None:
            wait_consumed()
        with self._rebalance_lock:
            for mq, pq in list(self.process_queues.items()):
                if not self._release(mq, pq, wait_s=SHUTDOWN_BATCH_WAIT_S):
                    log.warning("a batch of %s still runs after %s s: its lock expires by itself", mq, SHUTDOWN_BATCH_WAIT_S)
        self.persist_offsets()
        self.registry.unregister()
        self.conn.close()
        self._poll_conn.close()

    @property
    def running(self) -> bool:
        """Whether the consumer is started."""
        return self._scheduler is not None

    def add_job(self, fn: Callable[[], None], seconds: float, job_id: str) -> None:
        """Run ``fn`` every ``seconds`` on the consumer's scheduler (call before start)."""
        self._jobs.append((fn, seconds, job_id))

    # -- timed jobs -----------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        try:
            _, members = self.registry.heartbeat()
        except MQBrokerError as e:
            log.warning("heartbeat of %s failed: %s", self.group, e)
            return
        changed = members != self._members
        self._members = members
        if changed or self._unsettled:
            self.rebalance()

    @property
    def _uses_locks(self) -> bool:
        return self.orderly and self.message_model is MessageModel.CLUSTERING and self._assigned is None

    def lock_valid(self, pq: ProcessQueue) -> bool:
        """Whether this client may start a batch of ``pq`` now (always, without store locks)."""
        return not self._uses_locks or time.monotonic() - pq.lock_sent_s < LOCAL_LOCK_EXPIRY_S

    def renew_locks(self) -> None:
        """Renew the locks of every held queue in one batch; a queue whose lock was lost is dropped."""
        with self._rebalance_lock:
            pqs = {mq: pq for mq, pq in self.process_queues.items() if not pq.dropped}
            try:
                sent, held = try_lock(self.store, self.group, self.client_id, list(pqs))
            except MQBrokerError as e:
                log.warning("renewing locks of %s failed (consuming stops when they expire locally): %s", self.group, e)
                return
            for mq, pq in pqs.items():
                if mq in held:
                    pq.lock_sent_s = sent
                else:  # another member holds it now (a free or expired lock would have been taken)
                    log.warning("lost the lock of %s; another member consumes it now", mq)
                    pq.dropped = True
                    self.process_queues.pop(mq, None)
                    self.offsets.forget(mq)

    def persist_offsets(self) -> None:
        """Write the offsets of the queues consumed here (the smallest still in flight, per queue)."""
        if self.track_offsets:
            for mq, pq in list(self.process_queues.items()):
                if not pq.dropped and self.lock_valid(pq):  # a lost lock's offset belongs to the new holder
                    self.offsets.update(mq, pq.commit_offset())
        try:
            self.offsets.persist(list(self.process_queues))
        except (MQBrokerError, OSError) as e:
            log.warning("persisting offsets of %s failed: %s", self.group, e)

    # -- rebalance ------------------------------------------------------------------------------

    def rebalance(self) -> None:
        """Compute this client's queues and hand queues over cleanly (see claim-queue.lua)."""
        with self._rebalance_lock:
            if self._stopped.is_set():
                return
            try:
                wanted = self._wanted_queues()
                self._unsettled = self._apply(wanted)
            except MQBrokerError as e:
                log.warning("rebalance of %s failed, retrying in %s s: %s", self.group, HEARTBEAT_INTERVAL_S, e)
                self._unsettled = True

    def _wanted_queues(self) -> set[MessageQueue]:
        if self._assigned is not None:
            return set(self._assigned)
        wanted: set[MessageQueue] = set()
        for topic in sorted(self.subscriptions):
            config = self.store.topic(topic)
            if config is None:
                log.info("group %s: topic %r does not exist (yet); nothing to consume from it", self.group, topic)
                continue
            mqs = [MessageQueue(topic, DEFAULT_BROKER_NAME, q) for q in range(config.read_queues) if config.readable(q)]
            if self.message_model is MessageModel.BROADCASTING:
                wanted.update(mqs)
            else:
                wanted.update(self.strategy.allocate(self.group, self.client_id, mqs, self._members))
        return wanted

    def _apply(self, wanted: set[MessageQueue]) -> bool:
        """Release what is no longer wanted, claim what is new; True while a hand-over is pending."""
        unsettled = False
        for mq, pq in list(self.process_queues.items()):
            if mq in wanted:
                if pq.releasing:  # handed back before it was released: go on where it stopped
                    pq.releasing = False
                    self.deliver(pq, [])
                continue
            if not pq.releasing:
                pq.releasing, pq.releasing_since = True, time.monotonic()
            if self.orderly:  # released between two batches, however long the current one takes
                unsettled |= not self._release(mq, pq)
                continue
            if pq.count and time.monotonic() - pq.releasing_since < RELEASE_WAIT_S:
                unsettled = True  # let cached messages be consumed first
                continue
            self._release(mq, pq)
        new = sorted(wanted - set(self.process_queues))
        sent, claimed = self._claim(new)
        unsettled |= len(claimed) < len(new)
        if claimed:
            starts = self._start_offsets(claimed)
            for mq in claimed:
                pq = ProcessQueue(mq, starts[mq])
                pq.lock_sent_s = sent
                self.process_queues[mq] = pq
                threading.Thread(target=self._wait_loop, args=(pq,), name=f"mq-poll-{mq.queue_id}", daemon=True).start()
            self.rebalance_count += 1
            if metrics.CLIENT_METRICS is not None:
                metrics.CLIENT_METRICS.rebalances.labels(self.group).inc()
            log.info("group %s client %s now consumes %d queues", self.group, self.client_id, len(self.process_queues))
            self._wake.set()
        return unsettled

    def _claim(self, queues: list[MessageQueue]) -> tuple[float, list[MessageQueue]]:
        """The queues of ``queues`` this client may start on, and when the lock request was sent."""
        if self._uses_locks:
            sent, held = try_lock(self.store, self.group, self.client_id, queues)
            return sent, [q for q in queues if q in held]
        if self.message_model is MessageModel.BROADCASTING or self._assigned is not None or not queues:
            return time.monotonic(), queues
        members = "\x1f".join(self._members)
        calls = [("claim-queue", [self.store.queue_keys(q.topic, q.queue_id).owners], [self.group, self.client_id, members])
                 for q in queues]  # fmt: skip
        with translate_errors(self.conn.url, "claiming queues"):
            results = scripts.run_many(self.conn.client, calls)
        return time.monotonic(), [q for q, r in zip(queues, results) if r == 1]

    def _release(self, mq: MessageQueue, pq: ProcessQueue, *, wait_s: float = 0.0) -> bool:
        """Commit ``mq``'s offset and give it up; an orderly queue only between two batches (waiting
        up to ``wait_s`` for the current one). False when a batch is still running."""
        if not self.orderly:
            self._release_now(mq, pq)
            return True
        if not pq.consume_lock.acquire(timeout=wait_s):  # timeout 0: just a try
            return False
        try:
            self._release_now(mq, pq)
        finally:
            pq.consume_lock.release()
        return True

    def _release_now(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        offset = self.release_offset(pq)
        pq.dropped = True
        self.process_queues.pop(mq, None)
        if self.message_model is MessageModel.BROADCASTING:
            self.offsets.update(mq, offset)
            return
        if self._assigned is not None:
            self.offsets.update(mq, offset)
            self.offsets.persist([mq])
        elif self._uses_locks:
            try:
                unlock(self.store, self.group, self.client_id, mq, offset if self.lock_valid(pq) else None)
            except MQBrokerError as e:
                log.warning("unlocking %s failed (its lock expires by itself): %s", mq, e)
        else:
            keys = self.store.queue_keys(mq.topic, mq.queue_id)
            try:
                with translate_errors(self.conn.url, f"releasing {mq}"):
                    scripts.run(self.conn.client, "release-queue", [keys.owners, keys.offsets],
                                [self.group, self.client_id, offset])  # fmt: skip
            except MQBrokerError as e:
                log.warning("releasing %s failed (another member takes it over when we are gone): %s", mq, e)
        self.offsets.forget(mq)

    def _start_offsets(self, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
        """Stored offsets, else where ``consume_from_where`` says (then stored at once for the group)."""
        stored = self.offsets.read(queues)
        missing = [q for q in queues if q not in stored]
        if not missing:
            self.offsets.seed(stored)
            return stored
        computed = {q: self._initial_offset(q) for q in missing}
        if self.message_model is MessageModel.CLUSTERING:
            # Fix the group's starting point now, so a member taking the queue over later starts here too.
            already = read_group_offsets(self.store, self.group, missing)
            computed.update(already)
            write_group_offsets(self.store, self.group, {q: o for q, o in computed.items() if q not in already})
        self.offsets.seed(stored | computed)
        return stored | computed

    def _initial_offset(self, mq: MessageQueue) -> int:
        stats = self.store.queue_stats(mq.topic, [mq.queue_id])[mq.queue_id]
        where = self.consume_from_where
        if where is ConsumeFromWhere.FIRST_OFFSET or mq.topic.startswith(RETRY_PREFIX):
            return stats.min_offset
        if where is ConsumeFromWhere.TIMESTAMP:
            ts = self.consume_timestamp_ms or self._started_ms - DEFAULT_CONSUME_TIMESTAMP_AGO_MS
            return max(stats.min_offset, self.store.search_offset(mq.topic, mq.queue_id, ts))
        # LAST_OFFSET: new messages only, i.e. stored at or after the group first consumed the topic
        # (server clock) — so a queue added to the topic later is read from its first message
        since = self._group_since(mq.topic) if self.message_model is MessageModel.CLUSTERING else self._started_ms
        return max(stats.min_offset, self.store.search_offset(mq.topic, mq.queue_id, since))

    def _group_since(self, topic: str) -> int:
        """When the group first consumed ``topic`` (server ms): set once by its first member (``HSETNX``)."""
        if topic not in self._since:
            key = self.store.keys.group(self.group).since
            with translate_errors(self.conn.url, f"reading when group {self.group!r} began on {topic!r}"):
                pipe = self.conn.client.pipeline(transaction=False)
                pipe.hsetnx(key, topic, self._started_ms)
                pipe.hget(key, topic)
                self._since[topic] = int(pipe.execute()[1])
        return self._since[topic]

    # -- pulling --------------------------------------------------------------------------------

    def flow_limited(self, pq: ProcessQueue) -> bool:
        """Whether pulling ``pq`` pauses because too much of it is cached."""
        return (pq.count > PULL_THRESHOLD_FOR_QUEUE or pq.size_bytes > PULL_THRESHOLD_SIZE_FOR_QUEUE
                or (self.max_span is not None and pq.span > self.max_span))  # fmt: skip

    def wake(self) -> None:
        """Make the puller look again (after consumption freed room, or an offset was moved)."""
        self._wake.set()

    def _pull_loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.clear()
            pqs = list(self.process_queues.values())
            ready = [pq for pq in pqs if not pq.releasing and not pq.idle.is_set() and not self.flow_limited(pq)]
            if not ready:
                self._wake.wait(0.05 if any(self.flow_limited(pq) for pq in pqs) else 1.0)
                continue
            try:
                self._pull(ready)
            except MQBrokerError as e:
                log.warning("pull of %s failed, retrying in 1 s: %s", self.group, e)
                self._stopped.wait(1.0)

    def _pull(self, ready: list[ProcessQueue]) -> None:
        locked = [pq for pq in ready if pq.pull_lock.acquire(blocking=False)]  # a waiter may be pulling one
        try:
            requests = [self._pull_request(pq) for pq in locked]
            for pq, request, result in zip(locked, requests, self.store.pull_many(requests)):
                self._apply_pull(pq, request, result)
        finally:
            for pq in locked:
                pq.pull_lock.release()

    def _pull_request(self, pq: ProcessQueue) -> PullRequest:
        ftype, fdata = filter_args(self.subscriptions.get(pq.queue.topic) or MATCH_ALL)
        return PullRequest(pq.queue.topic, pq.queue.queue_id, pq.next_offset, self.pull_batch_size, PULL_MAX_SCAN,
                           ftype, fdata)  # fmt: skip

    def _apply_pull(self, pq: ProcessQueue, request: PullRequest, result: PullResult | Exception) -> None:
        if isinstance(result, Exception):
            log.warning("pull of %s failed: %s", pq.queue, result)
            return
        if pq.dropped or pq.next_offset != request.offset:  # released or seeked meanwhile
            return
        pq.add(result.messages, result.next_offset)
        if result.next_offset >= result.max_offset:
            pq.idle.set()  # caught up: its waiter blocks in the store until something arrives
        if result.messages:
            self.deliver(pq, result.messages)

    def _wait_loop(self, pq: ProcessQueue) -> None:
        """Long polling for one queue: block in Redis until a message past ``next_offset`` arrives.

        Unfiltered subscriptions take the messages ``XREAD`` returned; filtered ones pull right here
        through the store-side filter. Either way the waiter delivers itself, a thread hop less than
        waking the puller; the puller takes over when a backlog builds up.
        """
        log_key = self.store.queue_keys(pq.queue.topic, pq.queue.queue_id).log
        client = self._poll_conn.client
        while not (self._stopped.is_set() or pq.dropped):
            if pq.releasing:  # being handed over: no new messages for it
                self._stopped.wait(0.1)
                continue
            if not pq.idle.wait(1.0):
                continue
            unfiltered = filter_args(self.subscriptions.get(pq.queue.topic) or MATCH_ALL)[0] == ""
            start = pq.next_offset
            try:
                # entries after the one of offset start - 1, i.e. from start on
                reply = client.xread({log_key: stream_id(start - 1)}, count=self.pull_batch_size if unfiltered else 1,
                                     block=LONG_POLL_BLOCK_MS)  # fmt: skip
            except (*REDIS_ERRORS, OSError) as e:  # type: ignore[misc]
                log.debug("long poll of %s failed: %s", pq.queue, e)
                self._stopped.wait(1.0)
                continue
            except Exception:
                if self._stopped.is_set():
                    return  # shutdown closed the connection under this call (redis-py raises oddly then)
                raise
            if reply:
                self._take(pq, start, reply[0][1] if unfiltered else None)

    def _take(self, pq: ProcessQueue, start: int, entries: list[Any] | None) -> None:
        """Deliver what a long poll found (``entries``), or pull it; hand over to the puller if busy."""
        if self.flow_limited(pq) or not pq.pull_lock.acquire(blocking=False):
            pq.idle.clear()
            self._wake.set()
            return
        try:
            if entries is not None:
                msgs = [codec.decode(pq.queue.topic, pq.queue.queue_id, eid, fields) for eid, fields in entries]
                end = msgs[-1].queue_offset + 1
                # a full batch may have more behind it: stay "caught up" so this waiter reads on at once
                self._apply_pull(pq, PullRequest(pq.queue.topic, pq.queue.queue_id, start, 0, 0), PullResult(msgs, end, end))
            else:
                pq.idle.clear()
                request = self._pull_request(pq)
                self._apply_pull(pq, request, self.store.pull_many([request])[0])
        except MQBrokerError as e:
            log.debug("pull of %s from its waiter failed: %s", pq.queue, e)
            pq.idle.clear()
            self._wake.set()
        finally:
            pq.pull_lock.release()
        if not pq.idle.is_set():
            self._wake.set()  # more than one pull's worth arrived: the puller continues

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Move the next offset of an assigned queue (cached messages are dropped)."""
        pq = self.process_queues.get(mq)
        if pq is None:
            raise MQClientError(f"{mq} is not assigned to this consumer")
        pq.reset(offset)
        self.offsets.update(mq, offset)
        pq.idle.clear()
        self._wake.set()
