"""Producer benchmarks beside raw redis-py in the same run (``make bench``).

Starts its own redis-server on a free loopback port, then times, in interleaved rounds:

- sync ``Producer.send`` vs raw ``XADD`` one at a time;
- ``Producer.send_async`` (all in flight at once) vs raw ``XADD`` one at a time and pipelined in
  groups of 128 (the async sender's pipeline size);
- ``Producer.send_batch`` of 32 vs a raw pipeline of 32 ``XADD``;
- when NATS is on the machine (``nats-server`` and ``pip install nats-py``), NATS JetStream's
  ``publish_async`` of the same messages with every acknowledgement awaited, on its own server
  (see ``bench/nats_peer.py``); skipped, with a line saying why, when it is not.

Messages are 1 KiB. The ratio (ours / raw, higher is better) is what to compare across machines;
absolute rates drift on shared machines. Results go to stdout and ``bench/results/producer.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time
from collections.abc import Callable, Sequence

import redis

from bench import nats_peer
from mq import Admin, Message, Producer
from tests.servers import RedisServer

BODY = b"x" * 1024


def rate(n: int, fn: Callable[[], None]) -> float:
    """Messages per second of ``fn``, which handles ``n`` messages."""
    started = time.perf_counter()
    fn()
    return n / (time.perf_counter() - started)


def raw_pipelined_xadd(client: redis.Redis, n: int, size: int) -> None:
    """``n`` raw ``XADD`` of :data:`BODY` in pipelines of ``size`` (the baseline of the async sends)."""
    for _ in range(n // size):
        pipe = client.pipeline(transaction=False)
        for _ in range(size):
            pipe.xadd("raw:pipe", {"b": BODY})
        pipe.execute()


def send_async_all(producer: Producer, n: int) -> None:
    """``n`` ``send_async`` of :data:`BODY`, all in flight at once, then every result awaited."""
    futures = [producer.send_async(Message("bench", BODY)) for _ in range(n)]
    for f in futures:
        f.result()


def run(n: int, rounds: int) -> dict[str, dict[str, float]]:
    """Run every benchmark ``rounds`` times; returns the median rate of each."""
    samples: dict[str, list[float]] = {}
    peer = nats_peer.start()
    with RedisServer() as server:
        raw = redis.Redis.from_url(server.url)
        Admin(server.url, "bench").create_topic("bench", read_queues=8, write_queues=8)
        with Producer("bench", server.url, namespace="bench") as producer:

            def raw_one() -> None:
                for _ in range(n):
                    raw.xadd("raw:one", {"b": BODY})

            def raw_pipe(size: int) -> Callable[[], None]:
                return lambda: raw_pipelined_xadd(raw, n, size)

            def sync() -> None:
                for _ in range(n):
                    producer.send(Message("bench", BODY))

            def async_() -> None:
                send_async_all(producer, n)

            def batch32() -> None:
                for _ in range(n // 32):
                    producer.send_batch([Message("bench", BODY) for _ in range(32)])

            cases = {
                "raw_xadd": raw_one,
                "sync_send": sync,
                "async_send": async_,
                "raw_pipeline_128": raw_pipe(128),
                "batch_send_32": batch32,
                "raw_pipeline_32": raw_pipe(32),
            }
            if peer is not None:
                cases["nats_jetstream_publish_async"] = lambda: peer.publish_async(n, BODY)
            try:
                for _ in range(rounds):
                    for name, fn in cases.items():
                        samples.setdefault(name, []).append(rate(n, fn))
                        raw.flushall()
                        Admin(server.url, "bench").create_topic("bench", read_queues=8, write_queues=8)
                        if peer is not None:
                            peer.purge()
            finally:
                if peer is not None:
                    peer.close()
        raw.close()
    result = summary(
        samples,
        [
            ("sync_send", "raw_xadd"),
            ("async_send", "raw_xadd"),
            ("async_send", "raw_pipeline_128"),
            ("batch_send_32", "raw_pipeline_32"),
        ],
    )
    med, ratios = result["rates_per_s"], result["ratios"]
    if "nats_jetstream_publish_async" in med:
        ratios["nats_publish_async / raw_pipeline_128"] = med["nats_jetstream_publish_async"] / med["raw_pipeline_128"]
        ratios["async_send / nats_publish_async"] = med["async_send"] / med["nats_jetstream_publish_async"]
    return result


def summary(samples: dict[str, list[float]], ratios: Sequence[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """The median rate of each case (msg/s) and the ratios ``"a / b"`` of the medians of each pair."""
    med = {name: statistics.median(v) for name, v in samples.items()}
    return {"rates_per_s": med, "ratios": {f"{a} / {b}": med[a] / med[b] for a, b in ratios}}


def rounds_main(doc: str, run_rounds: Callable[[int, int], dict[str, dict[str, float]]], name: str, default_n: int) -> None:
    """The command line of a rates-and-ratios benchmark: ``-n``, ``--rounds``; prints the rates and ratios
    and writes ``bench/results/<name>.json``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("-n", type=int, default=default_n, help="messages per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = run_rounds(args.n, args.rounds)
    for case, value in result["rates_per_s"].items():
        print(f"{case:28} {value:>10,.0f} msg/s")
    for ratio, value in result["ratios"].items():
        print(f"{ratio:38} {value:5.2f}x")
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps({"n": args.n, "rounds": args.rounds, **result}, indent=2))


def main() -> None:
    rounds_main(__doc__ or "", run, "producer", 20_000)


if __name__ == "__main__":
    main()
