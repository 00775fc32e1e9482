"""Timer and retry benchmarks (``make bench``).

- timer lateness: messages due at a steady rate (1k/s for 3 s, then 10k/s for 2 s), all sent
  ahead of time; lateness = store time of the delivered message − its due time, p50/p99/max;
- retry round trip: a listener returns RECONSUME_LATER with delay level 1 (100 ms here); overhead =
  time from the listener's return to the redelivery, minus the 100 ms delay, p50/p99.

There is no raw redis-py equivalent of a delayed delivery; the figures are absolute, compared with
RocketMQ's 1 s (5.x timer wheel) precision. Results go to stdout and ``bench/results/timers.json``.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import threading
import time

from mq import Admin, ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService
from tests.servers import RedisServer


def lateness(url: str, rate: int, seconds: float) -> dict[str, float]:
    """Lateness percentiles (ms) of ``rate`` × ``seconds`` timer messages."""
    ns = f"timer{rate}"
    Admin(url, ns).create_topic("T", read_queues=8, write_queues=8)
    n = int(rate * seconds)
    start = int(time.time() * 1000) + 2000 + n // 2  # time to send them all first (delayed sends: ~5k/s)
    with Producer("p", url, namespace=ns) as producer:
        futures = [producer.send_async(Message("T", b"%d" % i, deliver_time_ms=start + i * 1000 // rate)) for i in range(n)]
        for f in futures:
            f.result(timeout=120)
    with BrokerService(url, ns):
        store = Store(Connection(url, ns))
        deadline = time.time() + 60
        while sum(s.max_offset for s in store.queue_stats("T", range(8)).values()) < n and time.time() < deadline:
            time.sleep(0.2)
    late = sorted(m.store_timestamp_ms - (start + int(m.body) * 1000 // rate) for q in range(8) for m in store.read("T", q, 0, n))
    return {
        "messages": len(late),
        "p50_ms": _pct(late, 50),
        "p99_ms": _pct(late, 99),
        "max_ms": float(late[-1]),
        "early": sum(1 for x in late if x < 0),
    }


def retry_overhead(url: str, count: int = 200) -> dict[str, float]:
    """Overhead (ms) of a retry beyond its 100 ms delay."""
    ns = "retry"
    Admin(url, ns).create_topic("R", read_queues=4, write_queues=4)
    returned: dict[bytes, float] = {}
    overhead: list[float] = []
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        m = msgs[0]
        with lock:
            if m.reconsume_times == 0:
                ctx.delay_level_when_next_consume = 1
                returned[m.body] = time.time()
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            overhead.append((time.time() - returned[m.body]) * 1000 - 100)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("g", url, namespace=ns)
    consumer.subscribe("R", "*")
    consumer.register_message_listener(listener)
    with BrokerService(url, ns, BrokerConfig(message_delay_level="100ms")), consumer, Producer("p", url, namespace=ns) as p:
        time.sleep(1.0)
        for i in range(count):
            p.send(Message("R", b"%d" % i))
            time.sleep(0.005)
        deadline = time.time() + 30
        while len(overhead) < count and time.time() < deadline:
            time.sleep(0.1)
    values = sorted(overhead)
    return {"retries": len(values), "p50_ms": _pct(values, 50), "p99_ms": _pct(values, 99)}


def _pct(values: list, p: int) -> float:  # type: ignore[type-arg]
    return float(statistics.quantiles(values, n=100)[p - 1]) if len(values) > 1 else float("nan")


def main() -> None:
    with RedisServer() as server:
        result = {
            "timer_1k_per_s": lateness(server.url, 1000, 3),
            "timer_10k_per_s": lateness(server.url, 10_000, 2),
            "retry_round_trip": retry_overhead(server.url),
        }
    print(json.dumps(result, indent=2))
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "timers.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
