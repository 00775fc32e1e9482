"""Spark batch reader benchmark beside a raw redis-py reader over the same data (``python -m bench.spark``).

Starts its own redis-server on a free loopback port, fills an 8-queue topic (messages with tags,
a key and a property, 256-byte bodies by default), then measures rows per second of:

- ``raw XRANGE``: one thread, redis-py ``XRANGE … COUNT 1000`` paging through every queue's stream,
  entries counted, nothing decoded (the floor of reading);
- ``source, no Spark``: the data source's own ``partitions()`` and ``read()`` in one thread (decode
  and Arrow conversion, no Spark): what one task costs;
- ``Spark local[1]`` and ``Spark local[2]``: ``spark.read.format("mq")…load()`` then an aggregate
  over every column group (count, body bytes, a property sum), with 1 and 2 executor cores. The
  first ``--warmup`` actions of each session (default 1: the JVM and Python worker start) are not
  timed; more (``--warmup 10``) measures a session whose JIT compiler has mostly done compiling
  Spark itself (D65: ~0.5 s of JIT CPU an action after one warm-up, fading over ~25 actions);
- ``Spark local[N] tiny``: the same action reading one message per queue, seconds: what a Spark
  action costs beside reading (planning and one task: the default plan packs the 8 small queues
  into one partition; the 200 000-message read is 2 tasks of up to ``max_partition_messages``);
- ``two columns``: ``count``, ``sum(length(body))`` and ``max(store_timestamp)`` at ``local[2]``,
  read with the full schema (``spark_local2_body_time_full``) and with the schema
  ``schema_of("body", "store_timestamp")`` (``spark_local2_body_time``: only those columns are
  decoded and handed to Spark); and the source without Spark reading those two columns
  (``source_no_spark_body_time``).

Each case runs ``--rounds`` times; the median is reported. Ratios to raw XRANGE are what carry
across machines. Beside rows/s, each case reports CPU a row in µs (medians): ``…_client_cpu_us``, of
this process and every process it started that is still running or was waited for (so for Spark the
driver, the JVM and its Python workers; Linux ``/proc`` only, else absent) and ``…_server_cpu_us``,
redis-server's (``INFO cpu``) — on a shared machine these move less than the rates.
Results go to stdout, and to ``--json PATH`` when given.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time
from collections.abc import Callable

import redis
from pyspark.sql import functions as F

from mq import Admin, Message, Producer
from mq.store.connection import Connection
from spark import MQDataSource, local_session, schema_of
from tests.servers import RedisServer

TOPIC = "Bench"
QUEUES = 8


def fill(url: str, namespace: str, n: int, body_bytes: int) -> None:
    """Store ``n`` messages on an 8-queue topic (async sends, pipelined)."""
    Admin(url, namespace).create_topic(TOPIC, read_queues=QUEUES, write_queues=QUEUES)
    body = b"b" * body_bytes
    with Producer("bench", url, namespace=namespace) as producer:
        for low in range(0, n, 10_000):
            futures = [
                producer.send_async(Message(TOPIC, body, tags="t", keys=[f"k{i % 1000}"], properties={"amount": str(i % 100)}))
                for i in range(low, min(low + 10_000, n))
            ]
            for f in futures:
                f.result(timeout=60)


def timed(
    n: int, fn: Callable[[], int], rounds: int, cpu: dict[str, float] | None = None, server: redis.Redis | None = None
) -> float:
    """Median rows per second of ``fn`` (which returns the rows it read; must equal ``n``); with
    ``cpu`` and ``server``, also the median client and server CPU µs a row into ``cpu``."""
    rates, client_us, server_us = [], [], []
    for _ in range(rounds):
        client_s, server_s = tree_cpu_s(), server_cpu_s(server)
        started = time.perf_counter()
        rows = fn()
        rates.append(rows / (time.perf_counter() - started))
        if client_s is not None:
            client_us.append((tree_cpu_s() or 0.0) - client_s)
        server_us.append(server_cpu_s(server) - server_s)
        if rows != n:
            raise RuntimeError(f"read {rows} rows, expected {n}")
    if cpu is not None:
        if client_us:
            cpu["client_cpu_us"] = statistics.median(client_us) * 1e6 / n
        cpu["server_cpu_us"] = statistics.median(server_us) * 1e6 / n
    return statistics.median(rates)


def server_cpu_s(server: redis.Redis | None) -> float:
    """redis-server's CPU seconds so far (user + system), 0 without a client."""
    if server is None:
        return 0.0
    info = server.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def tree_cpu_s() -> float | None:
    """CPU seconds of this process and its descendants (running, or exited and waited for), from
    Linux ``/proc``; None elsewhere."""
    try:
        stats = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                text = pathlib.Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
            stats[int(pid)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))  # ppid; utime stime cutime cstime
    except OSError:
        return None
    tree, total = {os.getpid()}, 0
    for _ in range(8):  # descendants to depth 8 (driver → JVM → daemon → worker)
        tree |= {pid for pid, (ppid, _) in stats.items() if ppid in tree}
    total = sum(stats[pid][1] for pid in tree if pid in stats)
    return total / os.sysconf("SC_CLK_TCK")


def raw_xrange(url: str, namespace: str) -> int:
    """Every entry of every queue with plain ``XRANGE COUNT 1000`` in one thread; returns the count."""
    keys = Connection(url, namespace).keys
    client = redis.Redis.from_url(url)
    seen = 0
    for qid in range(QUEUES):
        log, low = keys.queue(TOPIC, qid).log, b"-"
        while entries := client.xrange(log, low, "+", count=1000):
            seen += len(entries)
            low = b"(" + entries[-1][0]
    client.close()
    return seen


#: The columns of the two-column cases: what a user reading bodies by time asks for.
BODY_TIME = ("body", "store_timestamp")


def source_no_spark(options: dict[str, str], columns: tuple[str, ...] = ()) -> int:
    """The data source's partitions read one after the other in this thread (all columns, or
    ``columns``); returns the rows."""
    source = MQDataSource(options)
    reader = source.reader(schema_of(*columns) if columns else source.schema())
    return sum(len(batch) for p in reader.partitions() for batch in reader.read(p))  # rows of each record batch


def spark_rates(
    options: dict[str, str],
    n: int,
    rounds: int,
    cores: int,
    cpu: dict[str, dict[str, float]],
    server: redis.Redis,
    warmup: int = 1,
) -> dict[str, float]:
    """Median rows/s of a full aggregate through Spark with ``cores`` executor cores (its CPU a row
    into ``cpu[f"spark_local{cores}"]``) and the median seconds of the same aggregate over one message
    per queue (the cost of an action beside reading); at ``local[2]`` also the two-column cases."""
    session = local_session(cores, app_name=f"bench-spark-{cores}")
    one_each = json.dumps({TOPIC: {str(q): 1 for q in range(QUEUES)}})

    def action(**extra: str) -> int:
        df = session.read.format("mq").options(**options, **extra).load()  # a new load: a new plan and snapshot
        row = df.agg(F.count(F.lit(1)), F.sum(F.length("body")), F.sum(F.col("properties")["amount"].cast("long"))).first()
        return int(row[0]) if row else 0

    def body_time(columns: tuple[str, ...]) -> int:
        reader = session.read.format("mq").options(**options)
        df = (reader.schema(schema_of(*columns)) if columns else reader).load()
        row = df.agg(F.count(F.lit(1)), F.sum(F.length("body")), F.max("store_timestamp")).first()
        return int(row[0]) if row else 0

    case = f"spark_local{cores}"
    try:
        for _ in range(max(1, warmup)):
            action()  # warm-up: JVM, Python workers, imports (and, with more actions, the JIT)
        out = {f"{case}_rows_s": timed(n, action, rounds, cpu.setdefault(case, {}), server)}
        out[f"{case}_tiny_action_s"] = QUEUES / timed(QUEUES, lambda: action(ending_offsets=one_each), rounds)
        if cores == 2:
            for name, columns in ((f"{case}_body_time_full", ()), (f"{case}_body_time", BODY_TIME)):
                out[f"{name}_rows_s"] = timed(n, lambda c=columns: body_time(c), rounds, cpu.setdefault(name, {}), server)
        return out
    finally:
        session.stop()


def run(n: int, body_bytes: int, rounds: int, warmup: int = 1) -> dict[str, float]:
    """Every case against a fresh redis-server; rows/s by case name, plus ratios to raw XRANGE."""
    with RedisServer() as server:
        namespace = f"bench{time.monotonic_ns()}"
        fill(server.url, namespace, n, body_bytes)
        options = {"url": server.url, "namespace": namespace, "topic": TOPIC}
        stats = redis.Redis.from_url(server.url)
        cpu: dict[str, dict[str, float]] = {"raw_xrange": {}, "source_no_spark": {}, "source_no_spark_body_time": {}}
        result = {
            "raw_xrange_rows_s": timed(n, lambda: raw_xrange(server.url, namespace), rounds, cpu["raw_xrange"], stats),
            "source_no_spark_rows_s": timed(n, lambda: source_no_spark(options), rounds, cpu["source_no_spark"], stats),
            "source_no_spark_body_time_rows_s": timed(
                n, lambda: source_no_spark(options, BODY_TIME), rounds, cpu["source_no_spark_body_time"], stats
            ),
        }
        fixed = {}
        for cores in (1, 2):
            for name, value in spark_rates(options, n, rounds, cores, cpu, stats, warmup).items():
                (fixed if "_tiny_" in name else result)[name] = value
        stats.close()
    raw = result["raw_xrange_rows_s"]
    result.update({k.replace("_rows_s", "_ratio"): v / raw for k, v in list(result.items()) if k != "raw_xrange_rows_s"})
    per_row = {f"{case}_{kind}": round(us, 2) for case, kinds in cpu.items() for kind, us in kinds.items()}
    return {**result, **fixed, **per_row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200_000, help="messages stored and read (default 200 000)")
    parser.add_argument("--body-bytes", type=int, default=256, help="body size, bytes (default 256)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per case; the median is reported")
    parser.add_argument("--warmup", type=int, default=1, help="untimed Spark actions a session first (default 1)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the result to this JSON file")
    args = parser.parse_args()
    result = {
        "n": args.n,
        "body_bytes": args.body_bytes,
        "rounds": args.rounds,
        "warmup": args.warmup,
        **run(args.n, args.body_bytes, args.rounds, args.warmup),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
