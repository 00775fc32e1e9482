"""The ``mq`` Spark data source and analytics jobs on real redis-server processes and a local SparkSession."""

from __future__ import annotations

import json
import logging
import pathlib
import pickle
import re
import subprocess
import sys
import threading
import uuid
from typing import Any

import pytest
from hypothesis import given as for_all
from hypothesis import settings
from hypothesis import strategies as st

pytest.importorskip("pyspark", reason="pip install 'rocketredis[spark]'")

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mq import Admin, Message, MessageQueue, MQClientError, Producer, TopicNotFoundError
from mq.model.msgid import new_msg_id
from mq.store.connection import Connection
from spark import MQDataSource, parse_options
from spark.plan import ReadPartition, cap, plan
from spark.schema import MESSAGES
from tests.helpers import admin_once, raw_client
from tests.leaks import owned
from tests.spark_data import Filled, commit, fill, put_dead_letters

pytestmark = [pytest.mark.spark]

#: Messages in the big topic (acceptance: 30k on 6 queues).
BIG = 30_000


@pytest.fixture(scope="module")
def big(redis_server: Any) -> Filled:
    """30 000 messages on a 6-queue topic of a namespace of its own."""
    return fill(redis_server.url, "t" + uuid.uuid4().hex[:8], "Orders", BIG, 6)


def load(session: SparkSession, options: dict[str, str]) -> DataFrame:
    """``spark.read.format("mq")`` with ``options``."""
    return session.read.format("mq").options(**options).load()


def plan_direct(options: dict[str, str]) -> list[ReadPartition]:
    """Plan through the data source API without Spark (so planning and reading can be split)."""
    source = MQDataSource(options)
    return source.reader(source.schema()).partitions()


def read_direct(options: dict[str, str], parts: list[ReadPartition]) -> list[dict[str, Any]]:
    """Read planned partitions through the data source API without Spark, as row dicts."""
    source = MQDataSource(options)
    reader = source.reader(source.schema())
    return [row for p in parts for batch in reader.read(p) for row in batch.to_pylist()]


def test_plan_balances_skewed_queues_and_caps_batches() -> None:
    ranges = {("T", 0): (0, 9000), ("T", 1): (100, 1100), ("T", 2): (5, 5)}
    parts = [
        p for (p,) in (part.ranges for part in plan(ranges, min_partitions=None, max_partition_messages=10**6, pack_queues=False))
    ]
    assert [(p.queue_id, p.start, p.end) for p in parts if p.queue_id == 1] == [(1, 100, 1100)]
    assert len(parts) == 3 and max(p.size for p in parts) <= 5000  # even share: 10 000 / 2 non-empty queues
    assert sum(p.size for p in parts) == 10_000 and all(p.size > 0 for p in parts)
    assert [p.end for p in parts[:-1]] == [p.start for p in parts[1:-1]] + [9000]  # queue 0: contiguous pieces
    packed = plan(ranges, min_partitions=None, max_partition_messages=10**6, pack_queues=True)
    assert [(r.queue_id, r.start, r.end) for r in packed[0].ranges] == [(0, 0, 9000), (1, 100, 1100)]  # both queues, one task
    small = plan(ranges, min_partitions=None, max_partition_messages=4000, pack_queues=True)
    assert [[(r.queue_id, r.size) for r in p.ranges] for p in small] == [[(0, 3000)], [(0, 3000)], [(0, 3000), (1, 1000)]]
    assert len(plan(ranges, min_partitions=3, max_partition_messages=10**6, pack_queues=True)) >= 3
    assert pickle.loads(pickle.dumps(packed)) == packed  # Spark ships partitions to the tasks pickled
    reader = MQDataSource({"url": "redis://127.0.0.1:1/0", "topic": "T"}).reader(MESSAGES)
    assert pickle.loads(pickle.dumps(reader)).options == reader.options  # options only, no connection
    capped = cap({("T", 0): 0, ("T", 1): 10}, {("T", 0): 1000, ("T", 1): 110}, 220)
    assert capped == {("T", 0): 200, ("T", 1): 30}
    assert cap({("T", 0): 5}, {("T", 0): 6, ("T", 1): 1}, 1) in ({("T", 0): 6, ("T", 1): 0}, {("T", 0): 5, ("T", 1): 1})


def test_big_topic_counts_partitions_sums_and_bodies(spark_session: SparkSession, big: Filled) -> None:
    df = load(spark_session, big.options())
    assert df.count() == BIG

    def queues_per_partition(frame: DataFrame) -> list[int]:
        per_part = frame.groupBy(F.spark_partition_id().alias("p")).agg(F.countDistinct("queue_id").alias("q")).collect()
        return sorted(r.q for r in per_part)

    assert queues_per_partition(df) == [6]  # 30 000 messages, under max_partition_messages: one task reads all 6 queues
    assert queues_per_partition(load(spark_session, big.options(pack_queues="false"))) == [1] * 6  # one queue each
    assert queues_per_partition(load(spark_session, big.options(max_partition_messages="15000"))) == [3, 3]

    counts = {r.queue_id: r["count"] for r in df.groupBy("queue_id").count().collect()}
    assert counts == big.queue_counts()

    total = df.agg(F.sum(F.col("properties")["amount"].cast("long"))).first()[0]
    assert total == sum(amount for _, _, _, amount in big.sent.values())

    rows = df.select("msg_id", "queue_id", "queue_offset", "body").collect()
    got = {r.msg_id: (r.queue_id, r.queue_offset, bytes(r.body)) for r in rows}
    assert got == {mid: (q, o, body) for mid, (q, o, body, _) in big.sent.items()}


def test_topics_table_and_row_fields(spark_session: SparkSession, big: Filled) -> None:
    topics = load(spark_session, big.options(table="topics")).orderBy("queue_id").collect()
    assert {r.queue_id: r.messages for r in topics} == big.queue_counts()
    assert all(r.readable and r.writable and r.last_store_timestamp is not None for r in topics)

    row = load(spark_session, big.options()).where("queue_id = 0 AND queue_offset = 0").first()
    assert row.tags in ("created", "paid", "shipped") and row.keys[0].startswith("user-")
    assert row.reconsume_times == 0 and row.system_properties == {}
    assert row.born_timestamp <= row.store_timestamp


def test_large_queues_are_split_evenly(spark_session: SparkSession, big: Filled) -> None:
    sizes = load(spark_session, big.options(min_partitions="12")).groupBy(F.spark_partition_id()).count().collect()
    assert len(sizes) == 12 and max(r["count"] for r in sizes) <= BIG // 12 + 6
    capped = load(spark_session, big.options(max_partition_messages="1000")).groupBy(F.spark_partition_id()).count().collect()
    assert len(capped) >= 30 and max(r["count"] for r in capped) <= 1000


def test_store_time_options(spark_session: SparkSession, big: Filled) -> None:
    times = sorted(r[0] for r in load(spark_session, big.options()).select(F.unix_millis("store_timestamp")).collect())
    low, high = times[len(times) // 4], times[3 * len(times) // 4]
    expected = sum(1 for t in times if low <= t <= high)
    assert load(spark_session, big.options(min_store_time=str(low), max_store_time=str(high))).count() == expected


def test_snapshot_is_what_planning_saw(redis_server: Any, namespace: str, spark_session: SparkSession) -> None:
    data = fill(redis_server.url, namespace, "Snap", 3000, 3)
    # Direct API: plan, send more, read
    parts = plan_direct(data.options())
    planned = {r.queue_id: r.end for p in parts for r in p.ranges}
    fill(redis_server.url, namespace, "Snap", 600, 3, create=False, start=3000)
    rows = read_direct(data.options(), parts)
    assert len(rows) == 3000 and all(r["queue_offset"] < planned[r["queue_id"]] for r in rows)

    # Through Spark: the first action plans (Spark keeps a loaded source's plan for later actions),
    # then sends land, then the second action reads exactly what the plan covered
    df = load(spark_session, data.options())
    before = data.queue_counts()
    assert df.count() == 3600
    fill(redis_server.url, namespace, "Snap", 900, 3, create=False, start=3600)
    got = {
        r.queue_id: (r.n, r.first, r.last)
        for r in df.groupBy("queue_id")
        .agg(F.count(F.lit(1)).alias("n"), F.min("queue_offset").alias("first"), F.max("queue_offset").alias("last"))
        .collect()
    }
    assert got == {q: (n, 0, n - 1) for q, n in before.items()}
    assert load(spark_session, data.options()).count() == 4500  # a new load() is a new snapshot


def test_sends_during_a_read_are_all_or_nothing_per_offset(
    redis_server: Any, namespace: str, spark_session: SparkSession
) -> None:
    data = fill(redis_server.url, namespace, "Race", 3000, 3)
    stop = threading.Event()

    def send() -> None:
        start = 3000
        while not stop.is_set():
            fill(redis_server.url, namespace, "Race", 100, 3, create=False, start=start)
            start += 100

    sender = threading.Thread(target=send)
    sender.start()
    try:
        before = data.queue_counts()
        per_queue = (
            load(spark_session, data.options(page_size="50"))
            .groupBy("queue_id")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.countDistinct("queue_offset").alias("distinct"),
                F.max("queue_offset").alias("last"),
            )
            .collect()
        )
        after = data.queue_counts()
    finally:
        stop.set()
        sender.join()
    for r in per_queue:  # a dense prefix of each queue, between what was stored before and after
        assert r.n == r.distinct == r.last + 1 and before[r.queue_id] <= r.n <= after[r.queue_id]


def test_messages_trimmed_after_planning_are_skipped(redis_server: Any, namespace: str) -> None:
    data = fill(redis_server.url, namespace, "Trim", 1200, 2)
    parts = plan_direct(data.options())
    client = raw_client(redis_server.url)
    client.xtrim(owned(Connection(redis_server.url, namespace)).keys.queue("Trim", 0).log, minid="0-101", approximate=False)
    client.close()
    rows = read_direct(data.options(), parts)
    assert len(rows) == 1100
    assert min(r["queue_offset"] for r in rows if r["queue_id"] == 0) == 100


def test_reading_pauses_the_cyclic_collector_only_within_a_round_trip(redis_server: Any, namespace: str) -> None:
    import gc

    from spark import reader

    data = fill(redis_server.url, namespace, "Gc", 300, 2)
    parts = plan_direct(data.options())
    assert gc.isenabled()
    seen = []
    batches = reader.RangeReader(parse_options(data.options()), MESSAGES).read(parts[0])
    for _ in batches:
        seen.append(gc.isenabled())  # as the caller had it, between batches
    assert seen and all(seen) and gc.isenabled()
    gc.disable()
    try:
        with reader.no_cyclic_gc():
            pass
        assert not gc.isenabled()  # a caller's own pause is left alone
    finally:
        gc.enable()
    rows = read_direct(data.options(), parts)
    assert len(rows) == 300


def test_imports_are_frozen_once_in_a_pyspark_daemon_worker_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from spark import reader

    freezes: list[int] = []
    monkeypatch.setattr(reader.gc, "freeze", lambda: freezes.append(1))
    monkeypatch.setattr(reader, "_frozen", False)
    MQDataSource({"url": "redis://127.0.0.1:1/0"})  # this process (pytest) is no Spark worker
    reader.freeze_imports_in_spark_worker()
    assert freezes == [] and not reader._frozen
    worker_main = types.ModuleType("__main__")
    worker_main.__spec__ = types.SimpleNamespace(name="pyspark.daemon")  # type: ignore[assignment]
    monkeypatch.setitem(sys.modules, "__main__", worker_main)
    MQDataSource({"url": "redis://127.0.0.1:1/0"})
    reader.freeze_imports_in_spark_worker()
    assert freezes == [1]  # once per process, however many sources, readers and tasks it serves


def test_offsets_table_shows_commit_and_lag(spark_session: SparkSession, big: Filled) -> None:
    commit(big.url, big.namespace, "Billing", big.topic, {0: 100})
    rows = {r.queue_id: r for r in load(spark_session, big.options(table="offsets")).where("group = 'Billing'").collect()}
    counts = big.queue_counts()
    assert rows[0].consumer_offset == 100 and rows[0].broker_offset == counts[0] and rows[0].lag == counts[0] - 100
    assert all(rows[q].consumer_offset == -1 and rows[q].lag == counts[q] for q in range(1, 6))
    with Admin(big.url, big.namespace) as admin:
        progress = admin.consumer_progress("Billing")
    assert {p.message_queue.queue_id: (p.broker_offset, p.consumer_offset, p.lag) for p in progress} == {
        q: (r.broker_offset, r.consumer_offset, r.lag) for q, r in rows.items()
    }


@pytest.mark.cluster
def test_cluster_counts(spark_session: SparkSession, redis_cluster: Any, namespace: str) -> None:
    data = fill(redis_cluster.url, namespace, "Orders", 6000, 6)
    conn = owned(Connection(redis_cluster.url, namespace))
    assert len({conn.node_of(conn.keys.queue("Orders", q).log) for q in range(6)}) > 1  # queues on several masters
    df = load(spark_session, data.options())
    assert df.count() == 6000
    assert {r.queue_id: r["count"] for r in df.groupBy("queue_id").count().collect()} == data.queue_counts()
    assert df.agg(F.sum(F.col("properties")["amount"].cast("long"))).first()[0] == sum(a for *_, a in data.sent.values())
    commit(data.url, namespace, "G", "Orders", {0: 100})
    row = load(spark_session, data.options(table="offsets")).where("queue_id = 0").first()
    assert (row.consumer_offset, row.lag) == (100, data.queue_counts()[0] - 100)


def test_bad_options_are_client_errors(
    spark_session: SparkSession,
    redis_server: Any,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = redis_server.url
    cases = [
        ({"url": url, "topics": "x"}, "unknown option"),
        ({"url": url, "table": "nope"}, "unknown table 'nope'"),
        ({"url": "memory://"}, "in-process store"),
        ({"url": url, "min_store_time": "yesterday"}, "min_store_time"),
        ({"url": url, "starting_offsets": "[1]"}, "starting_offsets"),
        ({"url": url, "page_size": "0"}, "page_size"),
        ({"url": url, "pack_queues": "maybe"}, "pack_queues"),
        ({"url": url, "topic": "bad name"}, "bad name"),
    ]
    for options, message in cases:
        with pytest.raises(MQClientError, match=message):
            parse_options(options)
    monkeypatch.delenv("MQ_URL", raising=False)
    with pytest.raises(MQClientError, match="'url' is missing"):
        parse_options({})
    with pytest.raises(TopicNotFoundError, match="unknown topic 'Nope'"):
        MQDataSource({"url": url, "namespace": namespace, "topic": "Nope"}).schema()
    with pytest.raises(AnalysisException, match=r"TopicNotFoundError: unknown topic 'Nope'"):
        load(spark_session, {"url": url, "namespace": namespace, "topic": "Nope"})
    with pytest.raises(AnalysisException, match=r"MQClientError: unknown table"):
        load(spark_session, {"url": url, "table": "nope"})
    from spark.jobs import lag

    argv = ["--url", url, "--namespace", namespace, "--topic", "Nope", "--out", str(tmp_path)]
    assert lag.main(argv, spark_session) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"lag: TopicNotFoundError: unknown topic 'Nope' in namespace '{namespace}' at {url}; topics there: none"
    )


def test_empty_namespace_reads_nothing_and_jobs_still_chart(
    spark_session: SparkSession, redis_server: Any, namespace: str, tmp_path: pathlib.Path
) -> None:
    from spark.jobs import JOBS, main

    options = {"url": redis_server.url, "namespace": namespace}
    assert load(spark_session, options).count() == 0
    assert load(spark_session, {**options, "topic": "%DLQ%*"}).count() == 0
    assert load(spark_session, {**options, "table": "offsets"}).count() == 0
    assert main(["all", "--url", redis_server.url, "--namespace", namespace, "--out", str(tmp_path)], spark_session) == 0
    for name in JOBS:  # a header and no rows; a chart that says there is nothing (e.g. "no dead letters")
        assert len((tmp_path / f"{name}.csv").read_text().splitlines()) == 1
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG")


def test_streaming_sees_new_messages_once_across_restart(
    spark_session: SparkSession, redis_server: Any, namespace: str, tmp_path: pathlib.Path
) -> None:
    url = redis_server.url
    fill(url, namespace, "Live", 100, 3)  # before the query starts: not read (starting_offsets=latest)
    seen: list[tuple[int, list[str]]] = []
    lock = threading.Lock()

    def sink(batch: DataFrame, batch_id: int) -> None:
        ids = [r.msg_id for r in batch.select("msg_id").collect()]
        with lock:
            seen.append((batch_id, ids))

    def start(**extra: str) -> Any:
        stream = spark_session.readStream.format("mq").options(url=url, namespace=namespace, topic="Live", **extra).load()
        return (
            stream.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    query = start()
    try:
        query.processAllAvailable()
        first = fill(url, namespace, "Live", 500, 3, create=False, start=100)
        query.processAllAvailable()
    finally:
        query.stop()
    while_stopped = fill(url, namespace, "Live", 400, 3, create=False, start=600)
    restarted_at = len(seen)
    query = start(max_messages_per_trigger="150")  # resumes from the checkpoint, not from "latest"
    try:
        query.processAllAvailable()
        last = fill(url, namespace, "Live", 300, 3, create=False, start=1000)
        query.processAllAvailable()
    finally:
        query.stop()

    ids = [i for _, batch in seen for i in batch]
    assert len(ids) == len(set(ids)) == 1200
    assert set(ids) == set(first.sent) | set(while_stopped.sent) | set(last.sent)
    batch_ids = [b for b, _ in seen]
    assert batch_ids == sorted(set(batch_ids))  # one sequence, no batch replayed
    after = [len(batch) for _, batch in seen[restarted_at:] if batch]
    assert len(after) >= 5 and max(after) <= 150  # 700 messages in micro-batches of at most 150


def test_streaming_available_now_reads_what_was_there_then_stops(
    spark_session: SparkSession, redis_server: Any, namespace: str, tmp_path: pathlib.Path
) -> None:
    # pyspark>=4.2 (the pyproject's floor) offers Trigger.AvailableNow to Python sources: no skip
    url = redis_server.url
    there = fill(url, namespace, "Nightly", 300, 3)
    batches: list[list[str]] = []
    later: list[Filled] = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        batches.append([r.msg_id for r in batch.select("msg_id").collect()])
        if not later:  # stored after the query started: left for the next run
            later.append(fill(url, namespace, "Nightly", 50, 3, create=False, start=300))

    def run() -> list[str]:
        done = len(batches)
        options = {"topic": "Nightly", "starting_offsets": "earliest", "max_messages_per_trigger": "100"}
        query = (
            spark_session.readStream.format("mq")
            .options(url=url, namespace=namespace, **options)
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "an availableNow query stops by itself"
        return [i for batch in batches[done:] for i in batch]

    first = run()
    assert len(first) == len(set(first)) == 300 and set(first) == set(there.sent)
    sizes = [len(b) for b in batches if b]
    assert len(sizes) >= 3 and max(sizes) <= 100, sizes  # ReadMaxRows still caps each batch
    second = run()  # resumes from the checkpoint and reads exactly what came later
    assert sorted(second) == sorted(later[0].sent)


def test_jobs_write_tables_and_charts(
    spark_session: SparkSession, redis_server: Any, namespace: str, tmp_path: pathlib.Path
) -> None:
    from mq.cli import demo
    from spark.jobs import JOBS, main
    from spark.summary import summary_lines

    demo.run(redis_server.url, namespace, keep=True)
    assert main(["all", "--url", redis_server.url, "--namespace", namespace, "--out", str(tmp_path)], spark_session) == 0
    for name in JOBS:
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG")
        lines = (tmp_path / f"{name}.csv").read_text().splitlines()
        assert lines[0] and (len(lines) > 1 or name == "dlq"), name  # the demo may have no dead letters
    with Admin(redis_server.url, namespace) as admin:
        stored = {
            (t.name, mq.queue_id): s.max_offset - s.min_offset
            for t in admin.topics()
            for mq, s in admin.topic_status(t.name).items()
        }
    dlq_rows = (tmp_path / "dlq.csv").read_text().splitlines()[1:]
    assert sum(int(line.split(",")[3]) for line in dlq_rows) == sum(n for (t, _), n in stored.items() if t.startswith("%DLQ%"))
    skew = (tmp_path / "skew.csv").read_text().splitlines()
    assert skew[0] == "topic,queue_id,writable,messages,bytes,share,skew,distinct_keys,split_keys"
    user_queues = {q: n for q, n in stored.items() if not q[0].startswith("%")}
    assert {(t, int(q)): int(n) for t, q, _, n, *_ in (line.split(",") for line in skew[1:])} == user_queues
    assert "DemoGroup" in (tmp_path / "lag.csv").read_text()
    lines = summary_lines(spark_session, redis_server.url, namespace)
    assert any(line.startswith("topic DemoOrders: ") for line in lines) and "group DemoGroup: lag 0" in lines
    assert any(re.fullmatch(r"topic DemoTimeouts: 1 message, \d+ bytes on 1 queue, tags none", line) for line in lines), lines


def test_dlq_report_counts_by_group_topic_and_reason(
    spark_session: SparkSession, redis_server: Any, namespace: str, tmp_path: pathlib.Path
) -> None:
    import pyarrow.parquet as pq

    from spark.jobs import dlq

    put_dead_letters(redis_server.url, namespace, "Billing", "Orders", ["max reconsume times"] * 3 + ["max delivery attempts"])
    put_dead_letters(redis_server.url, namespace, "Audit", "Clicks", ["max reconsume times"])
    argv = ["--url", redis_server.url, "--namespace", namespace, "--out", str(tmp_path), "--format", "parquet"]
    assert dlq.main(argv, spark_session) == 0
    table = pq.read_table(tmp_path / "dlq.parquet").to_pylist()
    assert {(r["group"], r["topic"], r["reason"]): r["messages"] for r in table} == {
        ("Audit", "Clicks", "max reconsume times"): 1,
        ("Billing", "Orders", "max delivery attempts"): 1,
        ("Billing", "Orders", "max reconsume times"): 3,
    }
    assert all(r["first_stored"] <= r["last_stored"] for r in table)
    assert (tmp_path / "dlq.png").read_bytes().startswith(b"\x89PNG")


def test_job_runs_as_a_module(redis_server: Any, namespace: str, tmp_path: pathlib.Path) -> None:
    fill(redis_server.url, namespace, "Orders", 300, 4)
    result = subprocess.run(
        [sys.executable, "-m", "spark.jobs.skew", "--url", redis_server.url, "--namespace", namespace, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=pathlib.Path(__file__).parents[2],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "skew: wrote" in result.stdout
    assert (tmp_path / "skew.png").stat().st_size > 1000 and len((tmp_path / "skew.csv").read_text().splitlines()) == 5


def _varied_messages(topic: str) -> list[tuple[Message, int, dict[str, str] | None]]:
    """Messages whose fields take every form: none, empty, unicode, JSON-hostile text, several keys;
    with ``(message, reconsume_times, system_properties)`` as a retry would store them."""
    hostile = {"quote": 'say "hi"\\', "line": "a\nb\tc", "uni": "ü\u2028€", "empty": "", 'k,"}': "]\n,["}
    return [
        (Message(topic, b""), 0, None),
        (Message(topic, b"\x00\xff" * 40, tags="標籤", keys=["k1", "k 2", "ü"], properties=hostile), 0, None),
        (Message(topic, b"x", keys=["only"], properties={}), 3, {"RETRY_TOPIC": "%RETRY%g", "ORIGIN_MESSAGE_ID": "m"}),
        (Message(topic, b"y", tags="t", properties={"amount": "7"}), 0, None),
        *[(Message(topic, b"%d" % i, tags="t", keys=[f"k{i}"], properties={"amount": str(i)}), 0, None) for i in range(12)],
    ]


def test_rows_decoded_in_bulk_equal_message_by_message_decoding(
    redis_server: Any, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mq.store import Store, codec
    from spark import columns
    from spark.schema import arrow_schema

    admin_once(redis_server.url, namespace).create_topic("Mixed", read_queues=1, write_queues=1)
    store = owned(Store(Connection(redis_server.url, namespace)))
    sent = _varied_messages("Mixed")
    for msg, reconsume, system in sent:
        store.put("Mixed", 0, [codec.encode(msg, new_msg_id(), reconsume_times=reconsume, system_properties=system)])
    schema = arrow_schema(MESSAGES)
    entries = store.read_page_entries("Mixed", 0, [(0, 4), (5, len(sent) - 1)])
    as_dicts = [(e[0], dict(zip(e[1][0::2], e[1][1::2], strict=True))) for e in entries]  # a cluster pipeline's form
    stored_ms = sorted(m.store_timestamp_ms for m in codec.decode_entries("Mixed", 0, entries))
    cases = {  # name: (entries, store-time bounds)
        "mixed fields": (entries, (None, None)),
        "same fields (transposed)": (entries[4:], (None, None)),
        "dicts": (as_dicts, (None, None)),
        "store-time bounds": (entries, (stored_ms[2], stored_ms[-3])),
    }
    expected = {}
    for name, (given, (low, high)) in cases.items():
        decoded = codec.decode_entries("Mixed", 0, given)
        kept = [m for m in decoded if (low or 0) <= m.store_timestamp_ms <= (high or 2**62)]
        expected[name] = columns.messages_batch(kept, schema)

    def no_fallback(*_: Any) -> None:
        raise AssertionError("a batch of this library's messages went message by message")

    monkeypatch.setattr(codec, "decode_entries", no_fallback)
    for name, (given, (low, high)) in cases.items():
        got = columns.entries_batch("Mixed", 0, given, schema, min_store_time_ms=low, max_store_time_ms=high)
        assert got.schema == expected[name].schema and got.equals(expected[name]), name
    rows = columns.entries_batch("Mixed", 0, entries, schema).to_pylist()
    assert len(rows) == len(sent) and dict(rows[1]["properties"]) == sent[1][0].properties
    assert rows[1]["keys"] == ["k1", "k 2", "ü"] and rows[0]["keys"] == [] and rows[0]["tags"] is None
    assert rows[2]["reconsume_times"] == 3 and dict(rows[2]["system_properties"])["RETRY_TOPIC"] == "%RETRY%g"


#: Property maps as the codec writes them (any text), and texts no codec writes.
_PROPERTY_TEXTS = st.one_of(
    st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=4).map(
        lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()
    ),
    st.sampled_from([b"", b"{}", b'{"a":"1","a":"2"}', b'{"a":1}', b'{"a":"1"} ', b'{"a":"x\ty"}', b"[]", b'{"a":"\\u00e9"}']),
    st.binary(max_size=12),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@for_all(st.lists(_PROPERTY_TEXTS, max_size=8))
def test_property_maps_parsed_by_arrow_equal_json_loads(texts: list[bytes | None]) -> None:
    from spark import columns

    # the codec's rule, text by text: what json.loads makes an object is taken; values that are not
    # strings are their JSON text, JSON null is null (D101)
    expected: Any = []
    for text in texts:
        try:
            value = json.loads(text) if text else {}
        except (ValueError, UnicodeDecodeError):
            expected = "foreign"
            break
        if not isinstance(value, dict):
            expected = "foreign"
            break
        expected.append([(columns.spark_text(k), columns.spark_text(v)) for k, v in value.items()])
    try:
        maps = columns._json_maps(texts)
        got: Any = "foreign" if maps is None else maps.to_pylist()
    except columns._FOREIGN:
        got = "foreign"
    assert got == expected
    written = [json.dumps({"k": str(i), "ü": "€ x"}, separators=(",", ":"), ensure_ascii=False).encode() for i in range(3)]
    assert columns._compact_maps(pa.array([*written, b"", None], pa.string())) is not None  # the Arrow way is taken


def test_foreign_entries_are_skipped_with_one_logged_error_each(
    redis_server: Any, namespace: str, spark_session: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    url = redis_server.url
    admin_once(url, namespace).create_topic("F", read_queues=1, write_queues=1)
    good = [Message("F", b"%d" % i, tags="t", properties={"n": str(i)}) for i in range(10)]
    with Producer("p", url, namespace=namespace) as producer:
        producer.send_batch(good[:5], queue=MessageQueue("F", "broker-a", 0))
    message = {"i": "x", "b": "y", "bt": "1", "st": "1"}
    foreign = [  # with page_size 1 (4 entries a round trip) the first three share a batch with good[4]
        {**message, "p": '{"a":"1"},{"b":"2"}'},  # two objects: joined naively, the next entry would get one
        {**message, "p": '{"x":"'},  # these two joined naively would parse as one object
        {**message, "p": '"}'},
        {"junk": "1"},
        {**message, "t": b"\xff\xfe"},  # tags that are not UTF-8
        {**message, "st": "12a"},  # a store time that is not a number
        {**message, "p": "{"},  # broken JSON
    ]
    client = raw_client(url)
    keys = owned(Connection(url, namespace)).keys.queue("F", 0)
    seq = int(client.hget(keys.meta, "seq"))
    for j, fields in enumerate(foreign):
        client.xadd(keys.log, fields, id=f"0-{seq + j + 1}")
    client.hset(keys.meta, "seq", seq + len(foreign))
    client.close()
    with Producer("p", url, namespace=namespace) as producer:
        producer.send_batch(good[5:], queue=MessageQueue("F", "broker-a", 0))
    options = {"url": url, "namespace": namespace, "topic": "F"}
    for page_size in ("1000", "1"):
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="mq.store"):
            rows = read_direct({**options, "page_size": page_size}, plan_direct(options))
        assert [r["body"] for r in rows] == [m.body for m in good]
        assert [dict(r["properties"]) for r in rows] == [m.properties for m in good]
        assert [r["queue_offset"] for r in rows] == [*range(5), *range(5 + len(foreign), 10 + len(foreign))]
        skipped = [r for r in caplog.records if "not a message this library wrote" in r.getMessage()]
        assert len(skipped) == len(foreign)
    assert load(spark_session, options).count() == len(good)  # in Spark tasks too: skipped, never a failed task
