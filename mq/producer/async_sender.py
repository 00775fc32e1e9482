"""The background sender behind ``send_async`` and ``send_oneway``.

Sends that wait at the same time go out in one pipeline (one round trip per node), and those bound
for the same queue in one put call, so many concurrent async sends cost little more than one.
A send that fails in the pipeline is retried through the producer's sync path within what is left
of its time budget (oneway sends are not retried, as in RocketMQ).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mq.errors import MQBrokerError, ReplicaAckTimeout
from mq.message import Message, SendResult, SendStatus
from mq.queue import MessageQueue
from mq.store import Store

log = logging.getLogger("mq.producer")

#: Most sends one pipeline carries.
MAX_PIPELINE = 128


@dataclass
class PendingSend:
    """One async or oneway send waiting for the sender thread."""

    msg: Message
    msg_id: str
    encoded: list[Any]
    queue: MessageQueue | None
    selector: Any
    arg: Any
    deadline: float
    oneway: bool
    due_ms: int | None = None
    future: Future[SendResult] = field(default_factory=Future)


class AsyncSender:
    """A daemon thread draining pending sends into pipelines."""

    def __init__(
        self,
        store: Store,
        select: Callable[[PendingSend], MessageQueue],
        send_sync: Callable[..., SendResult],
    ) -> None:
        self._store = store
        self._select = select
        self._send_sync = send_sync
        self._queue: queue.SimpleQueue[PendingSend | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="mq-async-sender", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def submit(self, pending: PendingSend) -> None:
        """Queue a send."""
        self._queue.put(pending)

    def stop(self) -> None:
        """Send everything queued so far, then stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        running = True
        while running:
            batch: list[PendingSend] = []
            item = self._queue.get()
            while item is not None:
                batch.append(item)
                if len(batch) >= MAX_PIPELINE or self._queue.empty():
                    break
                item = self._queue.get()
            running = item is not None
            if batch:
                self._send(batch)

    def _send(self, batch: list[PendingSend]) -> None:
        # Sends bound for the same queue go out as one put call (consecutive offsets, send order).
        groups: dict[MessageQueue, list[PendingSend]] = {}
        for p in batch:
            if p.due_ms is not None:  # delayed: its own script call, through the sync path
                self._retry(p)
                continue
            try:
                groups.setdefault(self._select(p), []).append(p)
            except Exception as e:  # a selector or route error belongs to that send only
                self._fail(p, e)
        puts = [(mq.topic, mq.queue_id, [p.encoded for p in group]) for mq, group in groups.items()]
        results: list[Any]
        try:
            results = self._store.put_many(puts) if puts else []
        except MQBrokerError as e:  # the whole pipeline failed (e.g. a lost connection)
            results = [e] * len(puts)
        for (mq, group), result in zip(groups.items(), results):
            for index, p in enumerate(group):
                if isinstance(result, ReplicaAckTimeout):  # stored, not confirmed: not retried (no second copy)
                    self._resolve(p, SendResult(SendStatus.FLUSH_SLAVE_TIMEOUT, p.msg_id, mq, result.result[0] + index))
                elif not isinstance(result, Exception):
                    self._resolve(p, SendResult(SendStatus.SEND_OK, p.msg_id, mq, result[0] + index))
                elif p.oneway or not isinstance(result, MQBrokerError):
                    self._fail(p, result)
                else:
                    self._retry(p)

    def _retry(self, p: PendingSend) -> None:
        try:
            result = self._send_sync(p.msg.topic, [p.encoded], p.msg_id, p.msg, p.queue, p.selector, p.arg, p.deadline,
                                     p.due_ms)  # fmt: skip
        except Exception as e:
            self._fail(p, e)
        else:
            self._resolve(p, result)

    @staticmethod
    def _resolve(p: PendingSend, result: SendResult) -> None:
        if not p.oneway:
            p.future.set_result(result)

    @staticmethod
    def _fail(p: PendingSend, error: Exception) -> None:
        if p.oneway:
            log.warning("oneway send of %s to %r failed: %s", p.msg_id, p.msg.topic, error)
        else:
            p.future.set_exception(error)
