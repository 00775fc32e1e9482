"""Least-privilege Redis ACL rules for rocketredis users.

Redis checks every command a client sends *and* every command a Lua script runs on its behalf, so
a role must allow the commands of the scripts it calls. Key permissions (Redis 7 ``%R~``/``%W~`` and
selectors) limit what each role may do to which keys:

- ``client``: producers, consumers (push, pull, simple), transaction producers and the broker
  service. Full access to the per-queue and per-group keys (``{ns:…}``); on the namespace-wide keys
  (``{ns}:…``) it may read everything and write only the broker's to-do indexes, the group list,
  the broker registry, stats and settings. The topics hash is read-only except ``HSETNX`` (adding a
  topic, e.g. a group's retry topic): a client can neither delete nor rewrite a topic config.
- ``admin``: every key of the namespace, plus ``UNLINK`` (deleting topics) and rewriting configs.
- a per-resource user (:func:`resource_acl_args`, RocketMQ ACL's per-topic/per-group grants):
  produce to given topics, consume given topics as given groups; no access to other topics' messages.

No pub/sub channels are needed. ``acl_setuser_args(namespace, role)`` gives the ``ACL SETUSER``
argument list; docs/security.md explains each part and what each role can and cannot do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mq.errors import MQClientError
from mq.model.validation import DLQ_PREFIX, RETRY_PREFIX, check_group, check_topic
from mq.store.connection import validate_namespace

#: Commands the Lua scripts run (see mq/store/lua): Redis checks them against the caller's ACL.
SCRIPT_COMMANDS = (
    "del",
    "exists",
    "get",
    "hdel",
    "hexists",  # put-messages: a retry's fence of the call's first msg id (D140)
    "hget",
    "hgetall",
    "hincrby",
    "hmget",
    "hset",
    "hvals",
    "pexpire",  # a send pushes its lite topic's expiry back (D144); dedup window keys expire (D140)
    "pttl",
    "sadd",
    "scard",
    "set",
    "smembers",
    "spop",
    "srem",
    "time",
    "type",
    "xadd",
    "xdel",
    "xinfo",  # XINFO STREAM: a queue's last entry id where its seq is missing (new or evicted meta)
    "xrange",
    "xrevrange",
    "xtrim",
    "zadd",
    "zrange",
    "zrangebyscore",
    "zrem",
    "zscore",
)
#: Commands the library sends itself.
CLIENT_COMMANDS = (
    "evalsha",
    "script|load",
    "hget",
    "hgetall",
    "hset",
    "hsetnx",
    "hdel",
    "sadd",
    "sismember",
    "smembers",
    "smismember",
    "srem",
    "xack",
    "xadd",
    "xgroup|create",
    "xrange",
    "xread",
    "xreadgroup",
    "zadd",
    "zcard",
    "zrange",
    "zrangebylex",
    "zrangebyscore",
    "zrem",
    "wait",
    "role",  # sync_replicas="all" counts the master's replicas
)
#: ``sync_flush``'s command: not in the roles, which must also load on Redis 7.0 (where ``ACL SETUSER``
#: refuses a command it does not know); add it to a user of ``sync_flush`` on Redis >= 7.2.
SYNC_FLUSH_COMMANDS = ("waitaof",)
#: Connection housekeeping redis-py performs (handshake, health checks, cluster topology).
CONNECTION_COMMANDS = ("auth", "hello", "ping", "client|setname", "cluster|slots", "cluster|shards")
#: Read-only probes of the store checks (``mq doctor``, and the broker service once at start). In no
#: role: ``CONFIG GET`` can read passwords. Without them a check says "unknown" (and Redis's ACL LOG
#: records the refused probe); run ``mq doctor`` as an admin to see everything.
CHECK_COMMANDS = ("info", "config|get", "acl|whoami", "acl|dryrun", "command|info", "cluster|info")
#: Extra commands of the admin role.
ADMIN_COMMANDS = ("scan", "unlink")

ROLES = ("client", "admin")

#: Namespace-wide keys (``{ns}:NAME``) the client role may write: the broker's to-do indexes, the
#: group list, the broker registry, its stats snapshot and its settings. ``topics`` is not among them.
CLIENT_WRITABLE_GLOBALS = ("timers", "halves", "groups", "brokers", "stats", "statshist", "config")
#: Namespace-wide keys the client role only reads (and adds to, for ``topics``, through ``HSETNX``).
#: Every namespace-wide key of :class:`mq.keys.Keys` is in one of the two lists (a test checks).
CLIENT_READ_ONLY_GLOBALS = ("topics",)
#: Per-queue keys (``{ns:T:Q}:NAME``) a consuming group writes; ``%G`` stands for the group name.
CONSUMER_QUEUE_KEYS = ("offsets", "owners", "lock:%G", "inv:%G", "att:%G", "trace")


def role_commands(role: str) -> list[str]:
    """Every command ``role`` needs, sorted."""
    if role not in ROLES:
        raise MQClientError(f"unknown role {role!r}: use one of {ROLES}")
    commands = {*SCRIPT_COMMANDS, *CLIENT_COMMANDS, *CONNECTION_COMMANDS}
    if role == "admin":
        commands |= set(ADMIN_COMMANDS)
    return sorted(commands)


def _start(password: str | None) -> list[str]:
    return ["on", "resetpass", f">{password}" if password else "nopass", "resetkeys", "resetchannels", "-@all"]


def _topics_add_only(ns: str) -> str:
    """The selector that lets a user add a topic (``HSETNX``) and nothing else on the topics hash."""
    return f"(~{{{ns}}}:topics +hsetnx)"


def acl_setuser_args(namespace: str, role: str, password: str | None = None) -> list[str]:
    """The ``ACL SETUSER <name> ...`` rules of ``role`` limited to ``namespace`` (user name not included)."""
    ns = validate_namespace(namespace)
    commands = [f"+{c}" for c in role_commands(role)]
    if role == "admin":
        return [*_start(password), f"~{{{ns}}}:*", f"~{{{ns}:*", *commands]
    keys = [f"~{{{ns}:*", f"%R~{{{ns}}}:*", *(f"~{{{ns}}}:{name}" for name in CLIENT_WRITABLE_GLOBALS)]
    return [*_start(password), *keys, *commands, _topics_add_only(ns)]


def resource_acl_args(
    namespace: str,
    password: str | None = None,
    *,
    produce_topics: Iterable[str] = (),
    consume: Mapping[str, Iterable[str]] | None = None,
    producer_groups: Iterable[str] = (),
) -> list[str]:
    """``ACL SETUSER`` rules for a user limited to given topics and groups (RocketMQ ACL's resource grants).

    Args:
        produce_topics: topics the user may send to (normal, delayed and transactional messages).
        consume: consumer group -> the topics it subscribes to; the user may read those topics'
            messages, commit that group's offsets, locks and invisibility, and use the group's
            retry and dead-letter topics and registry.
        producer_groups: transactional producer groups the user runs (their check-back streams).

    The user reads the namespace's topic list and settings, may add a topic (``HSETNX``: a group's
    retry topic is created on first use) but never rewrite or delete one, and cannot read or write
    any other topic's messages or any other group's state.
    """
    ns = validate_namespace(namespace)
    consume = dict(consume or {})
    keys = [f"%R~{{{ns}}}:*", *(f"~{{{ns}}}:{name}" for name in ("timers", "halves", "groups"))]
    for topic in produce_topics:
        keys.append(f"~{{{ns}:{check_topic(topic)}:*")
    for group in producer_groups:
        keys.append(f"~{{{ns}:g:{check_group(group)}}}:*")
    for group, topics in consume.items():
        check_group(group)
        keys += [f"~{{{ns}:g:{group}}}:*", f"~{{{ns}:{RETRY_PREFIX}{group}:*", f"~{{{ns}:{DLQ_PREFIX}{group}:*"]
        for topic in topics:
            keys.append(f"%R~{{{ns}:{check_topic(topic)}:*")
            keys += [f"~{{{ns}:{topic}:*}}:{name.replace('%G', group)}" for name in CONSUMER_QUEUE_KEYS]
            keys.append(f"~{{{ns}:{topic}:lite}}:*")  # a lite parent's: its lite topics hold every group's cursors (D144)
    if not produce_topics and not consume:
        raise MQClientError("a resource user needs at least one topic to produce to or one group to consume as")
    commands = [f"+{c}" for c in role_commands("client")]
    return [*_start(password), *dict.fromkeys(keys), *commands, _topics_add_only(ns)]
