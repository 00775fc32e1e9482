"""Store operations of the message trace: events appended to the trace hash of the message's own
queue (one slot with the message; trimmed with it by retention), read back by msg id."""

from __future__ import annotations

from collections.abc import Sequence

from mq.store.base import ScriptCall, StoreBase, all_or_raise, chunks
from mq.store.ops import Cmd, Op, operation

#: Most bytes of trace events kept per message (the oldest are dropped first).
TRACE_BYTES_PER_MESSAGE = 16 * 1024
#: Most events one script call appends (bounds the call's work).
EVENTS_PER_CALL = 256


class TraceOps(StoreBase):
    """Append and read message trace events."""

    @operation
    def append_trace(self, events: Sequence[tuple[str, int, str, str]]) -> Op[None]:
        """Append events ``(topic, queue_id, msg_id, JSON line)``: one script call per queue (at most
        ``EVENTS_PER_CALL`` events each), all in one pipeline."""
        by_queue: dict[tuple[str, int], list[str]] = {}
        for t, q, msg_id, line in events:
            by_queue.setdefault((t, q), []).extend((msg_id, line))
        calls: list[ScriptCall] = [
            ("trace-append", [self.queue_keys(t, q).trace], [TRACE_BYTES_PER_MESSAGE, *part])
            for (t, q), argv in by_queue.items()
            for part in chunks(argv, 2 * EVENTS_PER_CALL)
        ]
        all_or_raise((yield from self._scripts(calls, "recording the message trace")))

    @operation
    def read_trace(self, topic: str, queue_id: int, msg_id: str) -> Op[list[str]]:
        """The trace events (JSON lines) of ``msg_id`` stored with queue ``queue_id`` of ``topic``."""
        with self._errors(f"reading the trace of {msg_id!r}"):
            raw = yield Cmd(lambda c: c.hget(self.queue_keys(topic, queue_id).trace, msg_id))
        return raw.decode().split("\n") if raw else []
