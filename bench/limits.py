"""The longest single script call at the limits (``python -m bench.limits``).

Each scenario fills a fresh namespace of one redis-server with the worst input the limits allow and
runs one operation; Redis's SLOWLOG (``slowlog-log-slower-than 0``) gives the server-side time of
every command, and the longest ``EVALSHA`` is reported — Redis serves nobody else while a script
runs, so this is how long one client can stall every other. Beside it, the server time of the raw
redis-py commands doing the same storage work (one pipeline, no script), and the ratio.

Scenarios (limits from mq/model/validation.py, mq/filter/limits.py, mq/producer/request.py):

- ``batch``: one ``send_batch`` of 100 000 tiny messages (split into bounded put calls);
- ``batch-keys``: a batch of 512 messages with 64 keys each (every key indexed);
- ``filter``: a consumer's filtered pull (its scan bounds: ``PULL_MAX_SCAN`` entries,
  ``PULL_MAX_BYTES_FILTERED``) over 1 024 messages whose 16 KiB property defeats ``CONTAINS``
  patterns: as many tests as allowed, the pattern characters shared among them, each pattern found
  nowhere;
- ``filter-4MiB``: the same with the unfiltered pull's 4 MiB scan bound (why filtered pulls use less);
- ``pull``: a consumer's pull over 1 024 messages of 64 KiB (no filter);
- ``timer``: one ``deliver-due`` moving ``timer_batch`` (1 000) due messages with 64 keys and 16 KiB
  of properties each;
- ``check-halves``: one check-back round over 500 due half messages.

Goal (issue 13): no script call over 50 ms on the development machine (2 cores). Results go to
stdout and ``bench/results/limits.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
from collections.abc import Callable
from typing import Any

from mq import Admin, Message, Producer
from mq.consumer.puller import PULL_MAX_BYTES, PULL_MAX_BYTES_FILTERED, PULL_MAX_SCAN, filter_args
from mq.filter import MessageSelector
from mq.filter.limits import MAX_LITERAL_LENGTH, MAX_PATTERN_CHARS, MAX_TEXT_TESTS
from mq.model.validation import MAX_KEYS, MAX_USER_PROPERTY_SIZE
from mq.store import Store, codec
from mq.store.connection import Connection
from mq.store.store import PullRequest
from tests.servers import RedisServer

GOAL_MS = 50.0
BIG_PROP = "a" * (MAX_USER_PROPERTY_SIZE - 64)


def _slowlog(client: Any) -> list[tuple[str, float]]:
    """``(command, ms)`` of every command since the last reset, then reset."""
    entries = client.slowlog_get(1_000_000)
    client.slowlog_reset()
    return [(e["command"].split(b" ")[0].decode().upper(), e["duration"] / 1000) for e in entries]


def _worst(entries: list[tuple[str, float]], command: str = "EVALSHA") -> tuple[float, int]:
    times = [ms for name, ms in entries if name == command]
    return (max(times) if times else 0.0), len(times)


def _total(entries: list[tuple[str, float]]) -> float:
    return sum(ms for name, ms in entries if name not in ("SLOWLOG", "EVALSHA", "SCRIPT"))


def scenario(
    server: RedisServer, name: str, setup: Callable[[str], Any], run: Callable[[str, Any], Any], raw: Callable[[Any, Any], Any]
) -> dict[str, Any]:
    """Set up, reset SLOWLOG, run the library operation and then its raw equivalent."""
    client = server.client()
    ns = f"lim-{name}"
    state = setup(ns)
    client.slowlog_reset()
    started = time.perf_counter()
    run(ns, state)
    wall_ms = (time.perf_counter() - started) * 1000
    worst, calls = _worst(_slowlog(client))
    raw(client, state)
    raw_ms = _total(_slowlog(client))
    client.close()
    return {
        "scenario": name,
        "worst_script_ms": round(worst, 2),
        "script_calls": calls,
        "wall_ms": round(wall_ms, 1),
        "raw_redis_py_ms": round(raw_ms, 2),
        "ratio": round(worst / raw_ms, 2) if raw_ms else None,
        "within_goal": worst <= GOAL_MS,
    }


def _topic(url: str, ns: str) -> Store:
    Admin(url, ns).create_topic("L", read_queues=1, write_queues=1)
    return Store(Connection(url, ns))


def _raw_xadd(client: Any, entries: list[list[Any]], key: str = "raw:log") -> None:
    pipe = client.pipeline(transaction=False)
    for fields in entries:
        pipe.execute_command("XADD", key, "*", *fields[1:])
    pipe.execute()
    client.delete(key)


def _raw_put(client: Any, msgs: list[Message]) -> None:
    """What a put stores, as raw commands in one pipeline: the entry, its id and its keys."""
    pipe = client.pipeline(transaction=False)
    for i, m in enumerate(msgs):
        pipe.execute_command("XADD", "raw:log", "*", *codec.encode(m, "id%d" % i, 1)[1:])
        pipe.hset("raw:ids", "id%d" % i, i)
        if m.keys:
            pipe.zadd("raw:keys", {f"{k}\x1f{i:020d}": 0 for k in m.keys})
    pipe.execute()
    client.delete("raw:log", "raw:ids", "raw:keys")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="bench/results/limits.json")
    args = parser.parse_args()
    results = []
    slow = ["--slowlog-log-slower-than", "0", "--slowlog-max-len", "1000000"]
    with RedisServer(extra_args=slow) as server:
        url = server.url

        # batch: 100 000 tiny messages in one send_batch
        tiny = [Message("L", b"%d" % i) for i in range(100_000)]

        def send_batch(ns: str, _: Any) -> None:
            with Producer("p", url, namespace=ns) as p:
                p.send_batch(tiny)

        results.append(scenario(server, "batch", lambda ns: _topic(url, ns), send_batch, lambda c, _: _raw_put(c, tiny)))

        keyed = [Message("L", b"x", keys=[f"k{i}-{j}" for j in range(MAX_KEYS)]) for i in range(512)]

        def send_keyed(ns: str, _: Any) -> None:
            with Producer("p", url, namespace=ns) as p:
                p.send_batch(keyed)

        results.append(scenario(server, "batch-keys", lambda ns: _topic(url, ns), send_keyed, lambda c, _: _raw_put(c, keyed)))

        # filter: 1 024 messages with a 16 KiB property that CONTAINS patterns (never found) must scan
        def fill_filter(ns: str) -> Store:
            store = _topic(url, ns)
            with Producer("p", url, namespace=ns) as p:
                for _ in range(8):
                    p.send_batch([Message("L", b"x", properties={"big": BIG_PROP}) for _ in range(128)])
            return store

        # as many CONTAINS tests as allowed, each with an equal share of the pattern characters, none found
        width = min(MAX_LITERAL_LENGTH, MAX_PATTERN_CHARS // MAX_TEXT_TESTS)
        expression = " OR ".join(f"big CONTAINS '{'a' * (width - 1)}{i % 10}'" for i in range(MAX_TEXT_TESTS))
        ftype, fdata = filter_args(MessageSelector.by_sql(expression))

        scanned = {"filter": 0, "pull": 0}

        def pull_filtered(max_bytes: int) -> Callable[[str, Store], None]:
            def pull(ns: str, store: Store) -> None:
                result = store.pull_many([PullRequest("L", 0, 0, 32, PULL_MAX_SCAN, ftype, fdata, max_bytes)])[0]
                assert not isinstance(result, Exception) and result.messages == [], result
                scanned["filter"] = result.next_offset

            return pull

        # the raw equivalent reads the same entries the pull scanned
        for label, max_bytes in (("filter", PULL_MAX_BYTES_FILTERED), ("filter-4MiB", PULL_MAX_BYTES)):
            results.append(
                scenario(
                    server,
                    label,
                    fill_filter,
                    pull_filtered(max_bytes),
                    lambda c, store: c.xrange(store.queue_keys("L", 0).log, count=scanned["filter"]),
                )
            )

        # pull: 1 024 messages of 64 KiB, no filter
        def fill_pull(ns: str) -> Store:
            store = _topic(url, ns)
            with Producer("p", url, namespace=ns) as p:
                for _ in range(16):
                    p.send_batch([Message("L", b"x" * 65536) for _ in range(64)])
            return store

        def pull_plain(ns: str, store: Store) -> None:
            result = store.pull_many([PullRequest("L", 0, 0, 1024, PULL_MAX_SCAN, max_bytes=PULL_MAX_BYTES)])[0]
            assert not isinstance(result, Exception), result
            scanned["pull"] = result.next_offset

        results.append(
            scenario(
                server,
                "pull",
                fill_pull,
                pull_plain,
                lambda c, store: c.xrange(store.queue_keys("L", 0).log, count=scanned["pull"]),
            )
        )

        # timer: one deliver-due moving 1 000 due messages with 64 keys and 16 KiB properties each
        def fill_timer(ns: str) -> Store:
            store = _topic(url, ns)
            for i in range(1000):
                msg = Message("L", b"x", keys=[f"k{i}-{j}" for j in range(MAX_KEYS)], properties={"big": BIG_PROP[:8000]})
                store.put_delayed("L", 0, codec.encode(msg, f"id{i}", 1), 1)
            return store

        results.append(
            scenario(
                server,
                "timer",
                fill_timer,
                lambda ns, store: store.deliver_due([("L", 0)], int(time.time() * 1000), 1000),
                lambda c, store: _raw_xadd(c, [[0, *f] for _, f in _fields(c, store)]),
            )
        )

        # check-halves: 500 due half messages in one round
        def fill_halves(ns: str) -> Store:
            store = _topic(url, ns)
            for i in range(500):
                store.put_half("L", 0, codec.encode(Message("L", b"x", properties={"big": BIG_PROP[:8000]}), f"h{i}", 1), 1)
            return store

        results.append(
            scenario(
                server,
                "check-halves",
                fill_halves,
                lambda ns, store: store.check_halves([("L", 0)], int(time.time() * 1000), 60_000, 15, 3_600_000 * 72, 500),
                lambda c, store: c.xrange(store.queue_keys("L", 0).half, count=500),
            )
        )

    print(f"{'scenario':<14}{'worst script ms':>16}{'calls':>8}{'wall ms':>10}{'raw redis-py ms':>17}{'ratio':>8}  goal")
    for r in results:
        print(
            f"{r['scenario']:<14}{r['worst_script_ms']:>16.2f}{r['script_calls']:>8}{r['wall_ms']:>10.1f}"
            f"{r['raw_redis_py_ms']:>17.2f}{(r['ratio'] or 0):>8.2f}  {'ok' if r['within_goal'] else 'OVER'}"
        )
    out = pathlib.Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


def _fields(client: Any, store: Store) -> list[tuple[bytes, list[Any]]]:
    """The delivered messages' fields (the raw equivalent re-adds them)."""
    entries = client.xrange(store.queue_keys("L", 0).log, count=1000)
    return [(eid, [x for kv in fields.items() for x in kv]) for eid, fields in entries]


if __name__ == "__main__":
    main()
