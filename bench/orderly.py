"""Orderly throughput by number of queues (``make bench``): a listener that takes 1 ms per message
consumes a preloaded backlog; parallelism comes only from queues (one thread per queue at a time),
so throughput should grow with them until the 20 worker threads are busy.

Results go to stdout and ``bench/results/orderly.json``.
"""

from __future__ import annotations

import json
import pathlib
import threading
import time

from mq import Admin, ConsumeFromWhere, ConsumeOrderlyStatus, Message, Producer, PushConsumer
from tests.servers import RedisServer


def drain(url: str, queues: int, n: int) -> float:
    """Messages per second an orderly consumer with a 1 ms listener drains from ``queues`` queues."""
    ns = f"orderly{queues}"
    Admin(url, ns).create_topic("O", read_queues=queues, write_queues=queues)
    with Producer("p", url, namespace=ns) as producer:
        for f in [producer.send_async(Message("O", b"x" * 100)) for _ in range(n)]:
            f.result()
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        time.sleep(0.001)
        with lock:
            count[0] += len(msgs)
            if count[0] >= n:
                done.set()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("g", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("O", "*")
    consumer.register_orderly_listener(listener)
    started = time.perf_counter()
    with consumer:
        done.wait(120)
        rate = count[0] / (time.perf_counter() - started)
    return rate


def main() -> None:
    with RedisServer() as server:
        result = {f"{q}_queues_msg_s": drain(server.url, q, 600 * q if q < 16 else 8000) for q in (1, 4, 16)}
    print(json.dumps(result, indent=2))
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "orderly.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
