"""Names of the system properties the library sets on messages (``MessageExt.system_properties``)."""

from __future__ import annotations

#: The topic a retried or dead-lettered message was first sent to.
RETRY_TOPIC = "RETRY_TOPIC"
#: The msg id of the first delivery.
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
#: The queue id of the first delivery (its message trace lives with that queue).
ORIGIN_QUEUE_ID = "ORIGIN_QUEUE_ID"
#: Why a message is in the DLQ.
DLQ_REASON = "DLQ_REASON"
#: On a dead letter of a lite topic: the lite topic it came from (its parent is in ``RETRY_TOPIC``).
LITE_TOPIC = "LITE_TOPIC"
#: On a dead letter's copy resent to its group: ``%DLQ%<group>:0@offset`` of the letter.
DLQ_LETTER = "DLQ_LETTER"
#: On a dead letter read by ``Admin.dlq_messages``: ``"true"`` when it was resent already.
RESENT = "RESENT"
#: A message's priority, 0..9 (``Message.priority``), stored only when not 0 (D142).
PRIORITY = "PRIORITY"
