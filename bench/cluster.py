"""Scale-out on 3, 6 and 9 masters against one standalone node, in one run (issue 33 item 2, D141).

Each target gets servers of its own (loopback, free ports, stopped by pid): one standalone
``redis-server``, then clusters of 3, 6 and 9 masters without replicas. On each the same mixed load:
``--producers`` processes send ``-n`` messages in all (512 B, ``send_async``; every tenth delayed by
100 ms through a broker service process, every fiftieth a transaction message committed at once) to one
topic of ``--queues`` queues (8 × the most masters by default: ≥ 8 queues a master on every
cluster), and ``--consumers`` push consumer processes of one group drain it. Spark is not part of
the load (see docs/benchmarks.md).

Measured a target, from the producers' start until the consumers have everything:

- throughput (messages a second, the consumers' count over the wall time);
- client CPU a message (every producer, consumer and broker process: ``time.process_time`` in each);
- each node's share of all calls (``INFO commandstats``, reset first) against an even share, and each
  node's CPU seconds (``INFO cpu``, user + sys) a wall second;
- the namespace node's control traffic (topics, timers index, halves, brokers, group registries):
  the calls on the nodes holding the namespace's and the groups' hash tags above what their queues
  account for, at the calls a queue of the other nodes (an estimate: commandstats do not split calls
  by key; none where every node holds such a tag, as on 3 masters with two producer groups).

    python -m bench.cluster -n 20000 --masters 3 6 9

Results go to stdout and ``bench/results/cluster.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pathlib
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

BODY = b"x" * 512
TOPIC = "L"
GROUP = "bench-scale"
#: Delay levels of the broker service: level 1 is 100 ms.
FAST_LEVELS = "100ms 200ms 300ms"
DELAY_EVERY = 10
TX_EVERY = 50
#: Futures a producer lets be in flight before it waits for them.
IN_FLIGHT = 1024


def _produce(url: str, ns: str, index: int, n: int, ready: Any, go: Any, out: Any) -> None:
    """A producer process: ``n`` messages, every tenth delayed, every fiftieth in a transaction, from
    ``go`` on (its CPU from there)."""
    from mq import LocalTransactionState, Message, Producer, TransactionProducer

    commit = LocalTransactionState.COMMIT_MESSAGE
    with (
        Producer(f"bench-p{index}", url, namespace=ns) as producer,
        TransactionProducer(f"bench-tx{index}", url, namespace=ns, checker=lambda m: commit) as tx,
    ):
        ready.value = 1
        go.wait(600)
        cpu = time.process_time()
        futures: list[Any] = []
        for i in range(n):
            if i % TX_EVERY == 0:
                tx.send_message_in_transaction(Message(TOPIC, BODY), lambda m, a: commit)
            elif i % DELAY_EVERY == 0:
                futures.append(producer.send_async(Message(TOPIC, BODY, delay_level=1)))
            else:
                futures.append(producer.send_async(Message(TOPIC, BODY)))
            if len(futures) >= IN_FLIGHT:
                for f in futures:
                    f.result(60)
                futures = []
        for f in futures:
            f.result(60)
    out.put(("producer", index, time.process_time() - cpu))


def _consume(url: str, ns: str, index: int, count: Any, ready: Any, stop: Any, out: Any) -> None:
    """A push consumer process of the group: counts what it is handed until told to stop."""
    import threading

    from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer

    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            count.value += len(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(listener)
    consumer.start()
    cpu = time.process_time()
    ready.value = 1
    stop.wait(600)
    consumer.shutdown()
    out.put(("consumer", index, time.process_time() - cpu))


def _broker(url: str, ns: str, ready: Any, stop: Any, out: Any) -> None:
    """The broker service process (due delayed messages, transaction check-backs)."""
    from scheduler import BrokerConfig, BrokerService

    with BrokerService(url, ns, BrokerConfig(message_delay_level=FAST_LEVELS)):
        cpu = time.process_time()
        ready.value = 1
        stop.wait(600)
    out.put(("broker", 0, time.process_time() - cpu))


def _node_stats(ports: list[int]) -> list[dict[str, float]]:
    """Each node's calls (commandstats) and CPU seconds (user + sys) now."""
    out = []
    for port in ports:
        with redis.Redis(port=port) as node:
            stats = node.info("commandstats")
            cpu = node.info("cpu")
        out.append(
            {
                "calls": sum(int(s["calls"]) for s in stats.values()),
                "cpu_s": float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
            }
        )
    return out


def _reset(ports: list[int]) -> None:
    for port in ports:
        with redis.Redis(port=port) as node:
            node.config_resetstat()


def _slot_ports(cluster_url: str) -> Any:
    """A function from a key to the port of the master serving it (None for a standalone target)."""
    client = redis.RedisCluster.from_url(cluster_url.replace("redis+cluster://", "redis://").split(",")[0])

    def port_of(key: str) -> int:
        return int(client.get_node_from_key(key).port)

    return client, port_of


def run_load(url: str, ports: list[int], args: argparse.Namespace, cluster: bool) -> dict[str, Any]:
    """The mixed load on one target; its figures."""
    from mq import Admin
    from mq.keys import Keys

    ns = f"scale{time.monotonic_ns()}"
    with Admin(url, ns) as admin:
        admin.create_topic(TOPIC, read_queues=args.queues, write_queues=args.queues)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    stop, go = ctx.Event(), ctx.Event()
    counts = [ctx.Value("l", 0) for _ in range(args.consumers)]
    ready = [ctx.Value("i", 0) for _ in range(1 + args.consumers + args.producers)]
    total = args.n - args.n % args.producers
    procs = [ctx.Process(target=_broker, args=(url, ns, ready[0], stop, out))]
    procs += [ctx.Process(target=_consume, args=(url, ns, i, counts[i], ready[1 + i], stop, out)) for i in range(args.consumers)]
    procs += [
        ctx.Process(target=_produce, args=(url, ns, i, total // args.producers, ready[1 + args.consumers + i], go, out))
        for i in range(args.producers)
    ]
    for p in procs:
        p.start()
    while not all(r.value for r in ready):
        time.sleep(0.05)
    time.sleep(args.settle)  # consumers registered and balanced, waiting on empty queues
    _reset(ports)
    before = _node_stats(ports)
    started = time.perf_counter()
    go.set()
    deadline = started + args.timeout
    while sum(c.value for c in counts) < total and time.perf_counter() < deadline:
        time.sleep(0.02)
    wall = time.perf_counter() - started
    consumed = sum(c.value for c in counts)
    after = _node_stats(ports)
    stop.set()
    for p in procs:
        p.join(60)
    cpu = {}
    while not out.empty():
        kind, index, seconds = out.get()
        cpu[f"{kind}{index}"] = seconds
    calls = [a["calls"] - b["calls"] for a, b in zip(after, before)]
    node_cpu = [(a["cpu_s"] - b["cpu_s"]) / wall for a, b in zip(after, before)]
    result: dict[str, Any] = {
        "messages": total,
        "consumed": consumed,
        "wall_s": round(wall, 2),
        "msg_s": round(consumed / wall),
        "client_cpu_us_a_msg": round(sum(cpu.values()) / total * 1e6, 1),
        "client_cpu_s": {k: round(v, 2) for k, v in sorted(cpu.items())},
        "calls_a_msg": round(sum(calls) / total, 2),
        "node_cpu_a_wall_s": [round(c, 3) for c in node_cpu],
    }
    if cluster:
        client, port_of = _slot_ports(url)
        try:
            keys = Keys(ns)
            queues = [0] * len(ports)
            for q in range(args.queues):
                queues[ports.index(port_of(keys.queue(TOPIC, q).log))] += 1
            tagged = {ports.index(port_of(keys.topics))}  # the namespace's own keys
            tagged |= {
                ports.index(port_of(keys.group(g).clients)) for g in [GROUP] + [f"bench-tx{i}" for i in range(args.producers)]
            }
        finally:
            client.close()
        even = sum(calls) / len(calls)
        plain = [i for i in range(len(ports)) if i not in tagged]
        per_queue = sum(calls[i] for i in plain) / max(1, sum(queues[i] for i in plain))
        control = sum(max(0.0, calls[i] - queues[i] * per_queue) for i in tagged) if plain else None
        result |= {
            "queues_a_node": queues,
            "share_vs_even": [round(c / even, 3) for c in calls],
            "worst_share_vs_even": round(max(abs(c / even - 1) for c in calls), 3),
            "queue_share_vs_even": [round(q / (args.queues / len(ports)), 3) for q in queues],
            "namespace_and_group_nodes": sorted(tagged),
            # None where every node holds a namespace or group tag: no node shows a queue's calls alone
            "control_share": None if control is None else round(control / sum(calls), 4),
        }
    return result


@contextmanager
def _target(masters: int) -> Iterator[tuple[str, list[int]]]:
    from tests.servers import RedisClusterProcs, RedisServer

    if masters == 0:
        with RedisServer() as server:
            yield server.url, [server.port]
    else:
        with RedisClusterProcs(masters=masters) as cluster:
            yield cluster.url, cluster.ports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20000, help="messages a target (all producers)")
    parser.add_argument("--masters", type=int, nargs="+", default=[3, 6, 9])
    parser.add_argument("--queues", type=int, default=0, help="queues of the topic (default 8 × the most masters)")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds the consumers get to balance first")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    args.queues = args.queues or 8 * max(args.masters)
    results: dict[str, Any] = {}
    for masters in [0, *args.masters]:
        name = "standalone" if masters == 0 else f"{masters} masters"
        with _target(masters) as (url, ports):
            results[name] = run_load(url, ports, args, cluster=masters > 0)
        print(name, json.dumps(results[name]), flush=True)
    base = results["standalone"]["msg_s"]
    for r in results.values():
        r["msg_s_vs_standalone"] = round(r["msg_s"] / base, 2)
    summary = {
        "args": vars(args),
        "results": results,
        "median_node_cpu": {k: statistics.median(r["node_cpu_a_wall_s"]) for k, r in results.items()},
    }
    print(json.dumps(summary, indent=2))
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "cluster.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
