"""A consumer member's lite topics [RIP-83], written once for the sync and the asyncio simple consumers:
its subscriptions (changed at run time), its receive round over the lite topics that have something
(never over all it subscribed), acks through lite receipts, its liveness on each lite parent and the
hand-over of a stopped member's lite topics (see D144).

:class:`LiteMember`'s methods marked :class:`~mq.store.ops.operation` are generators of store requests,
run by the simple consumer's core (:mod:`mq.consumer.simple_core`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from mq.consumer.retry import dlq_topic
from mq.errors import MQClientError
from mq.model.message import Message
from mq.model.properties import DLQ_REASON, LITE_TOPIC, ORIGIN_MESSAGE_ID, RETRY_TOPIC
from mq.model.topic import TopicConfig
from mq.model.validation import check_lite_topic, check_topic
from mq.store import codec
from mq.store.lite import LiteDelivery
from mq.store.ops import Op
from mq.store.store import StoreOps

log = logging.getLogger("mq.consumer")

#: A member whose last lite receive, ack or heartbeat is older than this has stopped: another member
#: of its group takes its lite topics, seconds. Longer than the group heartbeat's timeout: a simple
#: consumer beats only from its own calls (``receive``, ``ack``), and one message may take a while.
LITE_MEMBER_TIMEOUT_S = 60.0
#: Lite topics one receive looks at, at most (those with something to hand out, oldest first).
LITE_TOPICS_PER_RECEIVE = 256
#: Lite topics one hand-over call moves (bounded work per script call; the caller repeats).
TAKE_OVER_BATCH = 1000
#: The first field of a lite receipt (a queue's receipt starts with its queue id, a number).
LITE_RECEIPT = "lite"


@dataclass(frozen=True)
class LiteReceipt:
    """What a lite receipt names: the parent, the lite topic, the offset and the visible-at time, ms."""

    parent: str
    lite_topic: str
    offset: int
    visible_at_ms: int


def make_lite_receipt(parent: str, lite: str, offset: int, visible_at_ms: int) -> str:
    """The receipt handle of a lite message handed out until ``visible_at_ms`` (:func:`parse_lite_receipt`)."""
    return f"{LITE_RECEIPT}:{offset}:{visible_at_ms}:{parent}:{lite}"


def is_lite_receipt(handle: object) -> bool:
    """Whether ``handle`` has the shape of a lite receipt."""
    return isinstance(handle, str) and handle.startswith(LITE_RECEIPT + ":")


def parse_lite_receipt(handle: str) -> LiteReceipt:
    """The parts of a lite receipt handle.

    Raises:
        MQClientError: ``handle`` is not a lite receipt this library issued.
    """
    try:
        kind, offset, visible_at, parent, lite = handle.split(":", 4)
        if kind != LITE_RECEIPT:
            raise ValueError(kind)
        return LiteReceipt(check_topic(parent), check_lite_topic(lite), int(offset), int(visible_at))
    except (ValueError, AttributeError, MQClientError):
        raise MQClientError(f"malformed receipt handle {handle!r}: pass the receipt_handle of a received MessageView") from None


class LiteMember:
    """One member's lite topics on the lite parents it subscribed in this process.

    Args:
        store: the consumer's store.
        group: its group; client_id: the member.
    """

    def __init__(self, store: StoreOps, group: str, client_id: str) -> None:
        self.store = store
        self.group = group
        self.client_id = client_id
        #: the lite parents this member subscribed lite topics of (it beats and receives on these)
        self.parents: list[str] = []
        #: per parent: the wake stream's last id seen by a receive (block for entries after it)
        self.wake_ids: dict[str, str] = {}
        #: the earliest time a lite topic waits for (an invisible time passing), store clock ms
        self.next_ready_ms: int | None = None

    def check(self, parent: object, lite: object) -> tuple[str, str]:
        """Checked ``(parent, lite topic)`` names (raises MQClientError / InvalidNameError)."""
        return check_topic(parent), check_lite_topic(lite)

    def subscribe(self, parent: str, lite: str, now_ms: int) -> Op[bool]:
        """Own lite topic ``lite`` of ``parent`` (an operation; the parent must be a lite topic)."""
        parent, lite = self.check(parent, lite)
        config = yield from StoreOps.topic.op(self.store, parent)
        if config is None or not config.lite:
            what = "does not exist" if config is None else "is not a lite parent"
            raise MQClientError(f"topic {parent!r} {what}: create it with Admin.create_topic({parent!r}, lite=True)")
        added = yield from StoreOps.subscribe_lite.op(self.store, parent, self.group, self.client_id, lite, now_ms)
        if parent not in self.parents:
            self.parents.append(parent)
        self.next_ready_ms = now_ms  # look at once: the lite topic may have messages already
        return added

    def unsubscribe(self, parent: str, lite: str) -> Op[bool]:
        """Stop consuming lite topic ``lite`` of ``parent`` (an operation)."""
        parent, lite = self.check(parent, lite)
        return (yield from StoreOps.unsubscribe_lite.op(self.store, parent, self.group, self.client_id, lite))

    def beat(self, now_ms: int) -> Op[int]:
        """Say this member is alive on its lite parents and take the lite topics of members that
        stopped; returns how many were taken (an operation)."""
        if not self.parents:
            return 0
        stale_before = now_ms - int(LITE_MEMBER_TIMEOUT_S * 1000)
        stale = yield from StoreOps.lite_beat.op(self.store, self.parents, self.group, self.client_id, now_ms, stale_before)
        taken = 0
        for parent, members in stale.items():
            for dead in members:
                moved, left, before = 0, 1, taken
                while moved >= 0 and left:
                    moved, left = yield from StoreOps.take_over_lite.op(
                        self.store,
                        parent,
                        self.group,
                        dead,
                        self.client_id,
                        stale_before_ms=stale_before,
                        most=TAKE_OVER_BATCH,
                        now_ms=now_ms,
                    )
                    taken += max(moved, 0)
                if taken > before:
                    log.info(
                        "member %s of %s took %d lite topics of %s from %s",
                        self.client_id,
                        self.group,
                        taken - before,
                        parent,
                        dead,
                    )
        if taken:
            self.next_ready_ms = now_ms
        return taken

    def receive(self, want: int, now_ms: int, invisible_ms: int, max_attempts: int) -> Op[list[LiteDelivery]]:
        """Up to ``want`` lite messages of this member's lite topics; dead ones (attempts exhausted) are
        stored in the group's DLQ and acked here, and not returned (an operation)."""
        out: list[LiteDelivery] = []
        nearest: int | None = None
        for parent in self.parents:
            if len(out) >= want:
                break
            round_ = yield from StoreOps.receive_lite.op(
                self.store,
                parent,
                self.group,
                self.client_id,
                now_ms=now_ms,
                invisible_ms=invisible_ms,
                max_messages=want - len(out),
                max_attempts=max_attempts,
                max_topics=LITE_TOPICS_PER_RECEIVE,
            )
            self.wake_ids[parent] = round_.wake_id
            if round_.next_ready_ms is not None:
                nearest = round_.next_ready_ms if nearest is None else min(nearest, round_.next_ready_ms)
            for d in round_.deliveries:
                if d.message is None:  # not a message (logged when decoding): acked so it is never handed out again
                    yield from self._ack(parent, d.lite_topic, d.offset, d.visible_at_ms, None, now_ms)
                elif d.dead:
                    yield from self._dead_letter(parent, d, now_ms)
                else:
                    out.append(d)
        self.next_ready_ms = nearest
        return out

    def ack(self, receipt: LiteReceipt, new_visible_at_ms: int | None, now_ms: int) -> Op[bool]:
        """Acknowledge (``new_visible_at_ms`` None) or re-time the message ``receipt`` names (an operation)."""
        return (
            yield from self._ack(
                receipt.parent, receipt.lite_topic, receipt.offset, receipt.visible_at_ms, new_visible_at_ms, now_ms
            )
        )

    def leave(self) -> Op[None]:
        """Mark this member stopped on its lite parents: the next member that beats takes its lite
        topics (an operation)."""
        if self.parents:
            yield from StoreOps.leave_lite.op(self.store, self.parents, self.group, self.client_id)

    def wake_streams(self) -> dict[str, str]:
        """The wake stream of each lite parent → the id to block after."""
        keys = self.store.keys
        return {keys.lite(p).wake(self.group, self.client_id): self.wake_ids.get(p, "0-0") for p in self.parents}

    def _ack(self, parent: str, lite: str, offset: int, visible_at: int, new_visible_at: int | None, now_ms: int) -> Op[bool]:
        return (
            yield from StoreOps.ack_lite.op(
                self.store, parent, self.group, self.client_id, lite, offset, visible_at, new_visible_at, now_ms
            )
        )

    def _dead_letter(self, parent: str, d: LiteDelivery, now_ms: int) -> Op[None]:
        """Store a copy of ``d`` in ``%DLQ%<group>`` and ack it (as a queue's dead letter goes)."""
        assert d.message is not None
        msg = d.message
        config = TopicConfig(dlq_topic(self.group), read_queues=1, write_queues=1)
        topic = (yield from StoreOps.ensure_topic.op(self.store, config)).name
        system = {
            **msg.system_properties,
            RETRY_TOPIC: parent,
            ORIGIN_MESSAGE_ID: msg.msg_id,
            DLQ_REASON: "max delivery attempts",
        }
        system[LITE_TOPIC] = d.lite_topic
        copy = Message(topic, msg.body, msg.tags, msg.keys, msg.properties)
        encoded = codec.encode(copy, msg.msg_id, msg.born_timestamp_ms, reconsume_times=d.attempt, system_properties=system)
        yield from StoreOps.put.op(self.store, topic, 0, [encoded])
        yield from self._ack(parent, d.lite_topic, d.offset, d.visible_at_ms, None, now_ms)
        log.info("message %s of lite topic %s went to %s after %d attempts", msg.msg_id, d.lite_topic, topic, d.attempt)
