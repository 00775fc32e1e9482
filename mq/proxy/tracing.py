"""The message trace of what goes through the endpoint (``mq trace``, ``Admin.message_trace``): the
same events as the simple consumers record (D52), through the same
:class:`~mq.observe.trace.TraceEvents` — an ack a ``consume`` event ``ACK``, a delivery not acked in time
``consume``/``INVISIBLE_TIMEOUT`` (recorded by the receive round when the message is handed out
again), a dead letter a ``dlq`` event, each with the delivery attempt it ended.

What an ack needs and a RocketMQ 5 client does not send back — the attempt and when the message was
handed out — rides in the receipt handle the endpoint issues (:class:`Receipt`): the simple
consumers' receipt (:func:`~mq.consumer.simple_core.make_receipt`) followed by
``@<attempt>:<handed-out ms>``. Clients treat the handle as opaque; no state is kept in the endpoint,
so an ack through another replica, or after a restart, is traced the same.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from mq.aio.trace import AsyncTracer
from mq.consumer.simple_core import RECEIVED_AT, MessageView, make_receipt, parse_receipt
from mq.errors import MQClientError, MQError
from mq.model.queue import MessageQueue
from mq.store.aio import AsyncStore

log = logging.getLogger("mq.proxy")


@dataclass(frozen=True)
class Receipt:
    """A receipt handle the endpoint issued, parsed.

    Attributes:
        queue, offset, visible_at_ms: what the simple consumers' receipt names (the queue the message
            was read from, its offset, until when it is invisible: the store's clock, epoch ms).
        attempt: the delivery it belongs to (1, 2, …); 0 for a handle without the endpoint's suffix
            (issued before the endpoint recorded it: such handles live one invisible time, 12 h at most).
        handed_ms: when that delivery was handed out (the store's clock, epoch ms); None when unknown.
    """

    queue: MessageQueue
    offset: int
    visible_at_ms: int
    attempt: int = 0
    handed_ms: int | None = None

    @classmethod
    def parse(cls, handle: str) -> Receipt:
        """The receipt ``handle`` names.

        Raises:
            MQClientError: ``handle`` is not a receipt handle this library issued.
        """
        base, sep, delivery = handle.rpartition("@")  # "@" is in no topic name
        if not sep:
            return cls(*parse_receipt(handle))
        try:
            attempt, handed = (int(part) for part in delivery.split(":"))
        except ValueError:
            raise MQClientError(f"malformed receipt handle {handle!r}: pass the receipt handle of a received message") from None
        return cls(*parse_receipt(base), attempt, handed)

    def handle(self, visible_at_ms: int | None = None) -> str:
        """This receipt as a handle, or (``visible_at_ms``) the handle of the same delivery made
        invisible until then (``ChangeInvisibleDuration``: the delivery goes on)."""
        visible_at = self.visible_at_ms if visible_at_ms is None else visible_at_ms
        base = make_receipt(self.queue.topic, self.queue.queue_id, self.offset, visible_at)
        return base if self.handed_ms is None else f"{base}@{self.attempt}:{self.handed_ms}"


def receipt_of(view: MessageView) -> str:
    """The handle the endpoint gives a message handed out by a receive round: ``view``'s receipt with
    its delivery attempt and hand-out time (``RECEIVED_AT``, the store's clock)."""
    return f"{view.receipt_handle}@{view.delivery_attempt}:{getattr(view, RECEIVED_AT)}"


class EndpointTrace:
    """The endpoint's tracers: one :class:`~mq.aio.trace.AsyncTracer` per consumer group (events carry
    the group), made at the group's first receive or ack and following the namespace setting
    (``Admin.set_trace``, re-read every ``SETTING_TTL_S``); the endpoint is the client of its events
    (``client_id``, its host). Its writer task starts with the first event; :meth:`close` writes the rest.

    A trace is diagnostics: a store failure while recording is logged, never answered to the client
    (the ack or the dead letter it follows stands).

    Args:
        store: the endpoint's store.
        client_id: the id the events carry (the endpoint replica's).
        now_ms: the store's clock, epoch ms (the endpoint's :class:`~mq.store.clock.ClockOffset`).
    """

    def __init__(self, store: AsyncStore, client_id: str, now_ms: Callable[[], Awaitable[int]]) -> None:
        self._store = store
        self._client_id = client_id
        self._now_ms = now_ms
        self._tracers: dict[str, AsyncTracer] = {}

    async def active(self, group: str) -> AsyncTracer | None:
        """``group``'s tracer when events are recorded now, else None. With tracing off and the setting
        fresh this is a dict lookup and a check (nothing awaited); when it is stale, one read of the
        setting for every task that finds it so."""
        tracer = self._tracers.get(group)
        if tracer is None:
            tracer = self._tracers[group] = AsyncTracer(self._store, group, self._client_id, None)
        if not tracer.may_be_active():
            return None
        return tracer if await tracer.is_active() else None

    async def acked(self, tracer: AsyncTracer, receipts: Sequence[Receipt]) -> None:
        """Record an ``ACK`` for each of ``receipts`` (just acked): the messages are read in one round
        trip (the trace row needs their origin: a copy from the retry topic is traced under the
        original); the event starts at the receipt's hand-out time and costs until now, ms (a receipt
        without it: starts now, cost 0)."""
        locations = [(r.queue.topic, r.queue.queue_id, r.offset) for r in receipts]
        try:
            now_ms = await self._now_ms()
            found = await self._store.read_each(locations)
        except MQError as e:
            log.warning("reading %d acked message(s) for the trace failed: %s", len(receipts), e)
            return
        for receipt, msg in zip(receipts, found):
            if msg is None:  # trimmed meanwhile: nothing to key the event by
                continue
            began = now_ms if receipt.handed_ms is None else receipt.handed_ms
            tracer.delivery_ended(receipt.queue, msg, "consume", "ACK", receipt.attempt, began, now_ms - began)

    async def dead_lettered(self, tracer: AsyncTracer, queue: MessageQueue, view: MessageView, dlq: str) -> None:
        """Record a ``dlq`` event: ``view``, read from ``queue``, was just forwarded to ``dlq`` by its
        consumer (at its ``delivery_attempt``; cost 0, as the receive round's own dead letters)."""
        try:
            now_ms = await self._now_ms()
        except MQError as e:
            log.warning("reading the store's clock for the trace failed: %s", e)
            return
        tracer.delivery_ended(queue, view, "dlq", dlq, view.delivery_attempt, now_ms, 0.0)

    async def close(self) -> None:
        """Write the events left and stop the writer tasks."""
        tracers, self._tracers = list(self._tracers.values()), {}
        for tracer in tracers:
            await tracer.close()
