"""What routing by the known slot saves on a cluster (issue 33 items 1 and 3, D132, D141): client CPU
and server calls a message, for sync ``send``, ``send_async``, the asyncio producer's ``send``, the
sync and asyncio push consumers' drains and a long-poll wake-up, on one standalone ``redis-server`` and
on a 3-master cluster, in the same run (each round measures every target in turn: interleaved).

The cluster is measured three times: with redis-py's own key lookups (the store's routing switched off,
as on main before D132: a ``COMMAND GETKEYS`` to the default node for every XREAD / XREADGROUP and every
pipelined EVALSHA), through redis-py's cluster command path with the keys known (D132, as before
D141), with the store's scripts sent straight to their node's kept connection but no reconnect signal
for a cluster's long-poll waiter (D141, as before D145: every wait checks its position), and as now
(``--variants`` picks which of the earlier ones run; "cluster" always does). Server
calls are the sum of every node's ``INFO commandstats`` over the phase; a ``COMMAND GETKEYS`` is a
round trip of its own, made before the command it is about. Client CPU is ``time.process_time`` (every thread of this process).

    python -m bench.cluster_routing -n 5000 --rounds 3
    python -m bench.cluster_routing -n 3000 --rounds 7 --variants d141

Results go to stdout and ``bench/results/cluster_routing.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import pathlib
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from bench.aio_consumer import aio_drain_rate
from bench.consumer import LAST_DRAIN_CPU_S, push_drain_rate
from mq import Admin, Message, MessageQueue, Producer, aio
from mq.store import Store, redispy
from mq.store.connection import Connection
from tests.servers import RedisClusterProcs, RedisServer

BODY = b"x" * 512
QUEUES = 16
GETKEYS = "cmdstat_command|getkeys"


def _nodes(ports: list[int]) -> list[redis.Redis]:
    return [redis.Redis(port=p) for p in ports]


def _reset(ports: list[int]) -> None:
    for node in _nodes(ports):
        with node:
            node.config_resetstat()


def _calls(ports: list[int]) -> tuple[int, int]:
    """(all calls, ``COMMAND GETKEYS`` calls) over every node since the last reset."""
    total = getkeys = 0
    for node in _nodes(ports):
        with node:
            stats = node.info("commandstats")
        total += sum(int(s["calls"]) for s in stats.values())
        getkeys += int(stats.get(GETKEYS, {}).get("calls", 0))
    return total, getkeys


@contextmanager
def _lookups_by_redis_py() -> Iterator[None]:
    """Clients made inside keep redis-py's own key lookups (the store's routing off, as before D132)."""
    kept = redispy.route_by_known_keys
    redispy.route_by_known_keys = lambda client: None
    try:
        yield
    finally:
        redispy.route_by_known_keys = kept


@contextmanager
def _cluster_command_path() -> Iterator[None]:
    """Clients made inside send every command through redis-py's cluster client (its command path and
    cluster pipeline, D132), not straight to the node of the known slot (D141)."""
    kept = redispy.is_sync_cluster
    redispy.is_sync_cluster = lambda client: False
    try:
        yield
    finally:
        redispy.is_sync_cluster = kept


@contextmanager
def _no_cluster_reconnect_signal() -> Iterator[None]:
    """A cluster connection tells its long-poll waiters of no reconnect (as before D145): each of their
    waits checks its position."""
    kept = Connection.on_reconnect

    def on_reconnect(self: Connection, callback: Callable[[Any], None]) -> bool:
        return False if self.kind == "cluster" else kept(self, callback)

    Connection.on_reconnect = on_reconnect  # type: ignore[method-assign]
    try:
        yield
    finally:
        Connection.on_reconnect = kept  # type: ignore[method-assign]


def _per_message(ports: list[int], n: int, cpu_s: float, wall_s: float) -> dict[str, float]:
    """Client CPU µs, rate, server calls and GETKEYS a message of a phase of ``n`` messages."""
    total, getkeys = _calls(ports)
    return {"cpu_us": cpu_s / n * 1e6, "msg_s": n / wall_s, "calls": total / n, "getkeys": getkeys / n}


def _phase(ports: list[int], n: int, work: Callable[[], None]) -> dict[str, float]:
    """Run ``work`` (``n`` messages) on freshly reset command counts."""
    _reset(ports)
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return _per_message(ports, n, time.process_time() - cpu, time.perf_counter() - wall)


def measure(url: str, ports: list[int], n: int) -> dict[str, dict[str, float]]:
    ns = f"bench{time.monotonic_ns()}"
    with Admin(url, ns) as admin:
        admin.create_topic("T", read_queues=QUEUES, write_queues=QUEUES)
    out: dict[str, dict[str, float]] = {}
    with Producer("bench-p", url, namespace=ns) as producer:
        producer.send(Message("T", BODY))  # the route and connections, outside the figures

        def sends() -> None:
            for _ in range(n):
                producer.send(Message("T", BODY))

        def async_sends() -> None:
            futures = [producer.send_async(Message("T", BODY)) for _ in range(n)]
            for f in futures:
                f.result()

        out["send"] = _phase(ports, n, sends)
        out["send_async"] = _phase(ports, n, async_sends)

    async def aio_sends() -> None:
        async with aio.Producer("bench-ap", url, namespace=ns) as producer:
            await producer.send(Message("T", BODY))  # the route and connections, outside the figures
            _reset(ports)
            cpu[0], wall[0] = time.process_time(), time.perf_counter()
            for _ in range(n):
                await producer.send(Message("T", BODY))
            cpu[0], wall[0] = time.process_time() - cpu[0], time.perf_counter() - wall[0]

    cpu, wall = [0.0], [0.0]
    asyncio.run(aio_sends())
    out["aio_send"] = _per_message(ports, n, cpu[0], wall[0])
    total = 3 * n + 2
    _reset(ports)
    rate = push_drain_rate(url, ns, "T", total)  # its CPU: consumer start to the last message
    out["drain"] = _per_message(ports, total, LAST_DRAIN_CPU_S[0], total / rate)
    _reset(ports)
    began = time.process_time()
    rate = asyncio.run(aio_drain_rate(url, ns, "T", total))  # consumer start to the last message too
    out["aio_drain"] = _per_message(ports, total, time.process_time() - began, total / rate)
    out["wake"] = wake_ups(url, ns, ports, WAKES)
    return out


class _Reconnects:
    """Counts a held connection's reconnects (redis-py keeps the callback as a weak bound method)."""

    def __init__(self) -> None:
        self.count = 0

    def seen(self, _conn: Any) -> None:
        self.count += 1


#: Long-poll wake-ups measured a round.
WAKES = 300


def wake_ups(url: str, ns: str, ports: list[int], n: int) -> dict[str, float]:
    """Client CPU of a long-poll wake-up: a waiter thread blocks in ``wait_for_messages`` on one queue
    (its own long-timeout connection, held as the push consumer's waiters hold it: on a cluster its
    position checked at every wait, as there), woken ``n`` times by one sync send each. The figure is the
    waiter thread's own CPU (``time.thread_time``) a wake-up; "calls" are every node's a wake-up,
    the send's included."""
    with Admin(url, ns) as admin:
        admin.create_topic("W", read_queues=1, write_queues=1)
    queue = MessageQueue("W", "broker-0", 0)
    woken = threading.Semaphore(0)
    stop = threading.Event()
    cpu = [0.0]

    def waiter() -> None:
        conn = Connection(url, ns, socket_timeout_s=5).held()
        reconnects = _Reconnects()
        check = not conn.on_reconnect(reconnects.seen)  # False where a reconnect callback stands in for it
        store = Store(conn)
        offset = 0
        try:
            while not stop.is_set():
                began = time.thread_time()
                _, news = store.wait_for_messages(queue, offset, 32, 1000, group="bench-wake", check=check)
                if news is not None:
                    offset = news[1]
                    cpu[0] += time.thread_time() - began
                    woken.release()
        finally:
            conn.release_held()
            conn.close()

    with Producer("bench-w", url, namespace=ns) as producer:
        producer.send(Message("W", BODY))  # the route, and a first wake-up outside the figures
        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        woken.acquire(timeout=10)
        cpu[0] = 0.0
        _reset(ports)
        wall = time.perf_counter()
        for _ in range(n):
            time.sleep(0.002)  # the waiter is blocked again
            producer.send(Message("W", BODY))
            if not woken.acquire(timeout=10):
                raise RuntimeError("a long-poll waiter was not woken within 10 s")
        stop.set()
        producer.send(Message("W", BODY))  # its last wait returns
        thread.join(10)
        return _per_message(ports, n, cpu[0], time.perf_counter() - wall - 0.002 * n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="messages a send phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="lookups,d132,d141", help="earlier cluster paths measured too (comma-separated)")
    args = parser.parse_args()
    earlier = {
        "lookups": ("cluster, redis-py lookups", lambda: _stacked(_lookups_by_redis_py(), _cluster_command_path())),
        "d132": ("cluster, redis-py path (D132)", _cluster_command_path),
        "d141": ("cluster, no reconnect signal (D141)", _no_cluster_reconnect_signal),
    }
    chosen = [earlier[v] for v in args.variants.split(",") if v]
    variants = (*(name for name, _ in chosen), "cluster")
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"standalone": [], **{v: [] for v in variants}}
    with RedisServer() as server, RedisClusterProcs() as cluster:
        for _ in range(args.rounds):
            runs["standalone"].append(measure(server.url, [server.port], args.n))
            for name, path in chosen:
                with path():
                    runs[name].append(measure(cluster.url, cluster.ports, args.n))
            runs["cluster"].append(measure(cluster.url, cluster.ports, args.n))
            print(
                json.dumps(
                    {
                        "round": len(runs["cluster"]),
                        "cpu_us": {t: {ph: round(v["cpu_us"], 1) for ph, v in r[-1].items()} for t, r in runs.items()},
                    }
                ),
                file=sys.stderr,
                flush=True,
            )
    summary: dict[str, Any] = {}
    for target, rounds in runs.items():
        summary[target] = {
            phase: {k: round(statistics.median(r[phase][k] for r in rounds), 2) for k in rounds[0][phase]} for phase in rounds[0]
        }
    for phase in ("send", "send_async", "aio_send", "drain", "aio_drain", "wake"):
        base = summary["standalone"][phase]["cpu_us"]
        for target in variants:
            summary[target][phase]["cpu_vs_standalone"] = round(summary[target][phase]["cpu_us"] / base, 2)
            # each round's own ratio (the same round's standalone figure): the spread of a loaded machine
            ratios = [round(r[phase]["cpu_us"] / s[phase]["cpu_us"], 2) for r, s in zip(runs[target], runs["standalone"])]
            summary[target][phase]["cpu_vs_standalone_rounds"] = ratios
            summary[target][phase]["cpu_vs_standalone_rounds_median"] = round(statistics.median(ratios), 2)
        for target in runs:
            summary[target][phase]["cpu_us_rounds"] = [round(r[phase]["cpu_us"], 1) for r in runs[target]]
    print(json.dumps(summary, indent=2))
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "cluster_routing.json").write_text(
        json.dumps({"n": args.n, "rounds": args.rounds, "variants": args.variants, "median": summary}, indent=2)
    )


@contextmanager
def _stacked(*contexts: Any) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for c in contexts:
            stack.enter_context(c)
        yield


if __name__ == "__main__":
    main()
