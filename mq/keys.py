"""Every Redis key name rocketredis uses, and nothing else builds one.

Layout (``ns`` is the namespace; ``{…}`` is the Redis Cluster hash tag):

==============================  ==========  ==================================================
key                             type        holds
==============================  ==========  ==================================================
``{ns}:topics``                 hash        topic name → TopicConfig JSON
``{ns:T:Q}:q``                  hash        queue meta: ``seq`` next offset, ``w``/``r`` perm flags
``{ns:T:Q}:log``                stream      the messages; entry id ``0-(offset+1)``
``{ns:T:Q}:ids``                hash        msg id → offset (query by id)
``{ns:T:Q}:keys``               zset        ``key \\x1f offset`` (20 digits), score 0 (query by key)
``{ns:T:Q}:offsets``            hash        consumer group → committed offset (clustering mode)
``{ns:T:Q}:owners``             hash        consumer group → client id consuming the queue now
``{ns}:groups``                 set         every consumer group that ever registered
``{ns:g:G}:clients``            zset        client id → last heartbeat, ms (live = recent)
``{ns:g:G}:info``               hash        client id → ClientInfo JSON
==============================  ==========  ==================================================

Everything one queue owns shares the tag ``{ns:T:Q}``, so every per-queue script touches one slot
and a topic's queues spread over the masters of a cluster (see docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Separates one message key from the next, and a key from its offset in the key index.
KEY_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class QueueKeys:
    """The keys of one queue, in the order the Lua scripts take them."""

    meta: str
    log: str
    ids: str
    keys: str
    offsets: str
    owners: str

    def all(self) -> list[str]:
        """Every key of the queue (all in one hash slot)."""
        return [self.meta, self.log, self.ids, self.keys, self.offsets, self.owners]

    def put(self) -> list[str]:
        """The keys of the ``put-messages`` script."""
        return [self.meta, self.log, self.ids, self.keys]

    def read(self) -> list[str]:
        """The keys of the read-side scripts (``queue-stats``, ``search-offset``, ``pull-messages``)."""
        return [self.meta, self.log]


@dataclass(frozen=True)
class GroupKeys:
    """The client registry of one consumer (or producer) group, in one hash slot."""

    clients: str
    info: str


class Keys:
    """Key names for one namespace."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.topics = f"{{{namespace}}}:topics"
        self.groups = f"{{{namespace}}}:groups"

    def queue(self, topic: str, queue_id: int) -> QueueKeys:
        """The keys of queue ``queue_id`` of ``topic``."""
        tag = f"{{{self.namespace}:{topic}:{queue_id}}}"
        return QueueKeys(meta=f"{tag}:q", log=f"{tag}:log", ids=f"{tag}:ids", keys=f"{tag}:keys",
                         offsets=f"{tag}:offsets", owners=f"{tag}:owners")

    def group(self, group: str) -> GroupKeys:
        """The registry keys of ``group``."""
        tag = f"{{{self.namespace}:g:{group}}}"
        return GroupKeys(clients=f"{tag}:clients", info=f"{tag}:info")


def stream_id(offset: int) -> str:
    """The stream entry id that stores queue offset ``offset`` (offsets are dense from 0)."""
    return f"0-{offset + 1}"


def offset_of(entry_id: bytes | str) -> int:
    """The queue offset stored under stream entry id ``entry_id``."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[2]) - 1


def key_index_range(key: str) -> tuple[str, str]:
    """``ZRANGEBYLEX`` bounds that select every index member of message key ``key``."""
    return f"[{key}{KEY_SEPARATOR}", f"({key}\x20"
