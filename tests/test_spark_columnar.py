"""The Spark reader's columns cut from the reply bytes (``mq.store.columnar``) equal hiredis' parse and
the message-by-message decoder's rows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given as for_all
from hypothesis import settings
from hypothesis import strategies as st

pytest.importorskip("pyspark", reason="pip install 'rocketredis[spark]'")

import pyarrow as pa

from mq import Admin, Message
from mq.connection import Connection
from mq.msgid import new_msg_id
from mq.store import Store, codec, columnar
from spark import columns, parse_options, reader
from spark.plan import QueueRange
from spark.schema import MESSAGES, arrow_schema

pytestmark = [pytest.mark.spark]


def _resp(value: Any) -> bytes:
    """RESP2 form of bytes and (nested) lists, as the server writes replies."""
    if isinstance(value, bytes):
        return b"$%d\r\n%s\r\n" % (len(value), value)
    return b"*%d\r\n" % len(value) + b"".join(map(_resp, value))


def _by_dict(entries: list[Any]) -> tuple[list[bytes], list[dict[bytes, bytes]]]:
    return [e[0] for e in entries], [dict(zip(e[1][0::2], e[1][1::2])) for e in entries]


_BYTES = st.one_of(st.binary(max_size=12), st.sampled_from([b"\r\n$3\r\nabc", b"\n*2\r\n", b"$1\r\n", b"\r\n", b"*-1"]))
_LAYOUT = st.lists(st.sampled_from([b"i", b"b", b"t", b"p", b"", b"\r\n"]), min_size=0, max_size=4)


@settings(max_examples=400, deadline=None)
@for_all(
    layouts=st.lists(_LAYOUT, min_size=1, max_size=2),
    pages=st.lists(
        st.lists(st.tuples(st.integers(0, 1), st.lists(_BYTES, min_size=4, max_size=4)), max_size=5), min_size=1, max_size=3
    ),
    ids=st.lists(_BYTES, min_size=15, max_size=15),
)
def test_reply_columns_equal_hiredis_parse(layouts: list[list[bytes]], pages: list[list[Any]], ids: list[bytes]) -> None:
    """Any replies (one or two field layouts, values that look like RESP headers): cut into columns
    they are hiredis' entries field by field (a repeated name keeps its last value), or None."""
    replies, n = [], 0
    for page in pages:
        entries = []
        for which, values in page:
            names = layouts[which % len(layouts)]
            entries.append([ids[n % len(ids)], [x for pair in zip(names, values) for x in pair]])
            n += 1
        replies.append(entries)
    raw = b"".join(map(_resp, replies)) + _resp(b"0123456789abcdef")
    parsed = columnar.parsed_entries(raw, len(replies))
    assert parsed is not None
    got = columnar.entry_columns(raw, len(replies))
    one_layout = len({tuple(e[1][0::2]) for e in parsed}) <= 1
    values = [e[0] for e in parsed] + [v for e in parsed for v in e[1]]
    if one_layout and not any(b"\n" in v or v[:1] in (b"$", b"*") for v in values):
        assert got is not None  # nothing looks like a header (one starts a line): the columns are cut
    if got is None:
        return
    want_ids, want = _by_dict(parsed)
    assert got.ids.to_pylist() == want_ids and len(got) == len(parsed)
    assert {name: column.to_pylist() for name, column in got.fields.items()} == {
        name: [d[name] for d in want] for name in (want[0] if want else {})
    }


def test_reply_columns_refuse_error_replies_and_cut_bytes() -> None:
    good = _resp([[b"0-1", [b"i", b"x"]]]) + _resp(b"t")
    assert columnar.entry_columns(good, 1) is not None
    assert columnar.entry_columns(good[:-3], 1) is None  # the bytes end mid-reply
    assert columnar.entry_columns(b"-MOVED 1 127.0.0.1:7000\r\n" + _resp(b"t"), 1) is None
    assert columnar.parsed_entries(b"-MOVED 1 127.0.0.1:7000\r\n" + _resp(b"t"), 1) is None
    assert columnar.entry_columns(_resp([]) + _resp(b"t"), 1) == columnar.EntryColumns(pa.array([], pa.binary()), {})


def _messages(topic: str, kind: str, n: int) -> list[tuple[Message, int, dict[str, str] | None]]:
    """``n`` messages of one field layout: ``full`` (every field set: unicode, binary bodies, keys with
    spaces and commas, a retry's system properties) or ``bare`` (no tags, keys or properties)."""
    if kind == "bare":
        return [(Message(topic, bytes([i % 256]) * (i % 5)), 0, None) for i in range(n)]
    hostile = {"quote": 'say "hi"\\', "line": "a\nb\tc", "uni": "ü\u2028€", "empty": "", 'k,"}': "]\n,["}
    out = []
    for i in range(n):
        props = hostile if i % 3 == 0 else {"amount": str(i), "ü": "€" * (i % 4)}
        body = bytes((i * 7 + j) % 256 for j in range(i % 40)) if i % 2 else ("ü標籤 %d" % i).encode()
        out.append(
            (
                Message(topic, body, tags="標籤" if i % 2 else "t", keys=[f"k{i}", "a b,c", "ü"], properties=props),
                i % 4 + 1,
                {"RETRY_TOPIC": "%RETRY%g", "ORIGIN_MESSAGE_ID": f"m{i}"},
            )
        )
    return out


@pytest.mark.parametrize("kind", ["full", "bare", "header-like body", "mixed layouts"])
def test_reader_columns_equal_message_by_message_decoding(
    redis_server: Any, namespace: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranges crossing round trips (7-message pages, 4 a round trip) read by columns are the
    decoder's rows; a body that looks like a reply header, or entries of mixed layouts, read the
    hiredis way, with the same rows."""
    Admin(redis_server.url, namespace).create_topic("Cols", read_queues=1, write_queues=1)
    store = Store(Connection(redis_server.url, namespace))
    sent = _messages("Cols", "bare" if kind == "mixed layouts" else "full", 70)
    if kind == "header-like body":
        sent[40] = (Message("Cols", b"x\r\n$3\r\nabc\r\n*2", tags="t", keys=["k"], properties={"a": "b"}), 1, {"R": "x"})
    if kind == "mixed layouts":
        sent[1::2] = _messages("Cols", "full", 35)
    for msg, reconsume, system in sent:
        store.put("Cols", 0, [codec.encode(msg, new_msg_id(), reconsume_times=reconsume, system_properties=system)])
    schema = arrow_schema(MESSAGES)
    entries = store.read_page_entries("Cols", 0, [(0, len(sent) - 1)])
    expected = columns.messages_batch(codec.decode_entries("Cols", 0, entries)[5:66], schema)
    by_hiredis = []
    if kind in ("full", "bare"):

        def no_entries(*_: Any, **__: Any) -> None:
            raise AssertionError("a round trip of one layout went the hiredis way")

        monkeypatch.setattr(reader, "entries_batch", no_entries)
    else:
        real = reader.entries_batch
        monkeypatch.setattr(reader, "entries_batch", lambda *a, **k: by_hiredis.append(1) or real(*a, **k))
    opts = parse_options({"url": redis_server.url, "namespace": namespace, "topic": "Cols", "page_size": "7"})
    got = pa.Table.from_batches(list(reader.read_ranges(opts, [QueueRange("Cols", 0, 5, 66)], schema)), schema)
    assert got.equals(pa.Table.from_batches([expected]))
    assert got.num_rows == 61 and got.column("queue_offset").to_pylist() == list(range(5, 66))
    if kind == "header-like body":
        assert by_hiredis == [1]  # only the round trip holding it
    if kind == "mixed layouts":
        assert len(by_hiredis) == 3
