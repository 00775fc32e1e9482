"""The ``mq`` Spark source under hostile input: stream entries nobody checked (valid, malformed,
foreign, extreme values) written straight into a queue's stream, offsets that name nothing, and
the smaller refusals (issue 34).

Real redis-server processes and the suite's local[2] SparkSession (``spark_session`` in conftest.py).
Hypothesis examples are few where each costs Spark actions: the same property is checked on many
more examples without Spark, on :func:`spark.columns.entries_batch` (what every task runs).
"""

from __future__ import annotations

import itertools
import json
import logging
import pathlib
import re
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import given as for_all
from hypothesis import strategies as st

pytest.importorskip("pyspark", reason="pip install 'rocketredis[spark]'")

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from mq import MQClientError
from mq.store import Store, codec
from mq.store.connection import Connection
from spark import MQDataSource, columns, parse_options
from spark.schema import MESSAGES, arrow_schema, schema_of
from tests.helpers import admin_once, raw_client
from tests.leaks import owned
from tests.spark_data import fill

pytestmark = [pytest.mark.spark]

#: The stream field each ``messages`` column reads (topic, queue id and offset come from the entry id).
FIELD_OF = {
    "msg_id": b"i",
    "tags": b"t",
    "keys": b"k",
    "properties": b"p",
    "body": b"b",
    "born_timestamp": b"bt",
    "store_timestamp": b"st",
    "reconsume_times": b"r",
    "system_properties": b"s",
}
#: Fields every message has, with a value the codec takes (what an unread one is replaced by).
REQUIRED = {b"i": b"x", b"b": b"", b"bt": b"0", b"st": b"0"}
#: The subsets read through Spark: the cheap pair of D63 and the system properties alone.
SPARK_SUBSETS = (("body", "store_timestamp"), ("queue_offset", "system_properties"))

# -- arbitrary stream entries --------------------------------------------------------------------

_INT_TEXTS = st.one_of(
    st.integers(-(2**80), 2**80).map(lambda n: str(n).encode()),
    st.sampled_from([b"", b"+5", b" 7 ", b"1_0", b"12a", b"\xff", b"1e3", b"-0", b"0x10", b"\xd9\xa3", b"9" * 30, b"2147483648"]),
)
_JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=4)
#: Any JSON value, two levels deep (objects and lists of scalars, and of those).
_JSON_VALUES = st.one_of(
    _JSON_SCALARS,
    st.lists(_JSON_SCALARS, max_size=3),
    st.dictionaries(st.text(max_size=3), _JSON_SCALARS | st.lists(_JSON_SCALARS, max_size=2), max_size=3),
)
_OBJECTS = st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), _JSON_VALUES), max_size=4)
_PROPERTY_TEXTS = st.one_of(
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4).map(
        lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()
    ),
    _OBJECTS.map(lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()),
    _OBJECTS.map(lambda d: json.dumps(d).encode("utf-16")),  # json.loads of bytes takes UTF-16 too
    st.sampled_from(
        [
            b"",
            b"{}",
            b'{"a":1}',
            b'{"a":{"b":[1,2]}}',
            b'{"a":null,"b":true}',
            b'{"a":"1","a":"2"}',
            b'{"\\ud800":"x","y":"\\udfff"}',  # lone surrogates: JSON escapes make them, UTF-8 cannot hold them
            b"\xef\xbb\xbf{}",  # a UTF-8 byte-order mark
            b' {"a":"1"} ',
            b"[]",
            b'"x"',
            b"{",
            b"NaN",
        ]
    ),
    st.binary(max_size=10),
)
_TEXTS = st.one_of(st.text(max_size=6).map(lambda t: t.encode()), st.binary(max_size=6))
_DICTS = st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3).map(
    lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()
)
#: A value of each field as this library writes it.
_VALID = {
    b"i": st.text(min_size=1, max_size=6).map(str.encode),
    b"b": st.binary(max_size=8),
    b"bt": st.integers(0, 2**42).map(lambda n: str(n).encode()),
    b"st": st.integers(0, 2**42).map(lambda n: str(n).encode()),
    b"t": st.text(max_size=4).map(str.encode),
    b"k": st.lists(st.text(max_size=4), max_size=3).map(lambda ks: "\x1f".join(ks).encode()),
    b"p": _DICTS,
    b"r": st.integers(0, 20).map(lambda n: str(n).encode()),
    b"s": _DICTS,
}
#: Anything a field may hold: malformed, foreign or extreme values (and valid ones among them).
_ODD = {
    b"i": _TEXTS,
    b"b": st.binary(max_size=8),
    b"bt": _INT_TEXTS,
    b"st": _INT_TEXTS,
    b"t": _TEXTS,
    b"k": _TEXTS,
    b"p": _PROPERTY_TEXTS,
    b"r": _INT_TEXTS,
    b"s": _PROPERTY_TEXTS,
}


@st.composite
def _message_fields(draw: st.DrawFn) -> list[tuple[bytes, bytes]]:
    """A message's fields in any order: all valid, valid but one (the issue's shape: one odd field),
    or each present or not with any value; now and then with a field no message has."""
    mode = draw(st.sampled_from(["valid", "one odd", "one odd", "anything"]))
    odd = draw(st.sampled_from(sorted(_ODD)))
    fields = []
    for name in _VALID:
        if name in REQUIRED and mode != "anything":
            present = True
        else:
            present = draw(st.booleans()) if name not in REQUIRED else draw(st.integers(0, 15)) > 0
        if present or (mode == "one odd" and name == odd):
            odd_value = mode == "anything" or (mode == "one odd" and name == odd)
            fields.append((name, draw((_ODD if odd_value else _VALID)[name])))
    if draw(st.integers(0, 7)) == 0:
        fields.append((draw(st.binary(min_size=1, max_size=3)), draw(st.binary(max_size=4))))
    if not fields:
        fields.append((b"junk", b"1"))
    return draw(st.permutations(fields))


#: A stream entry's fields: a message (valid or not) or something else altogether.
ENTRIES = st.one_of(
    _message_fields(),
    _message_fields(),
    st.lists(st.tuples(st.binary(min_size=1, max_size=3), st.binary(max_size=6)), min_size=1, max_size=4),
)


#: A message the store's ``queue-stats`` script can read the store time of (see :func:`_write`).
NEWEST = [(b"i", b"newest"), (b"b", b"."), (b"bt", b"1"), (b"st", b"1")]


def _write(url: str, namespace: str, topic: str, entries: Sequence[Sequence[tuple[bytes, bytes]]]) -> list[Any]:
    """Create ``topic`` with one queue, put ``entries`` and then :data:`NEWEST` straight into its
    stream at offsets 0, 1, …, and return them as the store reads them back (the reader's input).

    The queue's newest entry is a message: the ``queue-stats`` script (every read's planning, and
    ``Admin.topic_status``) fails on a newest entry whose ``st`` is not a number — a store bug outside
    the Spark source, reported with issue 34."""
    entries = [*entries, NEWEST]
    admin_once(url, namespace).create_topic(topic, read_queues=1, write_queues=1)
    client = raw_client(url)
    try:
        keys = owned(Connection(url, namespace)).keys.queue(topic, 0)
        for offset, fields in enumerate(entries):
            client.execute_command("XADD", keys.log, f"0-{offset + 1}", *itertools.chain.from_iterable(fields))
        client.hset(keys.meta, "seq", len(entries))
    finally:
        client.close()
    stored = owned(Store(Connection(url, namespace))).read_page_entries(topic, 0, [(0, max(len(entries), 1) - 1)])
    assert len(stored) == len(entries)
    return list(stored)


def _pairs(fields: Sequence[Any]) -> dict[bytes, bytes]:
    return dict(zip(fields[0::2], fields[1::2]))


def _accepted(topic: str, entries: Sequence[Any], names: Sequence[str] = MESSAGES.names) -> list[int]:
    """The offsets of the entries the consumers' codec takes, each decoded alone — with ``names``
    some of the columns, the entry as those columns see it: unread optional fields dropped, unread
    required ones given a value the codec takes (docs/spark.md: a subset keeps an entry whose only
    fault is in a field it does not read)."""
    read = {FIELD_OF[n] for n in names if n in FIELD_OF}
    out = []
    for offset, (entry_id, fields) in enumerate(entries):
        seen = {k: (v if k in read else REQUIRED[k]) for k, v in _pairs(fields).items() if k in read or k in REQUIRED}
        if codec.decode_entries(topic, 0, [(entry_id, seen)]):
            out.append(offset)
    return out


# -- without Spark: many examples ---------------------------------------------------------------

_ALL = arrow_schema(MESSAGES)
_SUBSETS = [(n,) for n in MESSAGES.names] + [("body", "store_timestamp"), ("queue_offset", "properties", "reconsume_times")]


@settings(max_examples=200, deadline=None)
@for_all(st.lists(ENTRIES, min_size=1, max_size=10), st.integers(1, 10))
def test_every_entry_the_codec_takes_is_a_row_of_every_schema(entries: list[list[tuple[bytes, bytes]]], chunk: int) -> None:
    """Arbitrary entries, read in round trips of ``chunk`` entries: every schema's rows are the
    entries the codec takes (a subset: as its columns see them), nothing raises, and the full read's
    values are the codec's messages' (D101: non-string property values as JSON text, numbers Spark's
    columns cannot hold as null)."""
    stored = [(f"0-{i + 1}".encode(), list(itertools.chain.from_iterable(fields))) for i, fields in enumerate(entries)]
    rounds = [stored[i : i + chunk] for i in range(0, len(stored), chunk)]
    full = [columns.entries_batch("H", 0, r, _ALL) for r in rounds]
    offsets = [o for b in full for o in b.column("queue_offset").to_pylist()]
    assert offsets == _accepted("H", stored)
    decoded = [m for r in rounds for m in codec.decode_entries("H", 0, r)]
    assert [row for b in full for row in b.to_pylist()] == columns.messages_batch(decoded, _ALL).to_pylist()
    for names in _SUBSETS:
        schema = arrow_schema(schema_of(*names))
        got = sum(columns.entries_batch("H", 0, r, schema).num_rows for r in rounds)
        assert got == len(_accepted("H", stored, names)), names


def test_values_spark_cannot_hold_are_text_or_null() -> None:
    """The shapes the issue found failing a whole read: each is a row, with D101's values."""
    message = [b"i", b"m", b"b", b"x", b"bt", b"5", b"st", b"6"]
    cases: list[tuple[list[bytes], dict[str, Any]]] = [
        (
            [b"p", b'{"a":1,"b":{"c":[1,true]},"d":null,"e":"s"}'],
            {"properties": [("a", "1"), ("b", '{"c":[1,true]}'), ("d", None), ("e", "s")]},
        ),
        ([b"s", b'{"RETRY_TOPIC":2.5}'], {"system_properties": [("RETRY_TOPIC", "2.5")]}),
        ([b"r", b"2147483648"], {"reconsume_times": None}),
        ([b"r", b" +3"], {"reconsume_times": 3}),
        ([b"bt", b"1" + b"0" * 25], {"born_timestamp": None}),
        ([b"bt", b"4611686018427387904"], {"born_timestamp": None}),  # ×1000 would wrap int64: not a wrong time
        ([b"st", b"-99999999999999999"], {"store_timestamp": None}),
        ([b"p", b'{"\\ud800":"\\udfff"}'], {"properties": [("\ufffd", "\ufffd")]}),
        ([b"p", '{"u":"€"}'.encode("utf-16")], {"properties": [("u", "€")]}),
    ]
    for extra, expected in cases:
        entry = (b"0-1", [*message, *extra])
        for rounds in ([entry], [entry, (b"0-2", message)]):  # alone (fallback) and beside a plain message
            row = columns.entries_batch("H", 0, rounds, _ALL).to_pylist()[0]
            assert {k: row[k] for k in expected} == expected, extra
            for name in expected:
                sub = columns.entries_batch("H", 0, rounds, arrow_schema(schema_of(name))).to_pylist()[0]
                assert sub == {name: expected[name]}, extra


# -- through Spark: fewer examples, every schema, batch and streaming ---------------------------

#: One namespace for the Hypothesis examples (function-scoped fixtures do not reset between them).
_NAMESPACE = "th" + uuid.uuid4().hex[:8]


def _spark_read(session: SparkSession, url: str, topic: str, names: Sequence[str] | None = None) -> DataFrame:
    reader = session.read.format("mq")
    if names is not None:
        reader = reader.schema(schema_of(*names))
    return reader.options(url=url, namespace=_NAMESPACE, topic=topic).load()


@pytest.mark.timeout(900)  # 20 examples of 3 Spark actions each (and the session start) on a shared 2-core machine
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@for_all(st.lists(ENTRIES, min_size=1, max_size=12))
def test_spark_reads_every_entry_the_codec_takes(
    spark_session: SparkSession, redis_server: Any, entries: list[list[tuple[bytes, bytes]]]
) -> None:
    """Every schema (every column, a subset, the system properties) reads exactly the entries the
    codec takes, and no job fails (an exception here would be the failed job)."""
    topic = "H" + uuid.uuid4().hex[:10]
    stored = _write(redis_server.url, _NAMESPACE, topic, entries)
    rows = _spark_read(spark_session, redis_server.url, topic).collect()  # every column converted to rows
    assert sorted(r.queue_offset for r in rows) == _accepted(topic, stored)
    for names in SPARK_SUBSETS:
        assert _spark_read(spark_session, redis_server.url, topic, names).count() == len(_accepted(topic, stored, names))


@pytest.mark.timeout(600)  # a streaming query per example
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@for_all(st.lists(ENTRIES, min_size=1, max_size=12))
def test_streaming_reads_every_entry_the_codec_takes(
    spark_session: SparkSession, redis_server: Any, entries: list[list[tuple[bytes, bytes]]]
) -> None:
    """The streaming reader, every column, from the earliest entry: the sink sees exactly the entries
    the codec takes and the query ends without an error."""
    topic = "H" + uuid.uuid4().hex[:10]
    stored = _write(redis_server.url, _NAMESPACE, topic, entries)
    seen: list[int] = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        seen.extend(r.queue_offset for r in batch.collect())

    checkpoint = tempfile.mkdtemp(prefix="mq-spark-hostile-")
    try:
        query = (
            spark_session.readStream.format("mq")
            .options(url=redis_server.url, namespace=_NAMESPACE, topic=topic, starting_offsets="earliest")
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "an availableNow query stops by itself"
        assert query.exception() is None
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    assert sorted(seen) == _accepted(topic, stored)


def test_a_skipped_entry_is_logged_once(redis_server: Any, namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    """What the codec refuses is still skipped with one logged error, beside entries D101 now keeps."""
    stored = _write(
        redis_server.url,
        namespace,
        "L",
        [
            [(b"i", b"a"), (b"b", b"1"), (b"bt", b"1"), (b"st", b"1"), (b"p", b'{"n":1}')],
            [(b"i", b"b"), (b"b", b"2"), (b"bt", b"1"), (b"st", b"1"), (b"p", b"[1]")],  # not an object: refused
            [(b"i", b"c"), (b"b", b"3"), (b"bt", b"1"), (b"st", b"1"), (b"r", b"99999999999")],
        ],
    )
    with caplog.at_level(logging.ERROR, logger="mq.store"):
        batch = columns.entries_batch("L", 0, stored, _ALL)
    assert batch.column("msg_id").to_pylist() == ["a", "c", "newest"]
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["skipping entry 0-2 of 'L' queue 0"]


# -- offsets that name nothing (D102) ------------------------------------------------------------


def test_offsets_that_are_not_integers_are_refused() -> None:
    base = {"url": "redis://127.0.0.1:1/0"}
    for value, quoted in [
        ('{"Orders": {"0": 1.9}}', "1.9"),
        ('{"Orders": {"0": true}}', "true"),
        ('{"Orders": {"0": "5"}}', '"5"'),
        ('{"Orders": {"0": -1}}', "-1"),
        ('{"Orders": {"x": 5}}', "'x'"),
        ('{"Orders": {"0x1": 5}}', "'0x1'"),
    ]:
        for option in ("starting_offsets", "ending_offsets"):
            with pytest.raises(MQClientError, match=rf"option '{option}' gives 'Orders' queue .*{re.escape(quoted)}"):
                parse_options({**base, option: value})
    with pytest.raises(MQClientError, match="must be 'earliest' or 'latest' or JSON"):
        parse_options({**base, "starting_offsets": '{"Orders": [5]}'})
    assert parse_options({**base, "starting_offsets": '{"Orders": {"3": 7}}'}).starting_offsets == {"Orders": {3: 7}}


def test_offsets_naming_a_topic_or_queue_not_read_are_refused(
    spark_session: SparkSession, redis_server: Any, namespace: str, tmp_path: pathlib.Path
) -> None:
    url = redis_server.url
    fill(url, namespace, "Orders", 40, 4)
    fill(url, namespace, "Audit", 4, 1)
    read = {"url": url, "namespace": namespace, "topic": "Orders"}
    cases = [
        ("starting_offsets", '{"Ordrs": {"0": 5}}', r"topic\(s\) 'Ordrs'. Topics read: 'Orders'"),
        ("ending_offsets", '{"Ordrs": {"0": 5}}', r"topic\(s\) 'Ordrs'"),
        ("starting_offsets", '{"Orders": {"0": 1, "9": 5}}', r"'Orders' queue 9 \(it has queues 0-3\)"),
        ("ending_offsets", '{"Audit": {"0": 1}}', r"topic\(s\) 'Audit'"),  # exists, but this read leaves it out
    ]
    for option, value, message in cases:
        source = MQDataSource({**read, option: value})
        with pytest.raises(MQClientError, match=rf"option '{option}' names what this read does not cover: {message}"):
            source.reader(MESSAGES).partitions()
        if option == "starting_offsets":
            with pytest.raises(MQClientError, match=message):
                source.streamReader(MESSAGES).initialOffset()
    with pytest.raises(Exception, match=r"MQClientError: option 'starting_offsets' names .*'Ordrs'"):
        spark_session.read.format("mq").options(**read, starting_offsets='{"Ordrs": {"0": 5}}').load().count()
    query = (
        spark_session.readStream.format("mq")
        .options(**read, starting_offsets='{"Orders": {"7": 0}}')
        .load()
        .writeStream.foreachBatch(lambda batch, batch_id: None)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    with pytest.raises(StreamingQueryException, match=r"MQClientError: .*'Orders' queue 7"):
        query.awaitTermination(120)
    query.stop()
    ok = MQDataSource({**read, "starting_offsets": '{"Orders": {"1": 2}}', "ending_offsets": '{"Orders": {"1": 5}}'})
    assert sum(p.size for p in ok.reader(MESSAGES).partitions()) == 3 + 3 * 10  # queue 1: [2, 5); the others whole


# -- the smaller items ----------------------------------------------------------------------------


def test_urls_spark_would_misread_are_refused() -> None:
    for url, message in [
        ("redis://127.0.0.1:6379/abc", r"names database '/abc': use a number"),
        ("redis://:secret@127.0.0.1:6379/0x1", r"names database '/0x1'"),
        ("redis://[::1/0", r"bad host or port in 'redis://\[::1/0'"),
        ("redis+sentinel://127.0.0.1:26379/mymaster/db", r"bad db 'db'"),
    ]:
        with pytest.raises(MQClientError, match=message) as refused:
            parse_options({"url": url})
        assert "secret" not in str(refused.value)
    for url in ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379/", "rediss://127.0.0.1:6379/12", "redis+sentinel://h:1/m/2"):
        assert parse_options({"url": url}).url == url


def test_streaming_only_and_absurd_options_are_refused(redis_server: Any, namespace: str) -> None:
    read = {"url": redis_server.url, "namespace": namespace, "max_messages_per_trigger": "10"}
    for table in ("messages", "offsets", "topics"):
        with pytest.raises(MQClientError, match="'max_messages_per_trigger' caps a streaming read"):
            MQDataSource({**read, "table": table}).reader(MQDataSource({**read, "table": table}).schema())
    assert MQDataSource(read).streamReader(MESSAGES).getDefaultReadLimit().max_rows == 10
    with pytest.raises(MQClientError, match=r"'min_partitions' must be at most 10000, got '10{30}'"):
        parse_options({"url": redis_server.url, "min_partitions": str(10**30)})
    assert parse_options({"url": redis_server.url, "min_partitions": "10000"}).min_partitions == 10_000


def test_lag_chart_shows_the_top_groups_and_says_how_many_it_left_out(tmp_path: pathlib.Path) -> None:
    from pyspark.sql import Row

    from spark.jobs import lag

    rows = [
        Row(group=f"g{i:04d}", topic=t, queue_id=0, broker_offset=0, consumer_offset=0, lag=i)
        for i in range(5000)
        for t in ("A", "B")
    ]
    shown, left_out = lag.top_groups(rows)
    assert left_out == 5000 - lag.TOP_GROUPS
    assert {r.group for r in shown} == {f"g{i:04d}" for i in range(5000 - lag.TOP_GROUPS, 5000)}  # the most lag
    fig = lag.figure(rows)
    (ax,) = fig.axes
    assert len(ax.get_yticklabels()) == lag.TOP_GROUPS
    assert f"{5000 - lag.TOP_GROUPS} more groups not shown" in fig.texts[0].get_text()
    assert lag.draw(rows, tmp_path / "lag.png").read_bytes().startswith(b"\x89PNG")
    few = rows[:6]
    assert lag.top_groups(few) == (few, 0) and "not shown" not in lag.figure(few).texts[0].get_text()
