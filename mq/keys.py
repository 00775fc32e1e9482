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
``{ns:T:Q}:expired``            hash        consumer group → messages retention removed before the group consumed them
``{ns:T:Q}:timer``              zset        delayed message entry id → due time, ms
``{ns:T:Q}:delayed``            stream      delayed messages waiting to be due (auto ids)
``{ns}:timers``                 zset        ``topic \\x1f queue id`` → earliest due time of that queue
``{ns}:config``                 hash        namespace-wide broker settings (``message_delay_level``)
``{ns}:brokers``                zset        broker service id → last health beat, ms
``{ns}:stats``                  string      the broker service's last stats snapshot (JSON)
``{ns}:statshist``              zset        recent stats snapshots (JSON) → taken at, ms (``Admin.stats`` rates)
``{ns:%DLQ%G:0}:resent``        set         msg ids of dead letters already resent by an admin
``{ns:T:Q}:lock:G``             string      orderly lock of group G: holder client id, with a TTL
``{ns:T:Q}:half``               stream      transaction half messages (auto ids)
``{ns:T:Q}:halfidx``            zset        half id → next check-back, ms
``{ns:T:Q}:halfchk``            hash        half id → check-backs so far
``{ns:T:Q}:txdead``             stream      half messages rolled back after too many checks (admin list)
``{ns:T:Q}:timerdead``          stream      delayed messages the timer could not deliver, with the reason
``{ns}:halves``                 zset        ``topic \\x1f queue id`` → earliest check-back of that queue
``{ns:g:G}:txcheck``            stream      check-back requests for producer group G (consumer group "checkers")
``{ns:g:G}:since``              hash        topic → when group G first consumed it, ms (LAST_OFFSET's start)
``{ns:T:Q}:trace``              hash        msg id → its trace events (JSON lines: send, consume, retry, DLQ), opt-in
``{ns:T:Q}:inv:G``              zset        simple consumer group G: offset → visible again at, ms
``{ns:T:Q}:att:G``              hash        simple consumer group G: offset → delivery attempts
``{ns}:groups``                 set         every consumer group that ever registered
``{ns:g:G}:clients``            zset        client id → last heartbeat, ms (live = recent)
``{ns:g:G}:info``               hash        client id → ClientInfo JSON
``{ns:g:G}:config``             hash        ``json`` → the group's config (GroupConfig JSON, ``Admin.create_group``);
                                            ``reset_seq`` → counter of its offset resets (every heartbeat reads both)
``{ns:g:G}:resets``             hash        topic → ``seq \x1f offsets JSON`` of the last offset reset (live members apply it)
``{ns}:proxy:client:C``         string      the RocketMQ 5 endpoint: client C's last Telemetry settings (protobuf), with a TTL
``{ns:T:Q}:dedup``              hash        dedup id → ``offset \x1f msg id \x1f st`` of its first send; ``\x1f msg id`` → a fence
``{ns:T:Q}:dedupexp``           zset        the members of ``:dedup`` → when each expires, ms (the key expires with the last)
``{ns:T:Q}:segments``           zset        tiered storage: the queue's manifest, segment JSON → its start offset
``{ns:T:Q}:tierlease``          string      tiered storage: the uploader holding the queue (owner token, with a TTL)
``{ns:P:lite}:s:L``             hash        lite topic L of lite parent P: ``seq`` next offset, ``m:OFFSET`` a
                                            message (packed fields), ``lo`` first kept offset, ``c:G`` group G's
                                            cursor, ``a:G:OFFSET`` delivery attempts; expires
                                            ``lite_expiration_s`` after its last write (PEXPIRE)
``{ns:P:lite}:i:G:L``           zset        lite topic L, group G: offset → visible again at, ms; expires with L
``{ns:P:lite}:groups``          set         groups that subscribe lite topics of P (a send wakes their owners)
``{ns:P:lite}:owner:G``         hash        lite topic → the member of G that subscribed it (owns it)
``{ns:P:lite}:subs:G:C``        set         lite topics member C of G subscribed (taken over when C dies)
``{ns:P:lite}:ready:G:C``       zset        lite topic → when C may next hand something of it out, ms
``{ns:P:lite}:wake:G:C``        stream      one entry (MAXLEN 1) added when a lite topic of C becomes ready
``{ns:P:lite}:alive:G``         zset        member C of G → its last lite receive or heartbeat, ms
==============================  ==========  ==================================================

Lite topics: everything of one parent shares the tag ``{ns:P:lite}`` (one slot) so that a send can
wake the member owning its lite topic in the same script. The scripts that touch a lite topic or
another member build those keys from :attr:`LiteKeys.prefix` in exactly the shapes above (``prefix ..
's:' .. L``); :class:`LiteKeys` is their Python form, and a test checks the two agree.

The broker service publishes its ``tier_url`` (a place, never a credential) in ``{ns}:config``; clients
read the tier from there.

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
    timer: str
    delayed: str
    half: str
    halfidx: str
    halfchk: str
    txdead: str
    timerdead: str

    @property
    def tag(self) -> str:
        """The queue's hash tag, ``{ns:T:Q}``: every key of the queue starts with it (one slot)."""
        return self.meta.removesuffix(":q")

    @property
    def trace(self) -> str:
        """The message trace of the queue: msg id → its events (see :mod:`mq.observe.trace`)."""
        return f"{self.tag}:trace"

    @property
    def segments(self) -> str:
        """The queue's tier manifest: segment JSON → start offset (see :mod:`mq.tier.segment`)."""
        return f"{self.tag}:segments"

    @property
    def tier_lease(self) -> str:
        """The lease of the broker service uploading this queue to the tier (owner token, with a TTL)."""
        return f"{self.tag}:tierlease"

    @property
    def expired(self) -> str:
        """Consumer group → messages of the queue retention removed before the group consumed them
        (a counter only ``trim-queue`` adds to)."""
        return f"{self.tag}:expired"

    @property
    def dedup(self) -> str:
        """Deduplication ids seen in the window (→ their first send) and the fences of producer retries (D140)."""
        return f"{self.tag}:dedup"

    @property
    def dedup_expiry(self) -> str:
        """The members of :attr:`dedup` → when each expires, ms (D140)."""
        return f"{self.tag}:dedupexp"

    def all(self) -> list[str]:
        """Every key of the queue (all in one hash slot)."""
        return [
            self.meta,
            self.log,
            self.ids,
            self.keys,
            self.offsets,
            self.owners,
            self.timer,
            self.delayed,
            self.half,
            self.halfidx,
            self.halfchk,
            self.txdead,
            self.timerdead,
            self.trace,
            self.segments,
            self.tier_lease,
            self.expired,
            self.dedup,
            self.dedup_expiry,
        ]

    def end_transaction(self) -> list[str]:
        """The keys of ``end-transaction``."""
        return [*self.append(), self.half, self.halfidx, self.halfchk, self.txdead]

    def check_halves(self) -> list[str]:
        """The keys of ``check-halves``."""
        return [self.half, self.halfidx, self.halfchk, self.txdead, self.meta]

    def lock(self, group: str) -> str:
        """The orderly-consumption lock of ``group`` on this queue."""
        return f"{self.tag}:lock:{group}"

    def simple(self, group: str) -> list[str]:
        """The keys of ``receive-simple`` for simple-consumer group ``group`` on this queue."""
        tag = self.tag
        return [self.meta, self.log, self.offsets, f"{tag}:inv:{group}", f"{tag}:att:{group}"]

    def guard(self, group: str, guard: str) -> str:
        """The key a guarded offset commit checks: the owners hash (``"owner"``), the group's lock
        (``"lock"``), or the offsets hash itself when nothing is checked (``""``)."""
        return self.owners if guard == "owner" else self.lock(group) if guard == "lock" else self.offsets

    def commit(self, group: str, guard: str) -> list[str]:
        """The keys of ``commit-offset``."""
        return [self.offsets, self.guard(group, guard), self.meta, self.log]

    def pull(self, group: str, guard: str) -> list[str]:
        """The keys of ``pull-messages``."""
        return [self.meta, self.log, self.offsets, self.guard(group, guard), self.ids]

    def deliver(self) -> list[str]:
        """The keys of ``deliver-due``: the put keys, the queue's timer and its dead-letter stream."""
        return [*self.append(), self.timer, self.delayed, self.timerdead]

    def append(self) -> list[str]:
        """The keys every script that appends to the log takes first (``includes/append.lua``)."""
        return [self.meta, self.log, self.ids, self.keys]

    def put(self) -> list[str]:
        """The keys of the ``put-messages`` script: :meth:`append`'s and the dedup window's."""
        return [self.meta, self.log, self.ids, self.keys, self.dedup, self.dedup_expiry]

    def fence(self) -> list[str]:
        """The keys of ``fence-message``: the id index and the dedup window's."""
        return [self.ids, self.dedup, self.dedup_expiry]

    def trim(self) -> list[str]:
        """The keys of ``trim-queue``: the log, its indexes, the groups' offsets and expired counts."""
        return [self.log, self.ids, self.keys, self.offsets, self.expired]

    def restore(self) -> list[str]:
        """The keys of ``restore-queue``: the meta, the log and the groups' offsets."""
        return [self.meta, self.log, self.offsets]

    def read(self) -> list[str]:
        """The keys of the read-side scripts (``queue-stats``, ``search-offset``, ``pull-messages``)."""
        return [self.meta, self.log]


@dataclass(frozen=True)
class LiteKeys:
    """The keys of the lite topics of one lite parent (all in one hash slot; see the table above)."""

    prefix: str

    def state(self, lite: str) -> str:
        """Lite topic ``lite``: its messages, next offset, group cursors and delivery attempts (a hash)."""
        return f"{self.prefix}s:{lite}"

    def inflight(self, group: str, lite: str) -> str:
        """Messages of ``lite`` handed out to ``group`` and not acked: offset → visible again at, ms."""
        return f"{self.prefix}i:{group}:{lite}"

    @property
    def groups(self) -> str:
        """The groups subscribing lite topics of the parent."""
        return f"{self.prefix}groups"

    def owner(self, group: str) -> str:
        """Lite topic → the member of ``group`` owning it."""
        return f"{self.prefix}owner:{group}"

    def subs(self, group: str, client: str) -> str:
        """The lite topics member ``client`` of ``group`` subscribed."""
        return f"{self.prefix}subs:{group}:{client}"

    def ready(self, group: str, client: str) -> str:
        """Lite topic → when ``client`` may next hand out something of it, ms."""
        return f"{self.prefix}ready:{group}:{client}"

    def wake(self, group: str, client: str) -> str:
        """The stream ``client`` blocks on while its lite topics have nothing."""
        return f"{self.prefix}wake:{group}:{client}"

    def alive(self, group: str) -> str:
        """Member of ``group`` → its last lite receive or heartbeat, ms."""
        return f"{self.prefix}alive:{group}"

    def state_pattern(self, lite_prefix: str) -> str:
        """``SCAN MATCH`` pattern of the state keys of the lite topics whose names start ``lite_prefix``."""
        return _glob_escape(self.state(lite_prefix)) + "*"


def _glob_escape(text: str) -> str:
    """``text`` with the glob characters of ``SCAN MATCH`` escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


@dataclass(frozen=True)
class GroupKeys:
    """The client registry of one consumer (or producer) group, in one hash slot."""

    clients: str
    info: str
    txcheck: str
    since: str
    config: str
    resets: str


class Keys:
    """Key names for one namespace."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.topics = f"{{{namespace}}}:topics"
        self.groups = f"{{{namespace}}}:groups"
        self.timers = f"{{{namespace}}}:timers"
        self.config = f"{{{namespace}}}:config"
        self.brokers = f"{{{namespace}}}:brokers"
        self.halves = f"{{{namespace}}}:halves"
        self.stats = f"{{{namespace}}}:stats"
        self.stats_history = f"{{{namespace}}}:statshist"

    def patterns(self) -> list[str]:
        """``SCAN MATCH`` patterns that select every key of the namespace and no other: the namespace's
        own tag ``{ns}`` and the tags that start ``{ns:`` (queues, groups); glob characters escaped."""
        escaped = _glob_escape(self.namespace)
        return [f"{{{escaped}}}:*", f"{{{escaped}:*"]

    def queue(self, topic: str, queue_id: int) -> QueueKeys:
        """The keys of queue ``queue_id`` of ``topic``."""
        tag = f"{{{self.namespace}:{topic}:{queue_id}}}"
        return QueueKeys(
            meta=f"{tag}:q",
            log=f"{tag}:log",
            ids=f"{tag}:ids",
            keys=f"{tag}:keys",
            offsets=f"{tag}:offsets",
            owners=f"{tag}:owners",
            timer=f"{tag}:timer",
            delayed=f"{tag}:delayed",
            half=f"{tag}:half",
            halfidx=f"{tag}:halfidx",
            halfchk=f"{tag}:halfchk",
            txdead=f"{tag}:txdead",
            timerdead=f"{tag}:timerdead",
        )

    def parse_queue_key(self, key: str) -> tuple[str, int, str] | None:
        """``(topic, queue_id, kind)`` of a queue's meta (``kind`` ``"q"``), log (``"log"``) or offsets
        (``"offsets"``) key of this namespace, else None (any other key, of this or another namespace).
        Topic names hold no ``:`` and no braces (mq.model.validation), so the tag splits at its last ``:``."""
        prefix = f"{{{self.namespace}:"
        tag, sep, kind = key.rpartition("}:")
        if not sep or kind not in QUEUE_KEY_KINDS or not tag.startswith(prefix):
            return None
        topic, _, qid = tag[len(prefix) :].rpartition(":")
        if not topic or ":" in topic or not qid.isdigit():
            return None
        return topic, int(qid), kind

    def lite(self, parent: str) -> LiteKeys:
        """The keys of the lite topics of lite parent ``parent``."""
        return LiteKeys(f"{{{self.namespace}:{parent}:lite}}:")

    def dlq_resent(self, group: str) -> str:
        """The set of dead-letter msg ids of ``group`` already resent (in the DLQ queue's slot)."""
        return f"{{{self.namespace}:%DLQ%{group}:0}}:resent"

    def proxy_client(self, client_id: str) -> str:
        """The RocketMQ 5 endpoint's copy of client ``client_id``'s settings (in the namespace's slot)."""
        return f"{{{self.namespace}}}:proxy:client:{client_id}"

    def group(self, group: str) -> GroupKeys:
        """The registry keys of ``group``."""
        tag = f"{{{self.namespace}:g:{group}}}"
        return GroupKeys(
            clients=f"{tag}:clients",
            info=f"{tag}:info",
            txcheck=f"{tag}:txcheck",
            since=f"{tag}:since",
            config=f"{tag}:config",
            resets=f"{tag}:resets",
        )


#: The per-queue keys :meth:`Keys.parse_queue_key` recognises: what eviction checks and recovery read.
QUEUE_KEY_KINDS = ("q", "log", "offsets")


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


def key_index_offset(member: bytes) -> int:
    """The message offset an index member (``key \\x1f offset``, see :func:`key_index_range`) points at."""
    return int(member.rpartition(KEY_SEPARATOR.encode())[2])


def timer_member(topic: str, queue_id: int) -> str:
    """The member naming a queue in the ``timers`` index."""
    return f"{topic}{KEY_SEPARATOR}{queue_id}"


def parse_timer_member(member: bytes | str) -> tuple[str, int]:
    """``(topic, queue_id)`` of a ``timers`` index member."""
    text = member.decode() if isinstance(member, bytes) else member
    topic, _, qid = text.rpartition(KEY_SEPARATOR)
    return topic, int(qid)
