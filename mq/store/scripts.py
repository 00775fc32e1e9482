"""Loading and running the Lua scripts in ``mq/store/lua/``.

Each ``<name>-<numkeys>.lua`` file is one atomic operation; ``--@include NAME`` pulls in a shared
fragment from ``lua/includes/NAME.lua``. A header line ``Flags: allow-oom`` sends the script with
Redis 7's ``#!lua flags=allow-oom`` shebang: a consumer's small bookkeeping writes (heartbeats,
claims, offsets) go on when the store is at ``maxmemory``, so consumption never stops for a full
store (servers older than 7, and the embedded store, get the script without the shebang). Scripts run with ``EVALSHA``; when a
server does not know a script (after a restart or ``SCRIPT FLUSH``, or on a cluster node that has
not seen it) it is loaded and the call is made again. A script that did not run because of
``NOSCRIPT`` had no effect, so the second call is safe.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from mq.store import lane, ops, redispy
from mq.store.ops import Cmd, NodePipe, Op, Pipe, Request

#: Codes the scripts return for refused operations, and what they mean.
QUEUE_MISSING = -1
QUEUE_NOT_WRITABLE = -2
#: The queue's meta is gone while its log is there: Redis evicted it (see put-messages-6.lua).
QUEUE_EVICTED = -3
#: The put's first msg id is fenced on the queue: a producer retry gave that attempt up (fence-message-3.lua).
QUEUE_FENCED = -4


#: Attribute set on a client whose server refused a flagged script (Redis < 7): plain scripts only.
_NO_FLAGS = "_mq_no_script_flags"


@dataclass(frozen=True)
class Script:
    """One Lua script: its name, number of keys, source and SHA1, and its flags (``Flags:`` in the header)."""

    name: str
    numkeys: int
    source: str
    sha: str
    flags: tuple[str, ...] = ()

    @functools.cached_property
    def flagged_source(self) -> str:
        """The source with the ``#!lua flags=…`` shebang (the source itself when it has no flags)."""
        return f"#!lua flags={','.join(self.flags)}\n{self.source}" if self.flags else self.source

    @functools.cached_property
    def flagged_sha(self) -> str:
        """The SHA1 of :attr:`flagged_source`."""
        return hashlib.sha1(self.flagged_source.encode()).hexdigest() if self.flags else self.sha

    def args(self, keys: Sequence[str], argv: Sequence[Any], *, flagged: bool = False) -> tuple[Any, ...]:
        """The ``EVALSHA`` arguments for a call with ``keys`` and ``argv``."""
        if len(keys) != self.numkeys:
            raise ValueError(f"script {self.name} takes {self.numkeys} keys, got {len(keys)}")
        return (self.flagged_sha if flagged else self.sha, self.numkeys, *keys, *argv)


def _flagged(client: Any) -> bool:
    """Whether ``client``'s server takes script flags: Redis ≥ 7, not the embedded fakeredis store."""
    return not getattr(client, _NO_FLAGS, False) and not type(client).__module__.startswith("fakeredis")


def _expand(source: str, folder: Any) -> str:
    """Replace each ``--@include NAME`` line with ``includes/NAME.lua`` (shared Lua fragments)."""
    lines = []
    for line in source.splitlines():
        name = line.strip().removeprefix("--@include ").strip() if line.strip().startswith("--@include ") else None
        lines.append(_expand(folder.joinpath("includes", f"{name}.lua").read_text(encoding="utf-8"), folder) if name else line)
    return "\n".join(lines) + "\n"


def _load_all() -> dict[str, Script]:
    scripts = {}
    folder = resources.files("mq.store").joinpath("lua")
    for entry in folder.iterdir():
        if not entry.name.endswith(".lua"):
            continue
        stem = entry.name[: -len(".lua")]
        name, _, numkeys = stem.rpartition("-")
        source = _expand(entry.read_text(encoding="utf-8"), folder)
        sha = hashlib.sha1(source.encode()).hexdigest()
        header = source.split("]]", 1)[0]
        flags = tuple(
            f.strip()
            for line in header.splitlines()
            if line.strip().startswith("Flags:")
            for f in line.strip().removeprefix("Flags:").split("(")[0].split(",")
            if f.strip()
        )
        scripts[name] = Script(name=name, numkeys=int(numkeys), source=source, sha=sha, flags=flags)
    return scripts


#: Every script shipped with the package, by name (file name without ``-N.lua``).
SCRIPTS: dict[str, Script] = _load_all()


class Eval(Request):
    """The request running script ``name`` with ``keys`` and ``argv`` (``EVALSHA``; a server that
    lacks the script gets it loaded, then the call is made again — a call refused with ``NOSCRIPT``
    had no effect)."""

    __slots__ = ("argv", "keys", "script")

    def __init__(self, name: str, keys: Sequence[str], argv: Sequence[Any]) -> None:
        self.script, self.keys, self.argv = SCRIPTS[name], keys, argv

    def do(self, client: Any) -> Any:
        # lane.execute: the client's kept connection when it has one (no pool checkout per call, D53),
        # on a cluster the kept connection of the node serving the first key (D141)
        key = self.keys[0] if self.keys else None
        try:
            return lane.execute(client, "EVALSHA", *self.script.args(self.keys, self.argv, flagged=_flagged(client)), key=key)
        except NoScriptError:
            ops.run(client, load(self.script.name, self.keys))
            return lane.execute(client, "EVALSHA", *self.script.args(self.keys, self.argv, flagged=_flagged(client)), key=key)

    async def ado(self, client: Any) -> Any:
        try:
            return await client.evalsha(*self.script.args(self.keys, self.argv, flagged=_flagged(client)))
        except NoScriptError:
            await ops.arun(client, load(self.script.name, self.keys))
            return await client.evalsha(*self.script.args(self.keys, self.argv, flagged=_flagged(client)))


def run(client: Any, name: str, keys: Sequence[str], argv: Sequence[Any]) -> Any:
    """Run script ``name`` at once on a sync ``client`` (a Redis, RedisCluster or fakeredis client)."""
    return Eval(name, keys, argv).do(client)


def call_many(
    calls: Sequence[tuple[str, Sequence[str], Sequence[Any]]], then: Callable[[Any], object] | None = None
) -> Op[list[Any]]:
    """The operation running several script calls in one pipeline (grouped by node on a cluster),
    followed in the same pipeline by the plain commands ``then(pipeline)`` queues, if any.

    Returns one result per call, in order, then one per command of ``then``; a failed slot holds its
    exception instance. Calls refused with ``NOSCRIPT`` are retried once after loading the script
    (with ``then``, the whole pipeline is sent again, so its commands still follow the scripts).
    """
    results: list[Any] = yield EvalMany(calls, then)
    missing = [i for i, r in enumerate(results[: len(calls)]) if isinstance(r, NoScriptError)]
    if missing:
        for i in missing:
            yield from load(calls[i][0], calls[i][1])
        if then is not None:
            return (yield EvalMany(calls, then))  # type: ignore[no-any-return]
        retried = yield EvalMany([calls[i] for i in missing])
        for i, r in zip(missing, retried):
            results[i] = r
    return results


def load(name: str, keys: Sequence[str]) -> Op[None]:
    """The operation loading script ``name`` into the server that serves ``keys``.

    On a cluster only that node is asked: loading on every primary would fail while any one of
    them is down, and would break sends to the healthy ones. A server that cannot compile a flagged
    script (Redis < 7 has no shebang) gets plain scripts from then on.
    """
    script = SCRIPTS[name]
    if script.flags and (yield Cmd(_flagged)):
        try:
            yield Cmd(lambda c: _script_load(c, script.flagged_source, keys))
            return
        except ResponseError as e:
            if "compil" not in str(e).lower() and "shebang" not in str(e).lower():
                raise
            yield Cmd(lambda c: setattr(c, _NO_FLAGS, True))
    yield Cmd(lambda c: _script_load(c, script.source, keys))


def _script_load(client: Any, source: str, keys: Sequence[str]) -> Any:
    if hasattr(client, "nodes_manager"):
        return client.execute_command("SCRIPT LOAD", source, target_nodes=client.get_node_from_key(keys[0]))
    return client.script_load(source)


def queue_calls(pipe: Any, calls: Sequence[tuple[str, Sequence[str], Sequence[Any]]], flagged: bool) -> None:
    """Queue ``EVALSHA`` of each call on ``pipe`` (``flagged``: the variant with Redis 7 flags, see
    :func:`_flagged` of the pipeline's client)."""
    for name, keys, argv in calls:
        # execute_command, not evalsha(): redis-py blocks the evalsha method on cluster pipelines, but
        # routes a queued EVALSHA by its keys like any other command.
        pipe.execute_command("EVALSHA", *SCRIPTS[name].args(keys, argv, flagged=flagged))


class EvalMany(Pipe):
    """The request running several script calls in one pipeline (the script variant the client's
    server takes), then the plain commands ``then(pipeline)`` queues; the reply is one result or
    exception per call, then per command."""

    __slots__ = ("calls",)

    def __init__(
        self, calls: Sequence[tuple[str, Sequence[str], Sequence[Any]]], then: Callable[[Any], object] | None = None
    ) -> None:
        super().__init__(then or _nothing)
        self.calls = calls

    def do(self, client: Any) -> Any:
        if redispy.is_sync_cluster(client) and self.calls and all(keys for _, keys, _ in self.calls):
            replies = self._routed(client)
            if replies is not None:
                return replies
        return super().do(client)

    def _routed(self, client: Any) -> list[Any] | None:
        """The replies sent one round a node on the nodes' kept connections of a sync cluster (D141),
        or None where :func:`lane.execute_many` sends nothing (or a command of ``then`` names no key)."""
        commands = _evalsha(self.calls, _flagged(client))
        if self.build is not _nothing:
            node = redispy.node_client(client, self.calls[0][1][0])
            then = redispy.recorded(node, self.build) if node is not None else None
            if then is None:
                return None
            commands += then
        return lane.execute_many(client, commands)

    def _fill(self, pipe: Any, client: Any) -> None:
        queue_calls(pipe, self.calls, _flagged(client))
        self.build(pipe)


def _evalsha(calls: Sequence[tuple[str, Sequence[str], Sequence[Any]]], flagged: bool) -> list[lane.Routed]:
    """``EVALSHA`` of each call as :func:`lane.execute_many` takes it (its first key names its node)."""
    return [(("EVALSHA", *SCRIPTS[name].args(keys, argv, flagged=flagged)), {}, keys[0], None) for name, keys, argv in calls]


def _nothing(pipe: Any) -> None:
    """Queues no command."""


class EvalThen(NodePipe):
    """Script calls, then the commands ``build`` queues, in one pipeline on the node serving ``key``
    (every key in its slot); the reply is one result or exception per call, then per command."""

    __slots__ = ("calls",)

    def __init__(self, key: str, calls: Sequence[tuple[str, Sequence[str], Sequence[Any]]], build: Any) -> None:
        super().__init__(key, build)
        self.calls = calls

    def _queued(self, client: Any, node: Any) -> list[lane.Routed] | None:
        then = redispy.recorded(node, self.build)
        return None if then is None else [*_evalsha(self.calls, _flagged(client)), *then]

    def _fill(self, pipe: Any, client: Any) -> None:
        queue_calls(pipe, self.calls, _flagged(client))
        self.build(pipe)
