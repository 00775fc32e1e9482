"""``SendRequest``: one send as both paths carry it — ``Producer.send``/``send_batch`` run it at once,
``send_async``/``send_oneway`` hand it to the background sender, which runs the same request through
the same code when its pipelined attempt fails."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mq.message import Message, SendResult
from mq.producer.selectors import MessageQueueSelector
from mq.queue import MessageQueue

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
        encoded: the put-script form of each message (:func:`mq.store.codec.encode`); one for a
            single send, several for a batch.
        msg_ids: the message ids, in order.
        first: the (first) message, what selectors see.
        queue: send to exactly this queue; selector/arg: pick the queue; None and None: round-robin.
        deadline: ``time.monotonic()`` after which no new attempt starts, seconds.
        due_ms: delivery time of a delayed message, epoch ms (None: deliver at once).
        oneway: nobody waits for the result (failures are logged, not retried).

    Slotted: thousands are in flight at once, and each object less per send is one less for the
    garbage collector to go over (D49).
    """

    topic: str
    encoded: list[list[Any]]
    msg_ids: Sequence[str]
    first: Message
    deadline: float
    queue: MessageQueue | None = None
    selector: Selector | None = None
    arg: Any = None
    due_ms: int | None = None
    oneway: bool = False
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
    def msg_id(self) -> str:
        """The message id (comma-joined ids for a batch)."""
        return ",".join(self.msg_ids)

    def chunks(self) -> list[list[list[Any]]]:
        """``encoded`` split into put calls of at most :data:`PUT_CALL_MAX_MESSAGES` messages,
        :data:`PUT_CALL_MAX_BYTES` bytes and :data:`PUT_CALL_MAX_KEYS` keys (one call unless the batch is big)."""
        return split_puts(self.encoded)


def encoded_size(encoded: list[Any]) -> int:
    """Bytes of one encoded message's field values, as the put script counts them (numbers as digits).
    Runs for every pipelined send: ASCII text (ids, most tags and keys) is counted without encoding it."""
    size = 0
    for value in encoded[2::2]:
        if isinstance(value, bytes):
            size += len(value)
        elif isinstance(value, str):
            size += len(value) if value.isascii() else len(value.encode())
        else:
            size += len(str(value))
    return size


def encoded_keys(encoded: list[Any]) -> int:
    """How many message keys one encoded message carries (its ``k`` field)."""
    names = encoded[1::2]  # field names stand at odd positions, after the item count
    if "k" not in names:
        return 0
    return len([k for k in str(encoded[2 * names.index("k") + 2]).split("\x1f") if k])


def split_puts(encoded: Sequence[list[Any]]) -> list[list[list[Any]]]:
    """Consecutive runs of ``encoded`` within the per-call bounds, in order."""
    out: list[list[list[Any]]] = []
    run: list[list[Any]] = []
    run_bytes = run_keys = 0
    for fields in encoded:
        size, keys = encoded_size(fields), encoded_keys(fields)
        if run and (
            len(run) >= PUT_CALL_MAX_MESSAGES or run_bytes + size > PUT_CALL_MAX_BYTES or run_keys + keys > PUT_CALL_MAX_KEYS
        ):
            out.append(run)
            run, run_bytes, run_keys = [], 0, 0
        run.append(fields)
        run_bytes += size
        run_keys += keys
    if run:
        out.append(run)
    return out
