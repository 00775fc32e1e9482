"""Concurrent push consumption beside its policy (:class:`~mq.consumer.machine.Concurrent`: how pulled
messages are cut into listener calls and what a listener's answer acknowledges) [RocketMQ
``ConsumeMessageConcurrentlyService``]: sending the rest back (an operation, see :mod:`mq.store.ops`),
the settings checks and the consume-timeout scan.
:class:`mq.PushConsumer` runs them on worker threads, :class:`mq.aio.PushConsumer` in tasks."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping

from mq.consumer.machine import Concurrent
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.puller import Puller
from mq.consumer.retry import SendBackOps
from mq.errors import MQClientError, MQError
from mq.model.group import GroupConfig
from mq.model.message import MessageExt
from mq.store.ops import Op

log = logging.getLogger("mq.consumer")


def tasks_of(
    pq: ProcessQueue, msgs: list[MessageExt], batch_size: int, *, workers: int, queues: int
) -> list[list[list[MessageExt]]]:
    """:meth:`Concurrent.tasks` with every task's listener calls cut at once."""
    return [list(task) for task in Concurrent.tasks(pq, msgs, batch_size, workers=workers, queues=queues)]


def done(puller: Puller, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
    """Forget consumed messages (the next pull or commit stores the offset); wake a flow-limited puller."""
    pq.remove(msgs)
    if pq.flow_paused:  # the puller skipped this queue for flow control: there may be room now
        puller.wake()


def send_back_op(send_back: SendBackOps, msgs: list[MessageExt], delay_level: int, retry_in_s: float) -> Op[list[MessageExt]]:
    """Send each message back (retry topic, or the DLQ past ``max_reconsume_times``); returns those
    the store refused (logged: they are consumed again here in ``retry_in_s``)."""
    failed = []
    for m in msgs:
        try:
            yield from SendBackOps.send_back.op(send_back, m, delay_level)
        except MQError as e:
            log.warning("sending %s back failed, consuming it again in %s s: %s", m.msg_id, retry_in_s, e)
            failed.append(m)
    return failed


def tried_again(msgs: list[MessageExt]) -> list[MessageExt]:
    """Copies of ``msgs`` with one more try counted (consumed again here; their offsets stay held)."""
    return [dataclasses.replace(m, reconsume_times=m.reconsume_times + 1) for m in msgs]


def check_push_options(
    *, consume_timeout_min: float, consume_thread_max: int, consume_message_batch_max_size: int, max_reconsume_times: int | None
) -> None:
    """Refuse bad push-consumer settings before anything is built.

    Raises:
        MQClientError: a setting out of range (the message names it and what it must be).
    """
    if not isinstance(consume_timeout_min, (int, float)) or consume_timeout_min <= 0:
        raise MQClientError(f"consume_timeout_min must be positive, got {consume_timeout_min!r}")
    if not isinstance(consume_thread_max, int) or consume_thread_max < 1:
        raise MQClientError(f"consume_thread_max must be a positive int, got {consume_thread_max!r}")
    if not isinstance(consume_message_batch_max_size, int) or not 1 <= consume_message_batch_max_size <= 1024:
        raise MQClientError(f"consume_message_batch_max_size must be in 1..1024, got {consume_message_batch_max_size!r}")
    if max_reconsume_times is not None and (not isinstance(max_reconsume_times, int) or max_reconsume_times < -1):
        raise MQClientError(f"max_reconsume_times must be None, -1 (unlimited) or a count, got {max_reconsume_times!r}")


def max_reconsume_times_of(explicit: int | None, *, orderly: bool, config: GroupConfig | None, default: int) -> int:
    """Retries before the DLQ (-1: unlimited): the consumer's own setting, else unlimited for orderly
    consumption, else the group's ``retry_max_times``, else ``default``."""
    if explicit is not None:
        return explicit
    if orderly:
        return -1
    return config.retry_max_times if config is not None else default


def overdue(pqs: Iterable[ProcessQueue], consume_timeout_min: float) -> list[tuple[ProcessQueue, list[MessageExt]]]:
    """The messages of each queue whose listener call exceeded ``consume_timeout_min`` (logged): they are
    sent back for retry, so one stuck call cannot hold the queue's offset forever [RocketMQ ``cleanExpiredMsg``]."""
    out = []
    for pq in pqs:
        msgs = pq.overdue(consume_timeout_min * 60)
        if msgs:
            log.warning(
                "%d message(s) of %s exceeded consume_timeout_min=%s: sending them back", len(msgs), pq.queue, consume_timeout_min
            )
            out.append((pq, msgs))
    return out


def check_startable(listener: object, orderly_listener: object, subscriptions: Mapping[str, object]) -> None:
    """Refuse to start a push consumer without exactly one listener and a subscription.

    Raises:
        MQClientError: saying what to do first.
    """
    if listener is None and orderly_listener is None:
        raise MQClientError("register a listener (register_message_listener or register_orderly_listener) before start()")
    if listener is not None and orderly_listener is not None:
        raise MQClientError("register either a concurrent or an orderly listener, not both")
    if not subscriptions:
        raise MQClientError("subscribe to at least one topic before start()")
