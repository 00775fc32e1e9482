"""What the position check of a pull costs (D70): ``python -m bench.positions``.

Drains N preloaded 1 KiB messages from a 16-queue topic with the store's pipelined pulls
(``Store.pull_many``, 32 messages a queue a call, the push consumer's pull), once with each pull
carrying the fingerprint of the entry before its offset (the store reads that entry and compares:
what every consumer pull does now) and once without (the check skipped: the pull before D70), in
alternating rounds on one ``redis-server``. Reports messages per second of each and the server's
``EVALSHA`` microseconds per call (``INFO commandstats``), for the unfiltered pull that reads its
entries after the script (``read_after``, small messages) and the one that reads them in the script.

Results go to stdout and ``bench/results/positions.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time
from typing import Any

from mq import Admin, Message, Producer
from mq.store import Store
from mq.store.connection import Connection
from mq.store.groups import PullRequest, PullResult
from tests.servers import RedisServer

QUEUES = 16
BODY = b"x" * 1024


def drain(store: Store, n: int, *, check: bool, read_after: bool) -> tuple[float, float]:
    """Pull every message of topic ``B`` (``n`` in all); returns (messages/s, server µs per EVALSHA)."""
    store.conn.client.config_resetstat()
    positions: dict[int, tuple[int, str]] = dict.fromkeys(range(QUEUES), (0, ""))
    got, started = 0, time.perf_counter()
    while got < n:
        requests = [
            PullRequest("B", q, o, 32, 1024, group="g", commit=o, read_after=read_after, last_entry=last if check else "")
            for q, (o, last) in positions.items()
        ]
        for q, result in zip(positions, store.pull_many(requests)):
            assert isinstance(result, PullResult) and not result.rewound, result
            got += len(result.messages)
            positions[q] = (result.next_offset, result.last_entry)
    rate = n / (time.perf_counter() - started)
    stats = store.conn.client.info("commandstats")["cmdstat_evalsha"]
    return rate, float(stats["usec_per_call"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=48_000, help="messages to drain a round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    out: dict[str, Any] = {"n": args.n, "rounds": args.rounds}
    with RedisServer() as server:
        with Admin(server.url, "bench") as admin:
            admin.create_topic("B", read_queues=QUEUES, write_queues=QUEUES)
        with Producer("p", server.url, namespace="bench") as producer:
            for _ in range(args.n // 64):
                producer.send_batch([Message("B", BODY) for _ in range(64)])
        store = Store(Connection(server.url, "bench"))
        for read_after in (True, False):
            runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
            for _ in range(args.rounds):
                for check in (False, True):
                    runs[check].append(drain(store, args.n // 64 * 64, check=check, read_after=read_after))
            name = "read_after" if read_after else "scripted"
            out[name] = {
                ("checked" if check else "unchecked"): {
                    "msg_s_median": statistics.median(r for r, _ in rs),
                    "evalsha_us_median": statistics.median(u for _, u in rs),
                }
                for check, rs in runs.items()
            }
            c, u = out[name]["checked"], out[name]["unchecked"]
            out[name]["rate_ratio"] = c["msg_s_median"] / u["msg_s_median"]
            out[name]["evalsha_us_ratio"] = c["evalsha_us_median"] / u["evalsha_us_median"]
        store.conn.close()
    print(json.dumps(out, indent=2))
    folder = pathlib.Path(__file__).parent / "results"
    folder.mkdir(exist_ok=True)
    (folder / "positions.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
