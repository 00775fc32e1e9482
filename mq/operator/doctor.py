"""``mq doctor``: check the store a deployment points at, one finding per line (OK / WARN / FAIL).

Checks, on the master (each cluster primary):

- ``maxmemory-policy``: anything but ``noeviction`` lets Redis evict messages silently → FAIL;
- persistence: AOF off → WARN (a restart loses what the last snapshot missed); ``appendfsync``;
- replicas connected, their state and lag; no replica → WARN (a lost server loses everything);
- Sentinel (``redis+sentinel://``): each sentinel reachable, ``SENTINEL CKQUORUM`` → FAIL when no quorum;
- cluster: state and slot coverage → FAIL unless ok and all 16384 slots served; masters without replica;
- the server (Redis or Valkey) and its version, and what ``sync_replicas`` and ``sync_flush`` use on it
  (``WAIT``; ``WAITAOF`` from Redis 7.2);
- the ACL user's missing commands (``ACL DRYRUN``) against the ``client`` role of :mod:`mq.operator.security`;
- the namespace's keys: queue streams whose topic config or queue meta Redis evicted, group offsets
  of topics without a config → FAIL, with ``mq topic recover`` to rebuild them (:mod:`mq.operator.recovery`).

A fact the user may not read (``CONFIG`` refused, as on managed services and least-privilege users)
is reported as "unknown" with WARN, never a crash. The broker service runs the same checks at start
and logs them (FAIL as errors, the rest at INFO); ``mq broker --check`` fails when one is FAIL.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any

from mq.errors import MQError
from mq.operator.security import role_commands
from mq.store.connection import REDIS_ERRORS, Connection, mask_url, translate_errors
from mq.store.health import NOT_ALLOWED, Health, Node

OK, WARN, FAIL = "OK", "WARN", "FAIL"
#: Replica lag (seconds since its last acknowledgement) above which a replica is reported.
MAX_REPLICA_LAG_S = 1
#: The oldest Redis version the library is tested with.
MIN_VERSION = (7, 0)
#: The first Redis version with ``WAITAOF``.
WAITAOF_VERSION = (7, 2)


@dataclass(frozen=True)
class Finding:
    """One line of the report."""

    level: str
    check: str
    text: str

    def __str__(self) -> str:
        return f"{self.level:<4} {self.check}: {self.text}"


def _version(raw: str) -> tuple[int, ...]:
    return tuple(int(p) for p in raw.split(".")[:2] if p.isdigit())


def server_of(info: dict[str, Any]) -> tuple[str, str]:
    """``(name, version)`` of the server an ``INFO server`` reply describes: ``("Redis", "8.2.3")``,
    ``("Valkey", "9.1.2")`` (Valkey names itself in ``server_name`` and reports a Redis-compatible
    ``redis_version`` besides its own)."""
    name = str(info.get("server_name") or "redis")
    version = str(info.get(f"{name}_version") or info.get("redis_version", "?"))
    return ("Redis" if name == "redis" else name.capitalize()), version


def _version_finding(info: dict[str, Any], where: str) -> Finding:
    """Which server and version, and what the durability modes use on it."""
    name, version = server_of(info)
    compatible = str(info.get("redis_version", "?"))
    v = _version(compatible)
    level = OK if v >= MIN_VERSION else WARN
    modes = (
        "sync_replicas uses WAIT (replica memory), sync_flush uses WAITAOF (AOF on disk)"
        if v >= WAITAOF_VERSION
        else "sync_replicas uses WAIT (replica memory); sync_flush is refused (WAITAOF needs Redis >= 7.2)"
    )
    text = f"{name} {version}" + ("" if name == "Redis" else f" (Redis {compatible} compatible)") + f"; {modes}"
    if level != OK:
        text += f"; tested from {'.'.join(map(str, MIN_VERSION))}"
    return Finding(level, f"version{where}", text)


def _check_node(health: Health, node: Node, where: str, *, cluster: bool) -> list[Finding]:
    out: list[Finding] = []
    server = health.info(node, "server")
    if server == NOT_ALLOWED or not isinstance(server, dict):
        out.append(Finding(WARN, f"version{where}", "unknown (INFO is not allowed to this user)"))
    else:
        out.append(_version_finding(server, where))
    policy = health.config(node, "maxmemory-policy")
    if policy == NOT_ALLOWED:
        out.append(
            Finding(
                WARN, f"maxmemory-policy{where}", "unknown (CONFIG GET is not allowed to this user): make sure it is noeviction"
            )
        )
    elif policy != "noeviction":
        out.append(
            Finding(
                FAIL, f"maxmemory-policy{where}", f"{policy}: Redis may evict messages silently; set maxmemory-policy noeviction"
            )
        )
    else:
        out.append(Finding(OK, f"maxmemory-policy{where}", "noeviction"))
    out.append(_persistence(health, node, where))
    out += _replication(health, node, where, cluster=cluster)
    return out


def _persistence(health: Health, node: Node, where: str) -> Finding:
    aof = health.config(node, "appendonly")
    if aof == NOT_ALLOWED:
        info = health.info(node, "persistence")
        if isinstance(info, dict) and "aof_enabled" in info:
            aof = "yes" if int(info["aof_enabled"]) else "no"
        else:
            return Finding(WARN, f"persistence{where}", "unknown (CONFIG GET and INFO are not allowed to this user)")
    if aof != "yes":
        return Finding(
            WARN, f"persistence{where}", "AOF off: a restart loses what the last RDB snapshot missed; set appendonly yes"
        )
    fsync = health.config(node, "appendfsync")
    if fsync == NOT_ALLOWED:
        return Finding(OK, f"persistence{where}", "AOF on (appendfsync unknown: CONFIG GET is not allowed to this user)")
    if fsync == "no":
        return Finding(WARN, f"persistence{where}", "AOF on, appendfsync no: the OS decides when data reaches the disk")
    return Finding(OK, f"persistence{where}", f"AOF on, appendfsync {fsync}")


def _replication(health: Health, node: Node, where: str, *, cluster: bool) -> list[Finding]:
    info = health.info(node, "replication")
    if not isinstance(info, dict):
        return [Finding(WARN, f"replicas{where}", "unknown (INFO is not allowed to this user)")]
    if info.get("role") != "master":
        return [
            Finding(
                FAIL,
                f"replicas{where}",
                "this server is a replica: writes fail; point the URL at the master (or use redis+sentinel://)",
            )
        ]
    replicas = [v for k, v in info.items() if k.startswith("slave") and k[5:].isdigit() and isinstance(v, dict)]
    if not replicas:
        hint = "add a replica to each master" if cluster else "add a replica (and Sentinel) for failover"
        return [Finding(WARN, f"replicas{where}", f"none: losing this server loses its messages; {hint}")]
    out = []
    for r in replicas:
        name = f"{r.get('ip')}:{r.get('port')}"
        state, lag = r.get("state"), int(r.get("lag", 0))
        if state != "online":
            out.append(Finding(WARN, f"replicas{where}", f"{name} is {state} (not in sync)"))
        elif lag > MAX_REPLICA_LAG_S:
            out.append(Finding(WARN, f"replicas{where}", f"{name} online, lag {lag} s (over {MAX_REPLICA_LAG_S} s)"))
        else:
            out.append(Finding(OK, f"replicas{where}", f"{name} online, lag {lag} s"))
    return out


def _sentinels(health: Health) -> list[Finding]:
    out: list[Finding] = []
    reachable = 0
    quorum: tuple[bool, str] | None = None
    for state in health.sentinels():
        if state.error is not None:
            out.append(Finding(WARN, "sentinel", f"{state.address} unreachable: {state.error}"))
            continue
        reachable += 1
        if quorum is None or not quorum[0]:
            quorum = state.quorum
    if reachable < 3:
        out.append(Finding(WARN, "sentinel", f"{reachable} sentinel(s) reachable: run at least 3 for a safe majority"))
    if quorum is None:
        out.append(Finding(FAIL, "sentinel quorum", "no sentinel answers: no failover is possible"))
    else:
        out.append(Finding(OK if quorum[0] else FAIL, "sentinel quorum", quorum[1]))
    return out


def _cluster(health: Health) -> list[Finding]:
    info = health.cluster_info()
    if not isinstance(info, dict):
        return [Finding(WARN, "cluster", "unknown (CLUSTER INFO is not allowed to this user)")]
    state, slots_ok = info.get("cluster_state"), int(info.get("cluster_slots_ok", 0))
    text = f"state {state}, {slots_ok}/16384 slots served, {info.get('cluster_size')} masters"
    if state != "ok" or slots_ok != 16384:
        return [Finding(FAIL, "cluster", text + ": some queues cannot be read or written")]
    return [Finding(OK, "cluster", text)]


def _acl(health: Health, node: Node, namespace: str, user: str | None) -> Finding:
    missing = health.acl_missing(node, user, role_commands("client"), f"{{{namespace}}}:doctor")
    if missing == NOT_ALLOWED:
        return Finding(
            WARN,
            "acl",
            "unknown (ACL WHOAMI/DRYRUN are not allowed to this user; run mq doctor as an admin with --acl-user USER)",
        )
    if missing:
        return Finding(
            FAIL,
            "acl",
            f"user {user or 'of the URL'} may not run: {', '.join(missing)} "
            "(see docs/security.md, mq.operator.security.acl_setuser_args)",
        )
    return Finding(OK, "acl", f"user {user or 'of the URL'} may run every command of the client role")


def _tier(conn: Connection) -> list[Finding]:
    """The namespace's tier (``tier_url`` the broker service published): a probe file written, read
    back and removed. No finding without a tier."""
    from mq.store import Store
    from mq.store.tier import TIER_URL_SETTING

    try:
        url = Store(conn).namespace_setting(TIER_URL_SETTING)
    except MQError as e:
        return [Finding(WARN, "tier", f"unknown ({e})")]
    if not url:
        return []
    from mq.tier.location import probe

    try:
        probe(url)
    except Exception as e:  # pyarrow's errors (OSError, ArrowException), a bad URL: all say the tier cannot be used
        return [Finding(FAIL, "tier", f"{url}: not writable or not reachable: {e}; uploads wait and Redis keeps every message")]
    return [Finding(OK, "tier", f"{url}: reachable and writable")]


#: Most evicted topics :func:`_evicted` names one by one (then a count of the rest).
MAX_EVICTED_LINES = 20


def _evicted(conn: Connection) -> list[Finding]:
    """Bookkeeping Redis evicted from the namespace (see :mod:`mq.operator.recovery`): queue streams without a
    topic config or a queue meta, group offsets of topics without a config. Scans the namespace's keys."""
    from mq.operator.recovery import find_evicted, needs_seq
    from mq.store import Store

    store = Store(conn)
    try:
        present = store.queue_keys_present()
        spans = store.topic_spans()
        wanted = needs_seq(present, spans)
        seqs = dict(zip(wanted, store.queue_seqs(wanted)))
    except MQError as e:
        return [Finding(WARN, "evicted keys", f"unknown ({e})")]
    found = find_evicted(spans, present, seqs)
    if not found:
        return [Finding(OK, "evicted keys", "none: every stored queue has its topic config and queue meta")]
    out = [Finding(FAIL, "evicted keys", f"Redis evicted rocketredis's keys: {e}") for e in found[:MAX_EVICTED_LINES]]
    if len(found) > MAX_EVICTED_LINES:
        out.append(Finding(FAIL, "evicted keys", f"and {len(found) - MAX_EVICTED_LINES} more topics; run `mq topic recover`"))
    return out


def check(url: str | None, namespace: str = "mq", *, acl_user: str | None = None, keys: bool = True) -> list[Finding]:
    """Run every check on the store at ``url``; one :class:`Finding` each.

    ``keys``: also look for evicted bookkeeping (a ``SCAN`` of the namespace, admin role); the broker
    service's start-up check and ``mq broker --check`` (a health probe) leave it out.

    Raises:
        MQBrokerError: the store cannot be reached at all (one FAIL line would hide nothing more).
    """
    conn = Connection(url, namespace)
    try:
        if conn.kind == "memory":
            return [Finding(WARN, "store", "memory:// is the embedded in-process store: nothing survives the process")]
        health = Health(conn)
        cluster = conn.kind == "cluster"
        out: list[Finding] = []
        if conn.kind == "sentinel":
            out += _sentinels(health)
        with translate_errors(conn.url, "checking the store"):
            if cluster:
                out += _cluster(health)
            else:
                health.ping()
            masters = health.masters()
        reachable = []
        for node in masters:
            where = f" [{node.name}]" if cluster else ""
            try:
                out += _check_node(health, node, where, cluster=cluster)
                reachable.append(node)
            except REDIS_ERRORS as e:  # one master down: say so, check the others
                out.append(Finding(FAIL, f"reachable{where}", f"no answer: {e}"))
        if reachable:
            try:
                out.append(_acl(health, reachable[0], namespace, acl_user))
            except REDIS_ERRORS as e:
                out.append(Finding(WARN, "acl", f"unknown ({e})"))
            out += _tier(conn)
            if keys:
                out += _evicted(conn)
        return out
    finally:
        conn.close()


def worst(findings: list[Finding]) -> str:
    """FAIL if any finding is FAIL, else WARN if any is, else OK."""
    levels = {f.level for f in findings}
    return FAIL if FAIL in levels else WARN if WARN in levels else OK


def log_findings(findings: list[Finding], logger: logging.Logger, url: str) -> None:
    """Log each finding: OK and WARN at INFO (a development Redis without replicas or AOF is normal and
    should not warn at every start; ``mq doctor`` shows them), FAIL at ERROR."""
    for f in findings:
        logger.log(logging.ERROR if f.level == FAIL else logging.INFO, "store check %s: %s", mask_url(url), f)


def run(url: str | None, namespace: str, *, acl_user: str | None = None, out: Any = None) -> int:
    """Print the findings (to ``out``, default stdout); return 1 when one is FAIL, else 0."""
    findings = check(url, namespace, acl_user=acl_user)
    for f in findings:
        print(f, file=out or sys.stdout)
    return 1 if worst(findings) == FAIL else 0
