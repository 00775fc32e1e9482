"""Least-privilege Redis ACL rules for rocketredis users.

Redis checks every command a client sends *and* every command a Lua script runs on its behalf, so
a role must allow the commands of the scripts it calls. Two roles:

- ``client``: producers, consumers (push, pull, simple), transaction producers and the broker
  service — everything that reads and writes messages, offsets, locks and registries;
- ``admin``: ``client`` plus deleting topics (``UNLINK``).

Keys are limited to the namespace: ``{ns}:*`` (namespace-wide keys) and ``{ns:*`` (per queue and per
group). No pub/sub channels are needed.

Example, for namespace ``mq``::

    ACL SETUSER app on >secret resetkeys ~{mq}:* ~{mq:* resetchannels -@all +evalsha +script|load ...

``acl_setuser_args(namespace, role)`` gives that argument list; docs/security.md explains each part.
"""

from __future__ import annotations

#: Commands the Lua scripts run (see mq/store/lua): Redis checks them against the caller's ACL.
SCRIPT_COMMANDS = (
    "del", "exists", "get", "hdel", "hget", "hincrby", "hmget", "hset", "set", "time", "xadd", "xdel",
    "xrange", "xrevrange", "xtrim", "zadd", "zrange", "zrangebyscore", "zrem", "zscore",
)  # fmt: skip
#: Commands the library sends itself.
CLIENT_COMMANDS = (
    "evalsha", "script|load", "hget", "hgetall", "hset", "hsetnx", "hdel", "sadd", "sismember", "smembers", "srem",
    "xack", "xadd", "xgroup|create", "xrange", "xread", "xreadgroup", "zadd", "zcard", "zrange", "zrangebylex",
    "zrangebyscore", "zrem",
)  # fmt: skip
#: Connection housekeeping redis-py performs (handshake, health checks, cluster topology).
CONNECTION_COMMANDS = ("auth", "hello", "ping", "client|setname", "cluster|slots", "cluster|shards")
#: Extra commands of the admin role.
ADMIN_COMMANDS = ("scan", "unlink")

ROLES = ("client", "admin")


def role_commands(role: str) -> list[str]:
    """Every command ``role`` needs, sorted."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: use one of {ROLES}")
    commands = {*SCRIPT_COMMANDS, *CLIENT_COMMANDS, *CONNECTION_COMMANDS}
    if role == "admin":
        commands |= set(ADMIN_COMMANDS)
    return sorted(commands)


def acl_setuser_args(namespace: str, role: str, password: str | None = None) -> list[str]:
    """The ``ACL SETUSER <name> ...`` rules of ``role`` limited to ``namespace`` (user name not included)."""
    rules = ["on", "resetpass", f">{password}" if password else "nopass", "resetkeys", f"~{{{namespace}}}:*",
             f"~{{{namespace}:*", "resetchannels", "-@all"]  # fmt: skip
    return rules + [f"+{c}" for c in role_commands(role)]
