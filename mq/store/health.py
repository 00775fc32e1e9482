"""Reading a deployment's server facts for ``mq doctor``: INFO, CONFIG, cluster and sentinel state, ACL.

Every call here only reads. A fact the user is not allowed to read comes back as
:data:`NOT_ALLOWED` (never an exception), so the checks can say "unknown".
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import redis

from mq.store.connection import REDIS_ERRORS, Connection, parse_sentinel_url

#: What a read returns when the server refused it for permissions (``NOPERM``) or does not know it.
NOT_ALLOWED = "not allowed"


@dataclass(frozen=True)
class Node:
    """One data server of the deployment and a client for it (not to be closed: the connection owns it)."""

    name: str
    client: Any


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _read(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or :data:`NOT_ALLOWED` when the server refuses it for permissions or as unknown."""
    try:
        return fn(*args)
    except (redis.exceptions.NoPermissionError, redis.exceptions.ResponseError) as e:
        if isinstance(e, redis.exceptions.NoPermissionError) or "unknown" in str(e).lower() or "noperm" in str(e).lower():
            return NOT_ALLOWED
        raise


class Health:
    """Read-only probes of the servers behind one :class:`Connection`."""

    def __init__(self, connection: Connection) -> None:
        self.conn = connection

    def masters(self) -> list[Node]:
        """The master(s) serving the namespace: one, or every cluster primary."""
        client = self.conn.client
        if self.conn.kind == "cluster":
            return [Node(n.name, client.get_redis_connection(n)) for n in client.get_primaries()]
        return [Node(self.conn.node_of(self.conn.keys.topics), client)]

    @staticmethod
    def info(node: Node, section: str) -> dict[str, Any] | str:
        """``INFO section`` as a dict, or :data:`NOT_ALLOWED`."""
        result: dict[str, Any] | str = _read(node.client.info, section)
        return result

    @staticmethod
    def config(node: Node, name: str) -> str:
        """``CONFIG GET name``'s value, or :data:`NOT_ALLOWED` (managed services and least-privilege users)."""
        reply = _read(node.client.config_get, name)
        if reply == NOT_ALLOWED:
            return NOT_ALLOWED
        return _text(reply.get(name, "")) if isinstance(reply, dict) else NOT_ALLOWED

    def cluster_info(self) -> dict[str, Any] | str:
        """``CLUSTER INFO`` of the first node that answers, or :data:`NOT_ALLOWED`.

        Raises the last node's error when none answers."""
        error: Exception | None = None
        for node in self.conn.client.get_nodes():
            try:
                result: dict[str, Any] | str = _read(self.conn.client.get_redis_connection(node).cluster, "info")
                return result
            except REDIS_ERRORS as e:
                error = e
        raise error or RuntimeError("the cluster client knows no node")

    def acl_missing(self, node: Node, user: str | None, commands: list[str], key: str) -> list[str] | str:
        """The commands of ``commands`` that ``user`` (default: the connection's own) may not run on
        ``key``, by ``ACL DRYRUN``; :data:`NOT_ALLOWED` when this user may not ask."""
        if user is None:
            who = _read(node.client.execute_command, "ACL", "WHOAMI")
            if who == NOT_ALLOWED:
                return NOT_ALLOWED
            user = _text(who)
        missing = []
        for command in commands:
            try:
                reply = _read(node.client.execute_command, "ACL", "DRYRUN", user, *self._sample_args(node, command, key))
            except redis.exceptions.ResponseError:
                continue  # the sample arguments did not fit the command: no verdict, not a denial
            if reply == NOT_ALLOWED:
                return NOT_ALLOWED
            if "no permissions" in _text(reply).lower() and "command" in _text(reply).lower():
                missing.append(command)
        return missing

    @staticmethod
    def _sample_args(node: Node, command: str, key: str) -> list[str]:
        """``command`` (``name`` or ``name|sub``) with as many arguments as its arity asks, keys being ``key``."""
        name, _, sub = command.partition("|")
        if name == "evalsha":
            return ["evalsha", "0" * 40, "1", key]
        base = [name, sub] if sub else [name]
        info = node.client.execute_command("COMMAND", "INFO", command)  # redis-py: {name: {"arity": …}}
        found = next(iter(info.values()), None) if isinstance(info, dict) else None
        arity = int(found["arity"]) if isinstance(found, dict) and "arity" in found else -len(base)
        needed = arity if arity > 0 else max(-arity, len(base) + 1)
        return base + [key] * max(0, needed - len(base))

    def ping(self) -> None:
        """One round trip to the store (raises the redis-py error when it cannot be reached)."""
        self.conn.client.ping()

    def sentinels(self) -> list[SentinelState]:
        """Each sentinel of a ``redis+sentinel://`` URL: reachable or not, and its ``SENTINEL CKQUORUM``."""
        parsed = parse_sentinel_url(self.conn.url)
        out = []
        for host, port in parsed.sentinels:
            c: Any = redis.Redis(host=host, port=port, socket_timeout=1.0, socket_connect_timeout=1.0, ssl=parsed.tls)
            try:
                c.ping()
            except REDIS_ERRORS as e:
                c.close()
                out.append(SentinelState(f"{host}:{port}", str(e), None))
                continue
            try:
                quorum = (True, _text(c.execute_command("SENTINEL", "CKQUORUM", parsed.master_name)))
            except REDIS_ERRORS as e:  # NOQUORUM and friends come back as errors
                quorum = (False, str(e))
            finally:
                with contextlib.suppress(*REDIS_ERRORS):
                    c.close()
            out.append(SentinelState(f"{host}:{port}", None, quorum))
        return out


@dataclass(frozen=True)
class SentinelState:
    """What one sentinel said: ``error`` when unreachable, else ``quorum`` = (ok, its sentence)."""

    address: str
    error: str | None
    quorum: tuple[bool, str] | None
