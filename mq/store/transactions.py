"""Transaction check-back requests and dead-letter resend marks: the store operations of transaction
producers, the broker's check-back job and ``Admin.resend_dlq``.

Check-back requests go to a producer group's ``txcheck`` stream, read by its live members through
the consumer group ``checkers`` (each request answered by one member).
"""

from __future__ import annotations

import contextlib

from mq.store.base import StoreBase
from mq.store.connection import REDIS_ERRORS
from mq.store.ops import Cmd, Op, operation

#: The stream consumer group every transaction producer of a group reads check-backs through.
CHECKERS = "checkers"
#: Check-back requests kept per producer group stream (older ones are trimmed).
CHECK_STREAM_MAXLEN = 10_000


class TransactionOps(StoreBase):
    """Check-back requests of transactional producer groups, and dead-letter resend marks."""

    @operation
    def join_checks(self, group: str) -> Op[None]:
        """Create producer group ``group``'s check-back stream and its reader group (no-op when they exist)."""
        with self._errors("joining the check-back stream"), contextlib.suppress(*REDIS_ERRORS):
            (yield Cmd(lambda c: c.xgroup_create(self.keys.group(group).txcheck, CHECKERS, id="0", mkstream=True)))

    @operation
    def ask_check(self, group: str, topic: str, queue_id: int, half_id: str, checks: int) -> Op[None]:
        """Post a check-back request for half message ``half_id`` to producer group ``group``."""
        with self._errors(f"asking producer group {group!r}"):
            (
                yield Cmd(
                    lambda c: c.xadd(
                        self.keys.group(group).txcheck,
                        {"topic": topic, "queue_id": queue_id, "half_id": half_id, "checks": checks},
                        maxlen=CHECK_STREAM_MAXLEN,
                        approximate=True,
                    )
                )
            )

    @operation
    def read_checks(self, group: str, consumer: str, count: int, block_ms: int) -> Op[list[tuple[bytes, dict[bytes, bytes]]]]:
        """Up to ``count`` new check-back requests for ``consumer`` of ``group``, waiting up to ``block_ms``."""
        with self._errors(f"reading check-backs of {group!r}"):
            replies = yield Cmd(
                lambda c: c.xreadgroup(CHECKERS, consumer, {self.keys.group(group).txcheck: ">"}, count=count, block=block_ms)
            )
        return [(entry_id, fields) for _, entries in replies or [] for entry_id, fields in entries]

    @operation
    def ack_check(self, group: str, entry_id: bytes) -> Op[None]:
        """Mark a check-back request answered (failures are ignored: it is asked again next interval)."""
        with contextlib.suppress(*REDIS_ERRORS):
            (yield Cmd(lambda c: c.xack(self.keys.group(group).txcheck, CHECKERS, entry_id)))

    @operation
    def claim_resend(self, group: str, letter: str) -> Op[bool]:
        """Mark dead letter ``letter`` (its offset in the DLQ) of ``group`` as resent; False when it
        already was (resend it once)."""
        with self._errors("marking a dead letter resent"):
            return bool((yield Cmd(lambda c: c.sadd(self.keys.dlq_resent(group), letter))))

    @operation
    def unclaim_resend(self, group: str, letter: str) -> Op[None]:
        """Undo :meth:`claim_resend` (the resend failed)."""
        with self._errors("unmarking a dead letter"):
            (yield Cmd(lambda c: c.srem(self.keys.dlq_resent(group), letter)))

    @operation
    def resent_marks(self, group: str, letters: list[str]) -> Op[list[bool]]:
        """Whether each of ``letters`` (DLQ offsets) of ``group`` was resent."""
        if not letters:
            return []
        with self._errors("reading resent marks"):
            return [bool(x) for x in (yield Cmd(lambda c: c.smismember(self.keys.dlq_resent(group), letters)))]

    @operation
    def clear_resent(self, group: str) -> Op[None]:
        """Forget every resent mark of ``group`` (its DLQ was purged)."""
        with self._errors("clearing resent marks"):
            (yield Cmd(lambda c: c.delete(self.keys.dlq_resent(group))))
