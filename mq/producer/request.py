"""``SendRequest``: one send as both paths carry it — ``Producer.send``/``send_batch`` run it at once,
``send_async``/``send_oneway`` hand it to the background sender, which runs the same request through
the same code when its pipelined attempt fails."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mq.model.message import Message, SendResult
from mq.model.queue import MessageQueue
from mq.producer.selectors import MessageQueueSelector

#: Most messages one put script call stores (a larger batch is split into calls of at most this many,
#: each atomic; measured in bench/limits.py to keep each call well under 50 ms).
PUT_CALL_MAX_MESSAGES = 512
#: Most encoded bytes one put script call carries (a single message up to the size limit always fits).
PUT_CALL_MAX_BYTES = 1024 * 1024
#: Most message keys one put script call indexes (each is a ZADD member: a few microseconds).
PUT_CALL_MAX_KEYS = 2048

Selector = MessageQueueSelector | Callable[[Sequence[MessageQueue], Message, Any], MessageQueue | None]


@dataclass(slots=True)
class SendRequest:
    """One send: what to store, where, and by when.

    Attributes:
        topic: the topic.
        fields: the put-script form of the (first) message (:func:`mq.store.codec.encode`): all a
            single send stores, and what its pipelined attempt sends.
        msg_id: the message id (comma-joined ids for a batch).
        deadline: ``time.monotonic()`` after which no new attempt starts, seconds.
        first: the (first) message, what a selector sees; None when no selector looks at it (a send
            in flight does not keep its message alive for nothing).
        queue: send to exactly this queue; selector/arg: pick the queue; None and None: round-robin.
        due_ms: delivery time of a delayed message, epoch ms (None: deliver at once).
        oneway: nobody waits for the result (failures are logged, not retried).
        batch: every message of a batch in put-script form (None: a single send, ``fields`` alone).
        dedup: the message's ``dedup_id`` (its queue is chosen from it; D140), or None.
        unsure: the queue of a failed pipelined attempt that may have stored it anyway (a lost
            connection): the retry looks there first and fences the id (D140); None otherwise.
        lite: the lite topic of a message to a lite parent (its own script call, no queue).
        priority: the message's priority (a batch's messages share one): picks the level's queues.

    Slotted, and a single send holds no list or tuple of its own beyond its ``fields`` (and no
    message unless a selector needs it): thousands are in flight at once, and each object less per
    send is one less for the garbage collector to count and go over (D49, D64).
    """

    topic: str
    fields: Sequence[Any]
    msg_id: str
    deadline: float
    first: Message | None = None
    queue: MessageQueue | None = None
    selector: Selector | None = None
    arg: Any = None
    due_ms: int | None = None
    oneway: bool = False
    batch: Sequence[Sequence[Any]] | None = None
    dedup: str | None = None
    unsure: MessageQueue | None = None
    lite: str | None = None
    priority: int = 0
    _future: Future[SendResult] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def future(self) -> Future[SendResult]:
        """The result of a ``send_async`` (a plain ``Future`` made on first use unless one was set —
        the asyncio producer has its own futures; take or set it before handing the request to
        another thread)."""
        if self._future is None:
            self._future = Future()
        return self._future

    @future.setter
    def future(self, future: Future[SendResult]) -> None:
        self._future = future

    @property
    def encoded(self) -> Sequence[Sequence[Any]]:
        """Every message's put-script form, in order (one for a single send)."""
        return (self.fields,) if self.batch is None else self.batch

    @property
    def msg_ids(self) -> list[str]:
        """The message ids, in order (ids are hex digits: no comma)."""
        return self.msg_id.split(",")

    def chunks(self) -> list[list[Sequence[Any]]]:
        """``encoded`` split into put calls of at most :data:`PUT_CALL_MAX_MESSAGES` messages,
        :data:`PUT_CALL_MAX_BYTES` bytes and :data:`PUT_CALL_MAX_KEYS` keys (one call unless the batch is big)."""
        return split_puts(self.encoded)


def encoded_size(encoded: Sequence[Any]) -> int:
    """Bytes of one encoded message's field values, as the put script counts them (numbers as digits).
    Runs for every pipelined send: ASCII text (ids, most tags and keys) is counted without encoding it."""
    if len(encoded) == 7:  # id, body and born time only (most sends): the id is hex, the body bytes
        msg_id, body, born = encoded[2], encoded[4], encoded[6]
        if msg_id.__class__ is str and msg_id.isascii() and body.__class__ is bytes and born.__class__ is int:
            return len(msg_id) + len(body) + len(str(born))
    size = 0
    for value in encoded[2::2]:
        if isinstance(value, bytes):
            size += len(value)
        elif isinstance(value, str):
            size += len(value) if value.isascii() else len(value.encode())
        else:
            size += len(str(value))
    return size


def encoded_keys(encoded: Sequence[Any]) -> int:
    """How many message keys one encoded message carries (its ``k`` field)."""
    names = encoded[1::2]  # field names stand at odd positions, after the item count
    if "k" not in names:
        return 0
    return len([k for k in str(encoded[2 * names.index("k") + 2]).split("\x1f") if k])


def split_puts(encoded: Sequence[Sequence[Any]]) -> list[list[Sequence[Any]]]:
    """Consecutive runs of ``encoded`` within the per-call bounds, in order."""
    out: list[list[Sequence[Any]]] = []
    start = 0
    for end in split_ends(encoded):
        out.append(list(encoded[start:end]))
        start = end
    return out


def split_ends(encoded: Sequence[Sequence[Any]]) -> list[int]:
    """Where each run of :func:`split_puts` ends (an index past its last message), in order."""
    if len(encoded) <= PUT_CALL_MAX_MESSAGES and _plain_size_bound(encoded) <= PUT_CALL_MAX_BYTES:
        return [len(encoded)] if encoded else []  # one call: nothing to count message by message
    ends: list[int] = []
    count = run_bytes = run_keys = 0
    for index, fields in enumerate(encoded):
        size, keys = encoded_size(fields), encoded_keys(fields)
        if count and (
            count >= PUT_CALL_MAX_MESSAGES or run_bytes + size > PUT_CALL_MAX_BYTES or run_keys + keys > PUT_CALL_MAX_KEYS
        ):
            ends.append(index)
            count = run_bytes = run_keys = 0
        count += 1
        run_bytes += size
        run_keys += keys
    if count:
        ends.append(len(encoded))
    return ends


def _plain_size_bound(encoded: Sequence[Sequence[Any]]) -> int:
    """At least the bytes :func:`encoded_size` counts for ``encoded`` when every message holds only an
    id, a body (bytes) and its born time — most pipelined sends: no keys to count, one pass — else
    more than :data:`PUT_CALL_MAX_BYTES` (count message by message)."""
    total = 0
    for fields in encoded:
        if len(fields) != 7 or fields[1] != "i" or fields[3] != "b" or fields[5] != "bt" or fields[4].__class__ is not bytes:
            return PUT_CALL_MAX_BYTES + 1
        total += len(fields[4]) + 4 * len(fields[2]) + 20  # UTF-8 takes at most 4 bytes a character; an int64 20 digits
    return total
