"""Sends that never store twice (D140): what dedup ids and the retry fence cost, in one run.

Starts its own redis-server on a free loopback port, then times, in interleaved rounds (1 KiB
messages, an 8-queue topic):

- sync ``Producer.send`` and ``send_async`` (all in flight at once) without and with a unique
  ``dedup_id`` a message: the send ratio with / without ids;
- the retry fence's cost on the happy path, where the first attempt answers: the shipped
  ``put-messages`` script (which looks up the call's first msg id in the id index and in the queue's
  fences before it writes) against the same script with those two lookups cut out, raw ``EVALSHA`` of
  one message, one at a time — the ratio is what every send pays for the guarantee;
- the same three scripts as Redis itself times them (``INFO commandstats`` µs a call, reset before
  each case): the server's cost without the round trip and the client, steadier on a loaded machine;
- memory per remembered id: ``MEMORY USAGE`` of a queue's dedup hash and expiry zset after
  ``--ids`` sends with distinct ids, divided by the ids.

Prints the rates and ratios and writes ``bench/results/dedup.json``. Rerun: ``python -m bench.dedup``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import statistics
import time
import uuid
from collections.abc import Callable

import redis

from bench.producer import send_async_all
from mq import Admin, Message, Producer
from mq.store import codec, scripts
from mq.store.connection import Connection
from mq.store.store import Store
from tests.servers import RedisServer

BODY = b"x" * 1024
NS = "bench"
#: The lookups of put-messages the fence adds on every put (cut out for the baseline script).
LOOKUPS = (
    "  local known = redis.call('HGET', KEYS[3], first_id)\n"
    "  if known then return {tonumber(known), dedup_store_ms(KEYS[2], tonumber(known))} end\n"
    "  if redis.call('HEXISTS', KEYS[5], '\\31' .. first_id) == 1 then return -4 end\n"
)


def rate(n: int, fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return n / (time.perf_counter() - started)


def run(n: int, rounds: int, ids: int) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {}
    with RedisServer() as server:
        raw = redis.Redis.from_url(server.url)
        admin = Admin(server.url, NS)
        admin.create_topic("bench", read_queues=8, write_queues=8)
        put = scripts.SCRIPTS["put-messages"]
        assert LOOKUPS in put.source, "the put script changed: update LOOKUPS"
        baseline = put.source.replace(LOOKUPS, "")
        baseline_sha = raw.script_load(baseline)
        assert baseline_sha == hashlib.sha1(baseline.encode()).hexdigest()
        shipped_sha = raw.script_load(put.source)
        store = Store(Connection(server.url, NS))
        keys = store.queue_keys("bench", 0).put()

        server_us: dict[str, list[float]] = {}

        def evalsha(sha: str, dedup: bool = False, name: str = "") -> Callable[[], None]:
            def go() -> None:
                raw.config_resetstat()
                for _ in range(n):
                    msg = Message("bench", BODY, dedup_id=uuid.uuid4().hex if dedup else None)
                    raw.evalsha(sha, len(keys), *keys, 1, *codec.encode(msg, uuid.uuid4().hex, 1))
                # Redis's own time a call (INFO commandstats): what the script costs the server, without
                # the round trip and the client, which a loaded machine makes noisy
                server_us.setdefault(name, []).append(float(raw.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]))

            return go

        with Producer("bench", server.url, namespace=NS) as producer:

            def sync(dedup: bool) -> Callable[[], None]:
                def go() -> None:
                    for _ in range(n):
                        producer.send(Message("bench", BODY, dedup_id=uuid.uuid4().hex if dedup else None))

                return go

            def async_(dedup: bool) -> Callable[[], None]:
                def go() -> None:
                    if not dedup:
                        send_async_all(producer, n)
                        return
                    futures = [producer.send_async(Message("bench", BODY, dedup_id=uuid.uuid4().hex)) for _ in range(n)]
                    for f in futures:
                        f.result()

                return go

            cases = {
                "sync_send": sync(False),
                "sync_send_dedup_id": sync(True),
                "async_send": async_(False),
                "async_send_dedup_id": async_(True),
                "put_script_without_lookups": evalsha(baseline_sha, name="put_without_lookups"),
                "put_script_shipped": evalsha(shipped_sha, name="put_shipped"),
                "put_script_dedup_id": evalsha(shipped_sha, True, name="put_dedup_id"),
            }
            for _ in range(rounds):
                for name, fn in cases.items():
                    samples.setdefault(name, []).append(rate(n, fn))
                    raw.flushall()
                    raw.script_load(baseline)
                    admin.create_topic("bench", read_queues=8, write_queues=8)

            # memory per remembered id: one queue's window after `ids` distinct ids
            admin.create_topic("mem", read_queues=1, write_queues=1, dedup_window_s=3600)
            futures = [producer.send_async(Message("mem", b"m", dedup_id=f"order-{i:08d}")) for i in range(ids)]
            for f in futures:
                f.result()
        window = store.queue_keys("mem", 0)
        used = sum(int(raw.memory_usage(k, samples=0) or 0) for k in (window.dedup, window.dedup_expiry))
        fence_keys = store.queue_keys("bench", 1)
        for i in range(ids):
            store.fence("bench", 1, f"{i:032x}", 600_000)
        fenced = sum(int(raw.memory_usage(k, samples=0) or 0) for k in (fence_keys.dedup, fence_keys.dedup_expiry))
        store.conn.close()
        admin.close()
        raw.close()
    med = {name: statistics.median(v) for name, v in samples.items()}
    us = {name: statistics.median(v) for name, v in server_us.items()}
    return {
        "rates_per_s": med,
        "server_us_per_put": us,
        "ratios": {
            "sync_send_dedup_id / sync_send": med["sync_send_dedup_id"] / med["sync_send"],
            "async_send_dedup_id / async_send": med["async_send_dedup_id"] / med["async_send"],
            "server: put_shipped / put_without_lookups": us["put_shipped"] / us["put_without_lookups"],
            "server: put_dedup_id / put_shipped": us["put_dedup_id"] / us["put_shipped"],
        },
        "memory_bytes": {"per_dedup_id": used / ids, "per_fence": fenced / ids, "ids": ids},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=3000, help="messages per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ids", type=int, default=10_000, help="distinct ids for the memory figure")
    args = parser.parse_args()
    result = run(args.n, args.rounds, args.ids)
    for case, value in result["rates_per_s"].items():
        print(f"{case:30} {value:>10,.0f} msg/s")
    for case, value in result["server_us_per_put"].items():
        print(f"server {case:23} {value:>10.2f} µs a put (INFO commandstats)")
    for ratio, value in result["ratios"].items():
        print(f"{ratio:50} {value:5.3f}x")
    for what, value in result["memory_bytes"].items():
        print(f"memory {what:20} {value:,.1f}")
    out = pathlib.Path(__file__).parent / "results" / "dedup.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
