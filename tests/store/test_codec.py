"""The consumer's decoder (``codec.decode_entries``): decoded column by column, it must give exactly
what decoding entry by entry (``codec.decode``) gives, and skip foreign entries the same way."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pytest

from mq.model.message import Message, MessageExt
from mq.model.msgid import new_msg_id
from mq.store import codec

HOSTILE = {"quote": 'say "hi"\\', "line": "a\nb\tc", "uni": "ü\u2028€", "empty": "", 'k,"}': "]\n,["}


def _wire(value: Any) -> bytes:
    """A field value as Redis returns it."""
    return value if isinstance(value, bytes) else str(value).encode()


def _entry(offset: int, msg: Message, *, reconsume: int = 0, system: dict[str, str] | None = None) -> tuple[bytes, list[bytes]]:
    """The stream entry (id, flat fields) the put script stores for ``msg`` at ``offset``."""
    fields = codec.encode(msg, new_msg_id(), 1_700_000_000_000 + offset, reconsume_times=reconsume, system_properties=system)
    flat = [_wire(v) for v in fields[1:]] + [b"st", b"%d" % (1_700_000_000_500 + offset)]
    return b"0-%d" % (offset + 1), flat


def _varied() -> list[tuple[bytes, list[bytes]]]:
    messages = [
        _entry(0, Message("T", b"")),
        _entry(1, Message("T", b"\x00\xff" * 40, tags="標籤", keys=["k1", "k 2", "ü"], properties=HOSTILE)),
        _entry(2, Message("T", b"x", keys=["only"]), reconsume=3, system={"RETRY_TOPIC": "%RETRY%g", "ORIGIN_MESSAGE_ID": "m"}),
        _entry(3, Message("T", b"y", tags="t", properties={"amount": "7"})),
    ]
    return messages + [
        _entry(4 + i, Message("T", b"%d" % i, tags="t", keys=[f"k{i}"], properties={"n": str(i)})) for i in range(12)
    ]


def _one_by_one(entries: list[tuple[bytes, Any]]) -> list[MessageExt]:
    out = []
    for entry_id, fields in entries:
        with contextlib.suppress(KeyError, ValueError, TypeError, UnicodeDecodeError):
            out.append(
                codec.decode("T", 5, entry_id, fields if isinstance(fields, dict) else dict(zip(fields[0::2], fields[1::2])))
            )
    return out


def _as_dicts(entries: list[tuple[bytes, list[bytes]]]) -> list[tuple[bytes, Any]]:
    return [(entry_id, dict(zip(flat[0::2], flat[1::2], strict=True))) for entry_id, flat in entries]


@pytest.mark.parametrize("form", ["mixed fields", "same fields", "dicts", "fewest by columns"])
def test_column_decoding_equals_entry_by_entry_decoding(form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    varied = _varied()
    entries: list[tuple[bytes, Any]] = {
        "mixed fields": varied,
        "same fields": varied[4:],
        "dicts": _as_dicts(varied),
        "fewest by columns": varied[1 : 1 + codec.COLUMNS_FROM],
    }[form]
    expected = _one_by_one(entries)

    def no_fallback(*_: Any) -> None:
        raise AssertionError("this library's messages went entry by entry")

    monkeypatch.setattr(codec, "decode", no_fallback)
    got = codec.decode_entries("T", 5, iter(entries))
    assert got == expected and len(got) == len(entries)
    assert [vars(m) for m in got] == [vars(m) for m in expected]  # no attribute more or less
    if form == "same fields":
        assert [m.properties for m in got] == [{"n": str(i)} for i in range(12)] and got[0].queue_offset == 4
    else:
        hostile = got[0] if form == "fewest by columns" else got[1]
        assert hostile.properties == HOSTILE and hostile.keys == ("k1", "k 2", "ü") and hostile.tags == "標籤"
        assert hostile.queue_offset == 1 and hostile.queue_id == 5


@pytest.mark.parametrize("count", range(1, codec.COLUMNS_FROM))
def test_a_small_reply_is_decoded_entry_by_entry_with_the_same_result(count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-poll wake's one or two messages skip the column set-up (faster alone, D55)."""
    entries = _varied()[1 : 1 + count]
    expected = _one_by_one(entries)

    def no_columns(*_: Any) -> None:
        raise AssertionError("a small reply was decoded by columns")

    monkeypatch.setattr(codec, "_decode_columns", no_columns)
    got = codec.decode_entries("T", 5, entries)
    assert got == expected and len(got) == count
    assert [vars(m) for m in got] == [vars(m) for m in expected]
    assert got[0].properties == HOSTILE and got[0].keys == ("k1", "k 2", "ü") and got[0].queue_offset == 1


def test_retry_and_system_fields_are_decoded() -> None:
    got = codec.decode_entries("T", 0, _varied()[:3])
    assert got[2].reconsume_times == 3 and got[2].system_properties["RETRY_TOPIC"] == "%RETRY%g"
    assert got[0].properties == {} and got[0].system_properties == {} and got[0].keys == () and got[0].tags is None
    assert got[0].born_timestamp_ms == 1_700_000_000_000 and got[0].store_timestamp_ms == 1_700_000_000_500


def test_foreign_entries_among_messages_are_skipped_with_one_logged_error_each(caplog: pytest.LogCaptureFixture) -> None:
    good = _varied()[4:10]
    message = [b"i", b"x", b"b", b"y", b"bt", b"1", b"st", b"1"]
    foreign: list[list[bytes]] = [
        [*message, b"p", b'{"a":"1"},{"b":"2"}'],  # two objects: joined naively, the next entry would get one
        [*message, b"p", b'{"x":"'],  # these two joined naively would parse as one object
        [*message, b"p", b'"}'],
        [*message, b"p", b"[1]"],  # JSON, but not an object
        [b"junk", b"1"],
        [*message, b"t", b"\xff\xfe"],  # tags that are not UTF-8
        [*message[:-1], b"12a"],  # a store time that is not a number
        [*message, b"r", b""],  # an empty reconsume count
    ]
    entries = good[:3] + [(b"0-%d" % (100 + j), flat) for j, flat in enumerate(foreign)] + good[3:]
    with caplog.at_level(logging.ERROR, logger="mq.store"):
        got = codec.decode_entries("T", 5, entries)
    assert [m.body for m in got] == [m.body for m in _one_by_one(good)]
    assert [m.properties for m in got] == [{"n": str(i)} for i in range(6)]
    skipped = [r for r in caplog.records if "not a message this library wrote" in r.getMessage()]
    assert len(skipped) == len(foreign)


def test_json_objects_parses_every_text_in_one_call_and_refuses_what_is_not_one_object() -> None:
    assert codec.json_objects([b'{"a":"1"}', None, b"", b'{"b":"]\\n,["}']) == [{"a": "1"}, None, None, {"b": "]\n,["}]
    assert codec.json_objects([None, None]) == [None, None]
    for bad in ([b'{"a":"1"},{"b":"2"}', b'{"c":"3"}'], [b'{"x":"', b'"}'], [b"[1]"], [b"1"], [b"{"]):
        with pytest.raises(ValueError):
            codec.json_objects(bad)
    with pytest.raises(UnicodeDecodeError):
        codec.json_objects([b'{"a":"\xff"}'])
