"""The order priority messages come out in (D142): a backlog of mixed priorities, drained.

Starts its own redis-server. For each consumer, a backlog of ``-n`` messages of random priorities
0..9 (the same for every consumer) in a topic with 10 priority levels over 10 queues, drained whole;
the same backlog in a plain topic (10 queues, no levels: a priority there is refused, so every
message carries its priority in a user property ``p`` too, which the figures read) as the baseline.
For each drain:

- ``top1000``: the share of the first 1 000 handed out that are among the 1 000 highest priorities
  of the backlog (1.0: exactly the highest; the baseline is about 0.1);
- ``inversions``: of the pairs of messages with different priorities, the share handed out lower
  first (0.0: never; about 0.5 in arrival order);
- ``p9_at``: where the priority-9 messages came out, mean position over the drain (0.05 is the best
  possible with 10 % of them, 0.5 is arrival order);
- ``drain_s``: wall time to drain; ``drain_ratio``: the priority topic's over the plain one's, same
  run (the cost of reading levels first).

The simple consumer receives 32 at a time; the pull consumer polls 32 at a time once it holds the
backlog (as much of it as its flow control lets it: 1 000 a queue); the push consumer (a no-op
listener) pulls a priority topic's levels in turn (D142).

    python -m bench.priority [-n 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PullConsumer, PushConsumer, SimpleConsumer
from mq.model.message import MessageExt
from tests.servers import RedisServer

BATCH = 32
FIRST = 1000


def order_figures(got: list[int], priorities: list[int]) -> dict[str, float]:
    """``top1000``, ``inversions`` and ``p9_at`` of the hand-out order ``got`` (priorities)."""
    first, best = Counter(got[:FIRST]), Counter(sorted(priorities, reverse=True)[:FIRST])
    overlap = sum(min(first[p], best[p]) for p in best)
    seen = [0] * 10  # how many of each priority came out so far
    inverted = pairs = 0
    for p in got:
        inverted += sum(seen[:p])  # lower ones out before this higher one
        pairs += sum(seen) - seen[p]
        seen[p] += 1
    nines = [i for i, p in enumerate(got) if p == 9]
    return {
        "top1000": overlap / FIRST,
        "inversions": inverted / pairs if pairs else 0.0,
        "p9_at": statistics.fmean(nines) / len(got) if nines else 0.0,
    }


def fill(url: str, ns: str, topic: str, priorities: list[int], levels: bool) -> None:
    with Producer("bench", url, namespace=ns) as producer:
        futures = [
            producer.send_async(Message(topic, b"x" * 100, properties={"p": str(p)}, priority=p if levels else 0))
            for p in priorities
        ]
        for f in futures:
            f.result(60)


def prio(msg: MessageExt) -> int:
    """The message's priority as sent (its user property: plain topics take no priority)."""
    return int(msg.properties["p"])


def drain_simple(url: str, ns: str, topic: str, n: int) -> list[int]:
    sc = SimpleConsumer("simple", url, namespace=ns, subscriptions={topic: "*"}, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    got: list[int] = []
    with sc:
        while len(got) < n:
            got += [prio(v) for v in sc.receive(max_messages=BATCH, invisible_duration_s=300)]
    return got


def drain_pull(url: str, ns: str, topic: str, n: int) -> list[int]:
    consumer = PullConsumer("pull", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=BATCH)
    consumer.subscribe(topic)
    got: list[int] = []
    with consumer:
        deadline = time.monotonic() + 60
        held = min(n, 10 * 1000)
        while len(consumer._buffer) < held * 0.95 and time.monotonic() < deadline:  # holds (most of) the backlog
            time.sleep(0.01)
        while len(got) < n:
            got += [prio(m) for m in consumer.poll(timeout_s=5)]
    return got


def drain_push(url: str, ns: str, topic: str, n: int) -> list[int]:
    got: list[int] = []

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        got.extend([prio(m) for m in msgs])
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("push", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    with consumer:
        while len(got) < n:
            time.sleep(0.01)
    return got


DRAINS: dict[str, Callable[[str, str, str, int], list[int]]] = {"simple": drain_simple, "pull": drain_pull, "push": drain_push}


def run(url: str, n: int, seed: int) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    priorities = [rng.randrange(10) for _ in range(n)]
    out: dict[str, dict[str, float]] = {}
    for name, drain in DRAINS.items():
        times = {}
        for kind in ("plain", "priority"):
            ns = f"bench-priority-{name}-{kind}-{seed}"
            with Admin(url, ns) as admin:
                levels = {"priority_levels": 10} if kind == "priority" else {}
                admin.create_topic("P", read_queues=10, write_queues=10, **levels)  # type: ignore[arg-type]
            fill(url, ns, "P", priorities, kind == "priority")
            started = time.monotonic()
            got = drain(url, ns, "P", n)
            times[kind] = time.monotonic() - started
            out[f"{name} {kind}"] = {**order_figures(got, priorities), "drain_s": times[kind]}
        out[f"{name} priority"]["drain_ratio"] = times["priority"] / times["plain"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=10_000, help="messages in the backlog (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="backlogs (seeds) to run (default: %(default)s)")
    args = parser.parse_args()
    with RedisServer() as server:
        for seed in range(args.rounds):
            for row, figures in run(server.url, args.n, seed).items():
                print(json.dumps({"seed": seed, "drain": row, **{k: round(v, 4) for k, v in figures.items()}}))


if __name__ == "__main__":
    main()
