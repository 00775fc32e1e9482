"""The cost of ``sync_replicas=1`` (``WAIT 1`` in the write's round trip) against ``sync_replicas=0``,
beside raw redis-py, in one run on a Sentinel topology of its own (``python -m bench.ha``).

Interleaved rounds of, on the same master with one replica:

- sync ``Producer.send`` with ``sync_replicas=0`` and with ``sync_replicas=1``;
- ``send_async`` (all in flight at once: one ``WAIT`` per pipeline) with both settings;
- raw ``XADD`` one at a time, and raw ``XADD`` + ``WAIT 1`` in one pipeline.

Messages are 1 KiB. Ratios matter, not absolute rates (shared machines drift). Results go to stdout
and ``bench/results/ha.json``.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.producer import BODY, rate, rounds_main, summary
from mq import Admin, Message, Producer, SendStatus
from tests.servers import SentinelProcs


def run(n: int, rounds: int) -> dict[str, dict[str, float]]:
    """Every case ``rounds`` times; the median rate of each and the ratios."""
    samples: dict[str, list[float]] = {}
    with SentinelProcs() as topology:
        url = topology.url
        Admin(url, "bench").create_topic("bench", read_queues=8, write_queues=8)
        raw = topology.master.client()
        with Producer("b0", url, namespace="bench") as p0, Producer("b1", url, namespace="bench", sync_replicas=1) as p1:

            def sync_send(p: Producer) -> Callable[[], None]:
                def go() -> None:
                    for _ in range(n):
                        assert p.send(Message("bench", BODY)).status is SendStatus.SEND_OK

                return go

            def async_send(p: Producer) -> Callable[[], None]:
                def go() -> None:
                    futures = [p.send_async(Message("bench", BODY)) for _ in range(n)]
                    assert all(f.result().status is SendStatus.SEND_OK for f in futures)

                return go

            def raw_xadd() -> None:
                for _ in range(n):
                    raw.xadd("raw", {"b": BODY})

            def raw_xadd_wait() -> None:
                for _ in range(n):
                    pipe = raw.pipeline(transaction=False)
                    pipe.xadd("raw", {"b": BODY})
                    pipe.execute_command("WAIT", 1, 1000)
                    pipe.execute()

            cases = {
                "sync_send_0": sync_send(p0),
                "sync_send_1": sync_send(p1),
                "async_send_0": async_send(p0),
                "async_send_1": async_send(p1),
                "raw_xadd": raw_xadd,
                "raw_xadd_wait_1": raw_xadd_wait,
            }
            for _ in range(rounds):
                for name, fn in cases.items():
                    samples.setdefault(name, []).append(rate(n, fn))
                    raw.delete("raw")
        raw.close()
    return summary(
        samples,
        [
            ("sync_send_1", "sync_send_0"),
            ("async_send_1", "async_send_0"),
            ("raw_xadd_wait_1", "raw_xadd"),
            ("sync_send_1", "raw_xadd_wait_1"),
        ],
    )


def main() -> None:
    rounds_main(__doc__ or "", run, "ha", 5_000)


if __name__ == "__main__":
    main()
