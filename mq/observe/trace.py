"""Message trace [RocketMQ message trace, ``queryMsgTraceById``]: who sent a message, which groups
consumed it, when, how long it took, how it ended, and its retries — opt-in per producer and
consumer (``trace=True``) or per namespace (``Admin.set_trace(True)``), off by default.

Events are kept in the trace hash of the message's own queue (``{ns:T:Q}:trace``, msg id → JSON
lines), so they live in the message's slot and go with it; a retried copy's events are recorded
under the original message. ``Admin.message_trace(topic, msg_id)`` and ``mq trace`` read them.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from mq.errors import MQError
from mq.model.message import MessageExt
from mq.model.properties import ORIGIN_MESSAGE_ID, ORIGIN_QUEUE_ID, RETRY_TOPIC
from mq.model.queue import MessageQueue
from mq.store import Store
from mq.store.clock import ServerClock
from mq.store.ops import Op
from mq.store.store import StoreOps

log = logging.getLogger("mq.trace")

#: Namespace setting (``{ns}:config``) that turns tracing on for every producer and consumer.
NAMESPACE_SETTING = "trace"
#: Seconds the namespace setting is cached by a client.
SETTING_TTL_S = 30.0
#: Seconds events wait in a client before they are written (one pipeline for all of them).
FLUSH_INTERVAL_S = 0.1
#: Events that make a client write at once rather than wait for the interval.
FLUSH_EVENTS = 512
#: Most events a client holds while the store does not take them (older ones are dropped, logged).
MAX_PENDING_EVENTS = 100_000


@dataclass(frozen=True)
class TraceEvent:
    """One thing that happened to a message.

    Attributes:
        kind: ``"send"``, ``"consume"``, ``"retry"`` (sent back for another try) or ``"dlq"``.
        time_ms: when it began (the store's clock), epoch ms.
        group: producer or consumer group.
        client_id: the client that did it.
        host: that client's host.
        cost_ms: how long it took (the send, or the listener call), ms.
        status: ``SEND_OK``, the listener's answer (``CONSUME_SUCCESS``, ``RECONSUME_LATER``, …), where
            a retry went, or a simple consumer's end of a delivery (``ACK``, ``INVISIBLE_TIMEOUT``: not
            acked within its invisible time).
        attempt: 1 for the first delivery, then 2, 3, … for retries.
        topic, queue_id, offset: where the message (or the retried copy) was read or stored.
    """

    kind: str
    time_ms: int
    group: str
    client_id: str
    host: str
    cost_ms: float
    status: str
    attempt: int
    topic: str
    queue_id: int
    offset: int

    @classmethod
    def from_json(cls, line: str) -> TraceEvent:
        """An event as stored."""
        data = json.loads(line)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


def origin(msg: MessageExt) -> tuple[str, int, str]:
    """``(topic, queue_id, msg_id)`` of the message ``msg`` is (a retried copy leads to the original)."""
    system = msg.system_properties
    if ORIGIN_QUEUE_ID in system and RETRY_TOPIC in system:
        return system[RETRY_TOPIC], int(system[ORIGIN_QUEUE_ID]), system.get(ORIGIN_MESSAGE_ID, msg.msg_id)
    return msg.topic, msg.queue_id, msg.msg_id


class TraceEvents:
    """The events of one producer or consumer waiting to be written, and the namespace setting as last
    read — no I/O: :class:`Tracer` (a thread) and ``mq.aio``'s tracer (a task) write them.

    Args:
        group, client_id: who records.
        enabled: True/False for this client; None follows the namespace setting.
    """

    def __init__(self, group: str, client_id: str, enabled: bool | None) -> None:
        self._group = group
        self._client_id = client_id
        self._enabled = enabled
        self._host = socket.gethostname()
        self._setting = False
        self._read_s = -SETTING_TTL_S
        self._pending: list[tuple[str, int, str, str]] = []
        self._lock = threading.Lock()

    def setting_stale(self) -> bool:
        """Whether the namespace setting should be read (again) before :attr:`cached_active` is trusted."""
        return self._enabled is None and time.monotonic() - self._read_s >= SETTING_TTL_S

    def setting_read(self, raw: str | MQError | None) -> None:
        """Take the namespace setting as read (``raw``), or the error reading it (the old value is kept)."""
        if isinstance(raw, MQError):
            log.warning("reading the namespace's trace setting failed (kept %s): %s", self._setting, raw)
        else:
            self._setting = raw == "1"
        self._read_s = time.monotonic()

    @property
    def cached_active(self) -> bool:
        """Whether events are recorded, by the setting as last read."""
        return self._enabled if self._enabled is not None else self._setting

    def consumed(self, queue: MessageQueue, msgs: Sequence[MessageExt], status: str, began_ms: int, cost_ms: float) -> None:
        """A listener call on ``msgs``, read from ``queue``, ended with ``status``."""
        rows = [(m, "consume", status, m.reconsume_times + 1, queue.topic, queue.queue_id, m.queue_offset) for m in msgs]
        self._record(rows, began_ms, cost_ms)

    def sent_back_at(self, msg: MessageExt, to_topic: str, now_ms: int) -> None:
        """``msg`` was sent back for another try (or to the DLQ) as a copy in ``to_topic`` at ``now_ms``."""
        kind = "dlq" if to_topic.startswith("%DLQ%") else "retry"
        self._record([(msg, kind, to_topic, msg.reconsume_times + 1, msg.topic, msg.queue_id, msg.queue_offset)], now_ms, 0.0)

    def delivery_ended(
        self, queue: MessageQueue, msg: MessageExt, kind: str, status: str, attempt: int, began_ms: int, cost_ms: float
    ) -> None:
        """The ``attempt``-th delivery of ``msg``, read from ``queue``, to a simple consumer ended: ``kind``
        ``"consume"`` (acked, or its invisible time passed) or ``"dlq"``, with ``status`` (``ACK``,
        ``INVISIBLE_TIMEOUT`` or the DLQ topic)."""
        self._record([(msg, kind, status, attempt, queue.topic, queue.queue_id, msg.queue_offset)], began_ms, cost_ms)

    def active_op(self, store: StoreOps) -> Op[bool]:
        """The operation telling whether events are recorded now (reads the namespace setting when stale),
        for code written once for both I/O styles."""
        if self.setting_stale():
            try:
                self.setting_read((yield from StoreOps.namespace_setting.op(store, NAMESPACE_SETTING)))
            except MQError as e:
                self.setting_read(e)
        return self.cached_active

    def sent(self, topic: str, queue_id: int, first_offset: int, msg_ids: Sequence[str], began_ms: int, cost_ms: float) -> None:
        """A send stored ``msg_ids`` in ``queue_id`` of ``topic`` from offset ``first_offset`` on."""
        rows = [
            ((topic, queue_id, msg_id), "send", "SEND_OK", 1, topic, queue_id, first_offset + i)
            for i, msg_id in enumerate(msg_ids)
        ]
        self._write(rows, began_ms, cost_ms)

    def _record(self, rows: Sequence[tuple[MessageExt, str, str, int, str, int, int]], began_ms: int, cost_ms: float) -> None:
        self._write([(origin(m), *rest) for m, *rest in rows], began_ms, cost_ms)  # type: ignore[misc]

    def _write(
        self, rows: Sequence[tuple[tuple[str, int, str], str, str, int, str, int, int]], began_ms: int, cost_ms: float
    ) -> None:
        if not rows or not self.cached_active:
            return
        events = []
        for where, kind, status, attempt, topic, qid, offset in rows:
            event = TraceEvent(
                kind, began_ms, self._group, self._client_id, self._host, round(cost_ms, 3), status, attempt, topic, qid, offset
            )
            events.append((*where, json.dumps(asdict(event), separators=(",", ":"))))
        with self._lock:
            self._pending += events
            if len(self._pending) > MAX_PENDING_EVENTS:
                dropped = len(self._pending) - MAX_PENDING_EVENTS
                del self._pending[:dropped]
                log.warning("dropped the %d oldest trace events: the store does not take them", dropped)
            self._added(len(self._pending) >= FLUSH_EVENTS)

    def _added(self, full: bool) -> None:
        """Called (under the lock) after events were added; ``full``: write them now."""

    def take(self) -> list[tuple[str, int, str, str]]:
        """The events gathered so far, for :meth:`~mq.store.Store.append_trace` (emptied)."""
        with self._lock:
            events, self._pending = self._pending, []
        return events

    def failed(self, events: list[tuple[str, int, str, str]], error: MQError) -> None:
        """Writing ``events`` failed: they are kept for the next try (a trace is diagnostics: logged, never raised)."""
        log.warning("recording %d trace event(s) failed (kept for the next try): %s", len(events), error)
        with self._lock:
            self._pending[:0] = events


class Tracer(TraceEvents):
    """Records the trace events of one producer or consumer: events are gathered and written every
    ``FLUSH_INTERVAL_S`` in one pipeline by a background thread (started with the first event), and
    at :meth:`close`.

    Args:
        store: the client's store.
        group, client_id: who records.
        enabled: True/False for this client; None follows the namespace setting.
    """

    def __init__(self, store: Store, group: str, client_id: str, enabled: bool | None) -> None:
        super().__init__(group, client_id, enabled)
        self._store = store
        self._clock = ServerClock(store)
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        """Whether events are recorded now."""
        return self._store.run(self.active_op(self._store)) if self.setting_stale() else self.cached_active

    def now_ms(self) -> int:
        """The store's clock, epoch ms (for the events' times)."""
        return self._clock.now_ms()

    def sent_back(self, msg: MessageExt, to_topic: str) -> None:
        """``msg`` was sent back for another try (or to the DLQ) as a copy in ``to_topic``."""
        if self.active:
            self.sent_back_at(msg, to_topic, self.now_ms())

    def _added(self, full: bool) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"mq-trace-{self._group}", daemon=True)
            self._thread.start()
        if full:
            self._wake.set()

    def flush(self) -> None:
        """Write the events gathered so far (a trace is diagnostics: a failure is logged, never raised)."""
        events = self.take()
        if not events:
            return
        try:
            self._store.append_trace(events)
        except MQError as e:
            self.failed(events, e)

    def close(self) -> None:
        """Write what is left and stop the background writer."""
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
        self.flush()

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(FLUSH_INTERVAL_S)
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # the writer never dies: events would pile up unseen
                log.exception("writing trace events of %s failed", self._group)
