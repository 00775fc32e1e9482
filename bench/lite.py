"""Lite topics at Redis scale [RIP-83, issue 31 item 2]: ``python -m bench.lite [--topics 1000000]``.

Starts its own redis-server, then, on the tree it is run from:

1. fills one lite parent with idle lite topics, one message of ``--body`` bytes each, in steps up to
   ``--topics`` (the fill goes through the ``put-lite`` script a producer's send runs, pipelined
   1 000 calls a round trip so that a million fit a session), and at each step measures for
   ``--idle-s`` seconds the CPU of Redis (``INFO cpu``) and of one idle simple consumer that owns
   ``--subscribed`` of them and waits in ``receive`` (process CPU of this program, nothing else runs):
   both should stay flat in the number of lite topics;
2. at the last step: Redis memory per idle lite topic (``used_memory`` growth over the last fill step
   divided by the topics it added), the latency of a ``Producer.send`` that creates a lite topic and of
   one to an existing lite topic, of a ``receive`` (+ ``ack``) that finds a message, and the wake-up:
   send to a random one of the member's ``--subscribed`` lite topics while its ``receive`` is blocked,
   time until ``receive`` returns it (p50 / p99).

Raw equivalent in the same run: ``HSET`` of a hash field with ``PEXPIRE`` (one pipeline) for the send,
and ``XADD`` + a blocked ``XREAD`` on that one stream for the wake-up.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from typing import Any

import redis

from mq import Admin, Message, Producer, SimpleConsumer
from mq.store import Store, codec
from mq.store.connection import Connection
from mq.store.lite import LITE_KEEP_MESSAGES, put_lite_argv
from tests.servers import RedisServer

NS = "bench-lite"
PARENT = "LP"
GROUP = "lite-bench"
FILL_ROUND = 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pct(values, 0.5) * 1000, 3), "p99_ms": round(pct(values, 0.99) * 1000, 3), "n": len(values)}


def fill(store: Store, start: int, stop: int, body: bytes, expiration_ms: int) -> float:
    """Create lite topics ``t-start`` .. ``t-(stop-1)`` with one message each; seconds taken."""
    fields = codec.encode(Message(PARENT, body), "0" * 32, int(time.time() * 1000))
    keys = store.keys.lite(PARENT)
    began = time.monotonic()
    for first in range(start, stop, FILL_ROUND):
        calls = []
        for i in range(first, min(stop, first + FILL_ROUND)):
            name = f"t-{i}"
            calls.append(
                (
                    "put-lite",
                    [keys.state(name), keys.groups],
                    put_lite_argv(keys, name, fields, expiration_ms, LITE_KEEP_MESSAGES),
                )
            )
        for reply in store.write_scripts(calls):
            if isinstance(reply, Exception):
                raise reply
    return time.monotonic() - began


def redis_cpu_s(client: redis.Redis) -> float:
    info: dict[str, Any] = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


class IdleMember:
    """A simple consumer that owns lite topics and loops in ``receive`` on its own thread."""

    def __init__(self, url: str, names: list[str]) -> None:
        self.url = url
        self.consumer = SimpleConsumer(GROUP, url, namespace=NS, subscriptions={PARENT: "*"}, await_duration_s=30)
        self.consumer.start()
        for name in names:
            self.consumer.subscribe_lite(PARENT, name)
        self.got: list[tuple[float, bytes]] = []
        self.arrived = threading.Event()
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop:
            for view in self.consumer.receive(max_messages=32, invisible_duration_s=60):
                self.got.append((time.perf_counter(), view.body))
                self.consumer.ack(view)
                self.arrived.set()

    def close(self) -> None:
        self.stop = True
        with Producer("lite-bench-stop", self.url, namespace=NS) as p:
            p.send(Message(PARENT, b"stop", lite_topic="t-0"))  # wakes the blocked receive
        self.thread.join(60)
        self.consumer.shutdown()


def idle_cpu(client: redis.Redis, seconds: float) -> dict[str, float]:
    """CPU of Redis and of this process (the idle member) over ``seconds`` of nothing but waiting."""
    r0, p0 = redis_cpu_s(client), time.process_time()
    time.sleep(seconds)
    redis_s, proc_s = redis_cpu_s(client) - r0, time.process_time() - p0
    return {"redis_cpu_pct": round(100 * redis_s / seconds, 2), "consumer_cpu_pct": round(100 * proc_s / seconds, 2)}


def latencies(url: str, member: IdleMember, subscribed: int, samples: int, raw: redis.Redis) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Producer("lite-bench", url, namespace=NS) as producer:
        create, existing = [], []
        for i in range(samples):
            began = time.perf_counter()
            producer.send(Message(PARENT, b"c", lite_topic=f"new-{i}"))
            create.append(time.perf_counter() - began)
            began = time.perf_counter()
            producer.send(Message(PARENT, b"e", lite_topic=f"new-{i}"))
            existing.append(time.perf_counter() - began)
        out["send_create"] = summary_ms(create)
        out["send_existing"] = summary_ms(existing)

        raw_send = []
        for i in range(samples):
            began = time.perf_counter()
            pipe = raw.pipeline(transaction=False)
            pipe.hset(f"raw:{i}", "m:0", b"e")
            pipe.pexpire(f"raw:{i}", 3_600_000)
            pipe.execute()
            raw_send.append(time.perf_counter() - began)
        out["raw_hset_pexpire"] = summary_ms(raw_send)

        wake = []
        for _ in range(samples):
            member.arrived.clear()
            time.sleep(0.005)  # the member is back in its blocked receive
            target = f"t-{random.randrange(subscribed)}"
            body = f"w{time.perf_counter_ns()}".encode()
            began = time.perf_counter()
            producer.send(Message(PARENT, body, lite_topic=target))
            if not member.arrived.wait(30):
                raise RuntimeError("the member was not woken within 30 s")
            arrived = next(t for t, b in reversed(member.got) if b == body)
            wake.append(arrived - began)
        out["wake_up"] = summary_ms(wake)

    raw_wake = []
    waiter = redis.Redis.from_url(url)
    for _ in range(min(samples, 500)):
        raw_wake.append(_raw_wake_once(raw, waiter, "rawwake"))
    waiter.close()
    out["raw_xadd_xread_wake"] = summary_ms(raw_wake)
    return out


def _raw_wake_once(raw: redis.Redis, waiter: redis.Redis, key: str) -> float:
    """Seconds from an ``XADD`` to the return of an ``XREAD BLOCK`` waiting for it on another connection."""
    last = raw.xadd(key, {"b": b"x"})
    woke: list[float] = []

    def block() -> None:
        waiter.xread({key: last}, count=1, block=30_000)
        woke.append(time.perf_counter())

    thread = threading.Thread(target=block)
    thread.start()
    time.sleep(0.005)
    began = time.perf_counter()
    raw.xadd(key, {"b": b"y"})
    thread.join(30)
    return woke[0] - began


def receive_latency(url: str, samples: int) -> dict[str, float]:
    """``receive`` (+ ``ack``) on a member whose lite topic has a message waiting."""
    consumer = SimpleConsumer(GROUP + "-rx", url, namespace=NS, subscriptions={PARENT: "*"}, await_duration_s=5)
    took, ack = [], []
    with consumer, Producer("lite-bench-rx", url, namespace=NS) as producer:
        consumer.subscribe_lite(PARENT, "rx")
        for _ in range(samples):
            producer.send(Message(PARENT, b"r", lite_topic="rx"))
            began = time.perf_counter()
            (view,) = consumer.receive(max_messages=1, invisible_duration_s=60)
            took.append(time.perf_counter() - began)
            began = time.perf_counter()
            consumer.ack(view)
            ack.append(time.perf_counter() - began)
    return {**{f"receive_{k}": v for k, v in summary_ms(took).items()}, **{f"ack_{k}": v for k, v in summary_ms(ack).items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1_000_000, help="idle lite topics at the last step (default: %(default)s)")
    parser.add_argument("--steps", type=int, nargs="*", default=None, help="fill steps (default: 1%%, 10%%, 100%% of --topics)")
    parser.add_argument("--subscribed", type=int, default=100_000, help="lite topics the idle member owns (default: %(default)s)")
    parser.add_argument("--body", type=int, default=100, help="bytes of each idle lite topic's message (default: %(default)s)")
    parser.add_argument("--idle-s", type=float, default=10.0, help="seconds of each idle CPU window (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=1000, help="latency samples of each kind (default: %(default)s)")
    args = parser.parse_args()
    steps = args.steps or sorted({max(args.subscribed, args.topics // 100), max(args.subscribed, args.topics // 10), args.topics})
    body = b"x" * args.body
    result: dict[str, Any] = {"topics": args.topics, "subscribed": args.subscribed, "body_bytes": args.body, "steps": []}
    with RedisServer() as server:
        url = server.url
        raw = redis.Redis.from_url(url)
        Admin(url, NS).create_topic(PARENT, read_queues=1, write_queues=1, lite=True, lite_expiration_s=86_400)
        store = Store(Connection(url, NS))
        result["redis_version"] = raw.info("server")["redis_version"]
        base_memory = int(raw.info("memory")["used_memory"])
        made, member = 0, None
        previous_memory = base_memory
        for step in steps:
            took = fill(store, made, step, body, 86_400_000)
            memory = int(raw.info("memory")["used_memory"])
            row: dict[str, Any] = {
                "lite_topics": step,
                "fill_s": round(took, 1),
                "fill_per_s": round((step - made) / took),
                "used_memory_mb": round(memory / 2**20, 1),
                "bytes_per_topic_this_step": round((memory - previous_memory) / (step - made)),
            }
            made, previous_memory = step, memory
            if member is None:
                began = time.monotonic()
                member = IdleMember(url, [f"t-{i}" for i in range(args.subscribed)])
                result["subscribe_per_s"] = round(args.subscribed / (time.monotonic() - began))
                time.sleep(2)
                previous_memory = int(raw.info("memory")["used_memory"])
                result["bytes_per_subscription"] = round((previous_memory - memory) / args.subscribed)
            drained = min(step, args.subscribed)  # one message in each lite topic the member owns
            deadline = time.monotonic() + 1800
            while len(member.got) < drained and time.monotonic() < deadline:
                time.sleep(0.5)
            row["member_drained"] = len(member.got)
            time.sleep(2)  # nothing left to do: the window below is idle
            row.update(idle_cpu(raw, args.idle_s))
            result["steps"].append(row)
            print(json.dumps(row), flush=True)
        result["bytes_per_idle_topic"] = result["steps"][-1]["bytes_per_topic_this_step"]
        result["bytes_per_idle_topic_first_step"] = result["steps"][0]["bytes_per_topic_this_step"]
        assert member is not None
        result["latency"] = latencies(url, member, args.subscribed, args.samples, raw)
        result["receive"] = receive_latency(url, args.samples)
        member.close()
        store.conn.close()
        raw.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
