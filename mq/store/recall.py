"""Recall of delayed and timer messages: the store operation behind ``Producer.recall``."""

from __future__ import annotations

from mq.model.recall import parse_handle
from mq.store.base import StoreBase
from mq.store.ops import Op, operation


class RecallOps(StoreBase):
    """Removing a scheduled message from its queue's timer before it is delivered."""

    @operation
    def recall(self, handle: str) -> Op[bool]:
        """Remove the delayed message ``handle`` names (``SendResult.recall_handle``), atomically.

        Returns True when it was still scheduled and is now removed: it will never be delivered.
        False when it is not scheduled: delivered already, recalled already, its queue's timer
        gone with its topic, or a well-formed handle that names no entry carrying its message id
        (forged or altered: nothing is removed).

        Raises:
            MQClientError: ``handle`` is not a recall handle, or it is one of another namespace
                (checked before any command is sent).
            ReplicaAckTimeout: removed on the master, fewer replicas than ``sync_replicas``
                confirmed in time (its ``result`` is 1).
            MQBrokerError: the store failed.
        """
        target = parse_handle(handle, self.keys.namespace)
        keys = self.queue_keys(target.topic, target.queue_id)
        with self._errors(f"recalling a delayed message of {target.topic!r} queue {target.queue_id}"):
            removed = yield from self._write("recall", [keys.timer, keys.delayed], [target.entry_id, target.msg_id])
        return int(removed) == 1
