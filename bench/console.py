"""The web console with 1 000 topics and 1 000 groups (``python -m bench.console``).

Fills a fresh redis-server: ``--topics`` topics of ``--queues`` queues with one message per queue,
``--groups`` consumer groups (a config each) with a committed offset on every queue of one topic
each. Then times the console's list calls through its ASGI app, twice: without a broker service (the
lag of the groups list and the overview read from every queue now) and with one running (default
config: a stats snapshot every 10 s, whose lag the lists use while it is at most 30 s old) (the Guard, routing, the service
functions and JSON, in process; Starlette's TestClient): the topics list (first page, a middle page,
a search), the groups list (first and a middle page, each with the total lag of its groups), the
overview (total lag over every queue), and, when the HTML pages are installed (``mq.console.pages``),
``GET /topics`` and ``GET /groups``.

Beside each, the raw redis-py floor of the same storage reads in one pipeline: the topics hash and
the page's queues (``HGETALL`` of their meta and offsets) for the topics list; the groups set, the
topics hash and every queue's offsets hash for the groups list and the overview — and the ratio.

Target (issue 17): under 1 s each on the development machine (2 cores). Not a timed test: results
go to stdout and ``bench/results/console.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from mq import Admin, Message, MessageQueue, Producer
from mq.keys import Keys
from scheduler import BrokerService
from tests.servers import RedisServer

GOAL_S = 1.0


def fill(url: str, namespace: str, topics: int, queues: int, groups: int) -> None:
    """The topics (one message per queue) and the groups (one topic's offsets each)."""
    with Admin(url, namespace) as admin, Producer("bench", url, namespace=namespace) as producer:
        for t in range(topics):
            admin.create_topic(f"Topic{t:04d}", read_queues=queues, write_queues=queues)
        for t in range(topics):
            for q in range(queues):
                producer.send(Message(f"Topic{t:04d}", b"x"), queue=MessageQueue(f"Topic{t:04d}", "broker-a", q))
        for g in range(groups):
            name = f"Group{g:04d}"
            admin.create_group(name)
            admin.reset_offset_by_time(name, f"Topic{g % topics:04d}", 0)


def best_of(fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    """``(best, median)`` seconds of ``runs`` calls."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def raw_floor(url: str, namespace: str, *, page_topics: list[str] | None, queues: int) -> Callable[[], Any]:
    """The raw redis-py reads a view needs at least, in one pipeline after the topics hash."""
    import redis

    client = redis.Redis.from_url(url)
    keys = Keys(namespace)

    def run() -> Any:
        names = sorted(n.decode() for n in client.hgetall(keys.topics))
        chosen = page_topics if page_topics is not None else names
        pipe = client.pipeline(transaction=False)
        if page_topics is None:
            pipe.smembers(keys.groups)
        for t in chosen:
            for q in range(queues):
                k = keys.queue(t, q)
                pipe.hgetall(k.meta)
                pipe.hgetall(k.offsets)
        return pipe.execute()

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000, help="topics (default: %(default)s)")
    parser.add_argument("--groups", type=int, default=1000, help="groups (default: %(default)s)")
    parser.add_argument("--queues", type=int, default=16, help="queues per topic (default: %(default)s, DEFAULT_QUEUE_NUMS)")
    parser.add_argument("--runs", type=int, default=5, help="timed calls per view (default: %(default)s)")
    args = parser.parse_args(argv)

    from starlette.testclient import TestClient

    from mq.console import create_app

    results: dict[str, Any] = {"topics": args.topics, "groups": args.groups, "queues": args.queues, "views": {}}
    with RedisServer() as server:
        namespace = "bench"
        started = time.perf_counter()
        fill(server.url, namespace, args.topics, args.queues, args.groups)
        print(
            f"filled {args.topics} topics x {args.queues} queues, {args.groups} groups in {time.perf_counter() - started:.1f} s"
        )
        client = TestClient(create_app(server.url, namespace), base_url="http://127.0.0.1:8080")  # a Host the console accepts
        print("-- no broker service")
        results["views"]["no broker service"] = measure(client, server.url, namespace, args)
        with BrokerService(server.url, namespace), Admin(server.url, namespace) as admin:
            while admin.broker_stats() is None:  # its first stats snapshot
                time.sleep(0.2)
            print("-- broker service")
            results["views"]["broker service"] = measure(client, server.url, namespace, args)
        client.app.state.console.close()
    out = pathlib.Path(__file__).parent / "results" / "console.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def measure(client: Any, url: str, namespace: str, args: argparse.Namespace) -> dict[str, Any]:
    """Time every view; returns their figures by name."""
    found: dict[str, Any] = {}
    middle = max(1, args.topics // 50 // 2)
    page_names = [f"Topic{t:04d}" for t in range(50)]
    floors = {
        "topics": best_of(raw_floor(url, namespace, page_topics=page_names, queues=args.queues), args.runs)[0],
        "groups": best_of(raw_floor(url, namespace, page_topics=None, queues=args.queues), args.runs)[0],
    }
    views = [
        ("topics page 1", "/api/topics", "topics"),
        (f"topics page {middle}", f"/api/topics?page={middle}", "topics"),
        ("topics search", "/api/topics?search=topic05", "topics"),
        ("groups page 1", "/api/groups", "groups"),
        (f"groups page {middle}", f"/api/groups?page={middle}", "groups"),
        ("overview", "/api/overview", "groups"),
    ]
    if importlib.util.find_spec("mq.console.pages") is not None:
        views += [("page /topics", "/topics", "topics"), ("page /groups", "/groups", "groups")]
    for name, path, floor in views:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code, response.text[:200])
        best, median = best_of(lambda path=path: client.get(path).raise_for_status(), args.runs)
        floor_s = floors[floor]
        verdict = "ok" if best < GOAL_S else "OVER"
        print(
            f"{name:<16} {path:<28} best {best * 1000:7.1f} ms  median {median * 1000:7.1f} ms  "
            f"raw floor ({floor}) {floor_s * 1000:6.1f} ms  x{best / floor_s:5.1f}  {verdict} (< {GOAL_S:g} s)"
        )
        found[name] = {
            "path": path,
            "best_ms": round(best * 1000, 1),
            "median_ms": round(median * 1000, 1),
            "raw_floor": floor,
            "raw_floor_ms": round(floor_s * 1000, 1),
            "ratio": round(best / floor_s, 2),
        }
    return found


if __name__ == "__main__":
    raise SystemExit(main())
