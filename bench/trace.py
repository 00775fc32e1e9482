"""The cost of the message trace (``python -m bench.trace``): the same sends and the same drain, with
tracing off and on, in one run against one redis-server it starts.

- send: N sync sends of 1 KiB messages (each traced send writes one trace event: one more round trip);
- drain: a push consumer with a no-op listener drains N preloaded messages (one event per message).

Prints messages per second and the ratio on/off; JSON in ``bench/results/trace.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from bench.consumer import push_drain_rate
from mq import Admin, Message, Producer
from tests.servers import RedisServer

BODY = b"x" * 1024


def send_rate(url: str, ns: str, n: int, trace: bool) -> float:
    """Sync sends per second."""
    with Producer("p", url, namespace=ns, trace=trace) as producer:
        started = time.perf_counter()
        for _ in range(n):
            producer.send(Message("T", BODY))
        return n / (time.perf_counter() - started)


def drain_rate(url: str, ns: str, n: int, trace: bool) -> float:
    """Messages per second a push consumer drains (the topic holds ``n`` messages)."""
    return push_drain_rate(url, ns, "T", n, trace=trace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="messages per case (default: %(default)s)")
    args = parser.parse_args()
    results: dict[str, float] = {}
    with RedisServer() as server:
        for trace in (False, True):
            ns = f"trace{int(trace)}{time.monotonic_ns()}"
            Admin(server.url, ns).create_topic("T", read_queues=8, write_queues=8)
            results[f"send_{'on' if trace else 'off'}_msg_s"] = send_rate(server.url, ns, args.n, trace)
            results[f"drain_{'on' if trace else 'off'}_msg_s"] = drain_rate(server.url, ns, args.n, trace)
    results["send_ratio_on_off"] = results["send_on_msg_s"] / results["send_off_msg_s"]
    results["drain_ratio_on_off"] = results["drain_on_msg_s"] / results["drain_off_msg_s"]
    print(json.dumps(results, indent=2))
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "trace.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
