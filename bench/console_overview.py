"""The console's overview at many topics (``python -m bench.console_overview``; issue 29, finding 18).

Fills a fresh redis-server with ``--topics`` topics of ``--queues`` queues and 20 groups (a committed
offset each), takes two broker stats snapshots (as a broker service does, by its own functions), then
times ``GET /api/overview``, the page's live part ``GET /overview/live`` and the charts'
``GET /api/overview/series`` through the whole app in process (Starlette's TestClient), ``--runs``
calls each after a first one: the first after a snapshot computes the figures, the later ones until
the next snapshot reuse them. Not a timed test: results go to stdout (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import statistics
import time

from mq import Admin, MessageQueue
from mq.store import Store
from mq.store.connection import Connection
from scheduler.stats import read_figures, save_snapshot
from tests.servers import RedisServer

PATHS = ("/api/overview", "/overview/live", "/api/overview/series")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000, help="topics (default: %(default)s)")
    parser.add_argument("--queues", type=int, default=16, help="queues per topic (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=7, help="timed calls per view (default: %(default)s)")
    args = parser.parse_args(argv)

    from starlette.testclient import TestClient

    from mq.console import create_app

    with RedisServer() as server:
        url, namespace = server.url, "bench"
        with Admin(url, namespace) as admin:
            for t in range(args.topics):
                admin.create_topic(f"Topic{t:05d}", read_queues=args.queues, write_queues=args.queues)
            for g in range(20):
                admin.create_group(f"Group{g}")
                admin.reset_offset(f"Group{g}", MessageQueue(f"Topic{g % args.topics:05d}", "broker-a", 0), 0)
        conn = Connection(url, namespace)
        store = Store(conn)
        for _ in range(2):  # two snapshots: the rates need them
            save_snapshot(store, read_figures(store), "bench-broker")
            time.sleep(0.05)
        app = create_app(url, namespace)
        client = TestClient(app, base_url="http://127.0.0.1:8080")
        try:
            for path in PATHS:
                started = time.perf_counter()
                client.get(path).raise_for_status()
                first_ms = (time.perf_counter() - started) * 1000
                times = []
                for _ in range(args.runs):
                    started = time.perf_counter()
                    client.get(path).raise_for_status()
                    times.append((time.perf_counter() - started) * 1000)
                print(
                    f"{path:<24} first {first_ms:7.1f} ms  then best {min(times):6.1f} ms  "
                    f"median {statistics.median(times):6.1f} ms  ({args.topics} topics x {args.queues} queues)"
                )
        finally:
            app.state.console.close()
            conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
