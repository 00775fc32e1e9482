"""The official RocketMQ 5 Python producer through ``mq proxy`` vs ``mq.Producer`` direct, beside raw
redis-py, in one run (``python -m bench.proxy``).

Starts its own redis-server and ``mq proxy`` on free loopback ports, then times in interleaved rounds:

- ``official_via_proxy``: ``rocketmq-python-client``'s sync ``Producer.send`` through the endpoint
  (its own process and venv, see tests/proxy_clients.py; the rate is measured inside that process
  after a warm-up of 50 sends);
- ``mq_producer_direct``: ``mq.Producer.send`` (sync) on the same store;
- ``raw_xadd``: redis-py ``XADD`` one at a time.

Messages are 1 KiB, the topic has 8 queues. Ratios are what to compare across machines. Results go
to stdout and ``bench/results/proxy.json``.
"""

from __future__ import annotations

import pathlib
import tempfile
from collections.abc import Callable

import redis

from bench.producer import BODY, rate, rounds_main, summary
from mq import Admin, Message, Producer
from tests.proxy_clients import ProxyProcess, rr_client
from tests.servers import RedisServer


def run(n: int, rounds: int) -> dict[str, dict[str, float]]:
    """Run every case ``rounds`` times; the median rate of each and the ratios."""
    samples: dict[str, list[float]] = {}
    with RedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        raw = redis.Redis.from_url(server.url)
        Admin(server.url, "bench").create_topic("bench", read_queues=8, write_queues=8)
        proxy = ProxyProcess(server.url, "bench", pathlib.Path(tmp) / "proxy.log")
        try:
            with Producer("bench", server.url, namespace="bench") as producer:

                def raw_one() -> None:
                    for _ in range(n):
                        raw.xadd("raw:one", {"b": BODY})

                def direct() -> None:
                    for _ in range(n):
                        producer.send(Message("bench", BODY))

                def official() -> float:
                    [result] = rr_client("bench", proxy.endpoint, "bench", str(n), str(len(BODY)), timeout_s=600)
                    return float(result["rate"])

                cases: dict[str, Callable[[], float]] = {
                    "raw_xadd": lambda: rate(n, raw_one),
                    "mq_producer_direct": lambda: rate(n, direct),
                    "official_via_proxy": official,
                }
                for _ in range(rounds):
                    for name, case in cases.items():
                        samples.setdefault(name, []).append(case())
        finally:
            proxy.stop()
            raw.close()
    return summary(
        samples,
        [
            ("official_via_proxy", "mq_producer_direct"),
            ("official_via_proxy", "raw_xadd"),
            ("mq_producer_direct", "raw_xadd"),
        ],
    )


def main() -> None:
    rounds_main(__doc__ or "", run, "proxy", 2_000)


if __name__ == "__main__":
    main()
