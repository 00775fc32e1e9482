"""What Redis evicted from a namespace, and how to rebuild it (decisions only, no I/O: the store reads
are :class:`mq.store.recovery.RecoveryOps`, the drivers ``mq doctor`` and ``Admin.recover_topics``).

With ``maxmemory-policy`` other than ``noeviction`` Redis evicts keys when it is full, the small
bookkeeping keys as readily as the streams: the topics hash (topic configs), a queue's meta (its
seq, the next offset, and its permission flags), a queue's group offsets. The messages a stream still
holds are then unreachable: producers and consumers find no topic or no queue. What is left says
enough to rebuild the rest: a queue's log keeps its last generated entry id (the next offset, see
:mod:`mq.keys`), its offsets hash the groups' positions, and the queue ids present give a topic's
queue count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mq.model.topic import MAX_QUEUE_NUMS, TopicConfig

#: Problems :func:`find_evicted` reports.
NO_TOPIC_CONFIG = "queue streams without a topic config"
NO_QUEUE_META = "queue streams without a queue meta"
ORPHAN_OFFSETS = "group offsets of a topic without a config"


@dataclass(frozen=True)
class Evicted:
    """One finding of :func:`find_evicted`: ``topic``'s ``queues`` have ``problem``."""

    topic: str
    queues: tuple[int, ...]
    problem: str

    def __str__(self) -> str:
        return f"topic {self.topic!r}: {self.problem} (queues {_ranges(self.queues)}); run `mq topic recover {self.topic}`"


@dataclass(frozen=True)
class RecoveredTopic:
    """What :meth:`Admin.recover_topics` did to one topic.

    Attributes:
        topic: the topic.
        config_rebuilt: its config was missing and was made from the queues found (as many read and
            write queues as the highest stored queue id + 1, perm ``rw``).
        queues_restored: queues whose meta had no seq, or a seq below what the log or the groups'
            offsets show, and now has it (it is never lowered).
    """

    topic: str
    config_rebuilt: bool
    queues_restored: tuple[int, ...]


def find_evicted(
    spans: Mapping[str, tuple[TopicConfig, int]],
    present: Mapping[str, Mapping[int, set[str]]],
    seqs: Mapping[tuple[str, int], int | None],
) -> list[Evicted]:
    """What eviction left behind, by topic name.

    Args:
        spans: every topic's config and span (queues ever created), as stored.
        present: topic → queue id → kinds of its keys present (``"q"``, ``"log"``, ``"offsets"``).
        seqs: the seq of each queue that has a log and a meta (None: the meta holds no seq).
    """
    out: list[Evicted] = []
    for topic in sorted(present):
        queues = present[topic]
        logs = tuple(sorted(q for q, kinds in queues.items() if "log" in kinds))
        if topic not in spans:
            if logs:
                out.append(Evicted(topic, logs, NO_TOPIC_CONFIG))
            else:
                offsets = tuple(sorted(q for q, kinds in queues.items() if "offsets" in kinds))
                if offsets:
                    out.append(Evicted(topic, offsets, ORPHAN_OFFSETS))
            continue
        metaless = tuple(q for q in logs if "q" not in queues[q] or seqs.get((topic, q)) is None)
        if metaless:
            out.append(Evicted(topic, metaless, NO_QUEUE_META))
    return out


def needs_seq(
    present: Mapping[str, Mapping[int, set[str]]], spans: Mapping[str, tuple[TopicConfig, int]]
) -> list[tuple[str, int]]:
    """The queues whose seq :func:`find_evicted` needs: those with a log and a meta, of topics with a config."""
    return [(t, q) for t in sorted(present) if t in spans for q, kinds in sorted(present[t].items()) if {"log", "q"} <= kinds]


def rebuilt_config(topic: str, queue_ids: set[int] | Mapping[int, object]) -> TopicConfig:
    """The config recovery gives a topic whose config is gone: read and write queues up to the highest
    stored queue id (so every stored queue is read again), perm ``rw``, as ``create_topic``'s defaults
    otherwise. An operator who had other settings sets them again with ``update_topic``."""
    count = min(MAX_QUEUE_NUMS, max(queue_ids) + 1)
    return TopicConfig(topic, read_queues=count, write_queues=count)


def restored(results: list[tuple[int, int]]) -> tuple[int, ...]:
    """The queue ids whose seq ``restore-queue`` set or raised, from its ``(before, after)`` replies."""
    return tuple(q for q, (before, after) in enumerate(results) if after > before and (before >= 0 or after > 0))


def _ranges(ids: tuple[int, ...]) -> str:
    """``0-3, 7`` for ``(0, 1, 2, 3, 7)``."""
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(parts) or "none"
