"""Helpers of the tiered-storage tests: a broker service config with a tier, sending numbered
messages, and reading a queue back whole."""

from __future__ import annotations

import time
from collections.abc import Iterable

from mq import ConsumeFromWhere, Message, Producer, PullConsumer
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue
from scheduler import BrokerConfig

#: Tier settings the tests use: small segments, every run due, a short lease.
FAST = {
    "tier_interval_s": 3600.0,  # tests call the uploader themselves
    "tier_segment_messages": 40,
    "tier_segment_age_s": 0.001,
    "tier_lease_s": 30.0,
}


def tier_config(tier_url: str, **overrides: object) -> BrokerConfig:
    """A broker config with a tier and the fast settings."""
    return BrokerConfig(tier_url=tier_url, **{**FAST, **overrides})  # type: ignore[arg-type]


def send_numbered(url: str, namespace: str, topic: str, queue_id: int, numbers: Iterable[int], *, size: int = 64) -> list[str]:
    """Send one message per number to one queue (body ``b"m<number>"`` padded to ``size``, tag
    ``even``/``odd``, key ``k<number>``, property ``n``); returns the msg ids."""
    ids = []
    with Producer("tier-tests", url, namespace=namespace) as producer:
        mq = MessageQueue(topic, "broker-a", queue_id)
        for n in numbers:
            body = f"m{n}".encode().ljust(size, b".")
            msg = Message(topic, body, tags="even" if n % 2 == 0 else "odd", keys=f"k{n}", properties={"n": str(n)})
            ids.append(producer.send(msg, queue=mq).msg_id)
    return ids


def body_number(body: bytes) -> int:
    """The number a :func:`send_numbered` body carries."""
    return int(body.split(b".", 1)[0][1:])


def read_from_first(url: str, namespace: str, group: str, topic: str, want: int, *, batch: int = 32) -> list[MessageExt]:
    """What a new PullConsumer group reads of ``topic`` from its first offset: ``want`` messages (or what
    came within 60 s), then whatever more arrives in the next 0.3 s (a duplicate would show there)."""
    pc = PullConsumer(group, url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=batch)
    pc.subscribe(topic)
    got: list[MessageExt] = []
    with pc:
        deadline = time.monotonic() + 60
        while len(got) < want and time.monotonic() < deadline:
            got += pc.poll(timeout_s=0.5)
        got += pc.poll(timeout_s=0.3)
    return got
