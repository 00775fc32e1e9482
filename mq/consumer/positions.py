"""Positions that cannot skip (D70): what a consumer does when the store rewinds its position.

A queue's offsets come from its master's counter. A failover that discards a tail some consumer had
read (the promoted replica never saw it) hands those offsets to new messages, so a consumer's
position may be beyond the queue's end, or the entry before it may be another message than the one
it was handed. The store checks both in the pull's own script (``pull-messages``: the fingerprint of
the entry before the position, see ``includes/position.lua``) and answers with where to continue;
the consumer reads from there again — duplicates rather than loss — and says so here, once per
rewind: a WARNING naming the group, the queue and how many messages are read again, and the
``rocketredis_offset_rewinds_total`` / ``rocketredis_offset_rewound_messages_total`` counters.
"""

from __future__ import annotations

import logging

from mq.model.queue import MessageQueue
from mq.observe import metrics
from mq.store.groups import PullResult

log = logging.getLogger("mq.consumer")


def rewound(group: str, queue: MessageQueue, position: int, result: PullResult) -> int:
    """Report that ``group``'s position ``position`` in ``queue`` was rewound to
    ``result.next_offset``; returns how many stored messages are read again (those between the
    new position and the old one that the queue holds now)."""
    return report_rewind(group, queue, position, result.next_offset, result.max_offset)


def report_rewind(group: str, queue: MessageQueue, position: int, to: int, max_offset: int) -> int:
    """Log and count a rewind of ``group`` in ``queue`` from offset ``position`` to ``to`` (the
    queue's end being ``max_offset``); returns how many messages are read again."""
    again = max(0, min(position, max_offset) - to)
    why = (
        f"beyond the queue's end ({max_offset})"
        if position > max_offset
        else "on an entry that is another message than the one it was handed"
    )
    log.warning(
        "group %s: position %d in %s was %s (a failover lost messages it had read, or the queue was "
        "recreated); continuing from offset %d: %d message(s) are read again (duplicates rather than loss)",
        group,
        position,
        queue,
        why,
        to,
        again,
    )
    m = metrics.CLIENT_METRICS
    if m is not None:
        labels = (group, queue.topic, str(queue.queue_id))
        m.offset_rewinds.labels(*labels).inc()
        m.rewound_messages.labels(*labels).inc(again)
    return again
