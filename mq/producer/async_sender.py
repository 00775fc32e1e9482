"""The background sender behind ``send_async`` and ``send_oneway``.

Sends that wait at the same time go out in one pipeline (one round trip per node), and those bound
for the same queue in bounded put calls, so many concurrent async sends cost little more than one.
A send that fails in the pipeline is retried through the producer's sync path (the same
:class:`~mq.producer.request.SendRequest`) within what is left of its time budget (oneway sends are
not retried, as in RocketMQ).

The thread never dies of an error: whatever one round raises is logged at ERROR on the
``mq.producer`` logger with the sends it affects, and those sends' futures fail with it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from mq.errors import MQBrokerError, ReplicaAckTimeout
from mq.message import SendResult, SendStatus
from mq.producer.request import SendRequest, split_puts
from mq.queue import MessageQueue
from mq.store import Store

log = logging.getLogger("mq.producer")

#: Most sends one pipeline carries.
MAX_PIPELINE = 128


class AsyncSender:
    """A daemon thread draining pending sends into pipelines."""

    def __init__(
        self,
        store: Store,
        select: Callable[[SendRequest], MessageQueue],
        send_sync: Callable[[SendRequest], SendResult],
    ) -> None:
        self._store = store
        self._select = select
        self._send_sync = send_sync
        self._queue: queue.SimpleQueue[SendRequest | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="mq-async-sender", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def submit(self, request: SendRequest) -> None:
        """Queue a send."""
        self._queue.put(request)

    def stop(self) -> None:
        """Send everything queued so far, then stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        running = True
        while running:
            batch: list[SendRequest] = []
            item = self._queue.get()
            while item is not None:
                batch.append(item)
                if len(batch) >= MAX_PIPELINE or self._queue.empty():
                    break
                item = self._queue.get()
            running = item is not None
            if batch:
                self._send_guarded(batch)

    def _send_guarded(self, batch: list[SendRequest]) -> None:
        """One round; an unexpected error fails the round's unfinished sends and the thread goes on."""
        try:
            self._send(batch)
        except Exception as e:
            unfinished = [r for r in batch if not r.future.done()]
            log.error(
                "async sender: a round of %d send(s) failed unexpectedly; failing %d unfinished send(s) (msg ids %s): %r",
                len(batch),
                len(unfinished),
                ", ".join(r.msg_id for r in unfinished[:5]),
                e,
                exc_info=True,
            )
            for r in unfinished:
                self._fail(r, e)

    def _send(self, batch: list[SendRequest]) -> None:
        # Sends bound for the same queue go out together (consecutive offsets, send order), in put
        # calls of bounded size.
        groups: dict[MessageQueue, list[SendRequest]] = {}
        for r in batch:
            if r.due_ms is not None:  # delayed: its own script call, through the sync path
                self._retry(r)
                continue
            try:
                groups.setdefault(self._select(r), []).append(r)
            except Exception as e:  # a selector or route error belongs to that send only
                self._fail(r, e)
        calls: list[tuple[MessageQueue, list[SendRequest]]] = []
        for mq, group in groups.items():
            by_id = {id(r.encoded[0]): r for r in group}
            for run in split_puts([r.encoded[0] for r in group]):
                calls.append((mq, [by_id[id(fields)] for fields in run]))
        puts = [(mq.topic, mq.queue_id, [r.encoded[0] for r in run]) for mq, run in calls]
        results: list[Any]
        try:
            results = self._store.put_many(puts) if puts else []
        except MQBrokerError as e:  # the whole pipeline failed (e.g. a lost connection)
            results = [e] * len(puts)
        for (mq, requests), result in zip(calls, results):
            for index, r in enumerate(requests):
                if isinstance(result, ReplicaAckTimeout):  # stored, not confirmed: not retried (no second copy)
                    self._resolve(r, SendResult(SendStatus.FLUSH_SLAVE_TIMEOUT, r.msg_id, mq, result.result[0] + index))
                elif not isinstance(result, Exception):
                    self._resolve(r, SendResult(SendStatus.SEND_OK, r.msg_id, mq, result[0] + index))
                elif r.oneway or not isinstance(result, MQBrokerError):
                    self._fail(r, result)
                else:
                    self._retry(r)

    def _retry(self, r: SendRequest) -> None:
        try:
            result = self._send_sync(r)
        except Exception as e:
            self._fail(r, e)
        else:
            self._resolve(r, result)

    @staticmethod
    def _resolve(r: SendRequest, result: SendResult) -> None:
        if not r.oneway:
            _settle(r.future, result=result)

    @staticmethod
    def _fail(r: SendRequest, error: BaseException) -> None:
        if r.oneway:
            log.warning("oneway send of %s to %r failed: %s", r.msg_id, r.topic, error)
        else:
            _settle(r.future, error=error)


def _settle(future: Future[SendResult], *, result: SendResult | None = None, error: BaseException | None = None) -> None:
    """Complete ``future`` unless the caller cancelled it meanwhile."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]
    except InvalidStateError:
        pass
