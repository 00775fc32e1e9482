"""Property-based tests (hypothesis) against a real redis-server: every input is either refused with an
:class:`~mq.errors.MQClientError` and the store unchanged, or stored and read back identical — by id,
by key and by a consumer. Bounded in examples (and deadline off) so they stay quick in CI."""

from __future__ import annotations

import contextlib
import itertools
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq import Admin, Message, MessageSelector, Producer, PullConsumer, SimpleConsumer
from mq.consumer.puller import filter_args
from mq.errors import MQClientError
from mq.filter.limits import MAX_TEXT_TESTS
from mq.keys import KEY_SEPARATOR
from mq.model.queue import MessageQueue
from mq.model.validation import RESERVED_PROPERTIES
from mq.store import Store
from mq.store.connection import Connection
from mq.store.store import PullRequest
from tests.helpers import snapshot
from tests.leaks import owned
from tests.procs import wait_for
from tests.servers import RedisServer

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)

# Any text, surrogates and control characters included, biased to the edges: blanks, "|", reserved names.
text = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(codec=None), max_size=6),
    st.sampled_from(["", " ", "a || b", "a|b", "x\x1fy", "\ud800", "keys", "Tags", *sorted(RESERVED_PROPERTIES)[:4]]),
    st.text(alphabet="abc", min_size=1, max_size=3),
)
noisy_messages = st.builds(
    lambda body, tags, keys, props, delay, priority: (body, tags, keys, props, delay, priority),
    st.binary(max_size=64),
    st.one_of(st.none(), text),
    st.one_of(st.none(), st.lists(text, max_size=4)),
    st.dictionaries(text, text, max_size=4),
    st.sampled_from([0, 0, 0, -1, True, 1.5]),
    st.sampled_from([0, 0, 0, 9, -1, 10, True, 2.0, "3", None]),
)
# Valid by every rule of mq.model.validation: any non-blank text UTF-8 can encode (no lone surrogates), a tag
# without "|" or whitespace, keys without the key separator, property names not reserved.
valid_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12).filter(lambda t: bool(t.strip()))
valid_messages = st.builds(
    lambda body, tags, keys, props, priority: (body, tags, keys, props, 0, priority),
    st.binary(min_size=1, max_size=64),
    st.one_of(st.none(), valid_text.filter(lambda t: not any(c.isspace() or c == "|" for c in t))),
    st.one_of(st.none(), st.lists(valid_text.filter(lambda t: KEY_SEPARATOR not in t), max_size=4)),
    st.dictionaries(valid_text.filter(lambda t: t.upper() not in RESERVED_PROPERTIES), valid_text, max_size=4),
    st.integers(0, 9),
)
# (fields, whether they are valid): the producer must take every valid one
messages = st.one_of(valid_messages.map(lambda m: (m, True)), noisy_messages.map(lambda m: (m, False)))


@pytest.fixture(scope="module")
def server() -> Any:
    with RedisServer() as s:
        yield s


def _same(stored: Any, sent: Message) -> bool:
    return (stored.body, stored.tags, list(stored.keys), stored.properties, stored.priority) == (
        bytes(sent.body),
        sent.tags,
        list(sent.keys),
        sent.properties,
        sent.priority,
    )


def test_messages_are_refused_unchanged_or_stored_and_read_back_identical(server: RedisServer) -> None:
    ns = "prop-msg"
    url = server.url
    admin = owned(Admin(url, ns))
    admin.create_topic("pt", read_queues=1, write_queues=1)
    counter = itertools.count()
    accepted: list[tuple[str, Message]] = []

    with Producer("p", url, namespace=ns) as producer:

        @SETTINGS
        @given(messages)
        def check(drawn: tuple[tuple[Any, ...], bool]) -> None:
            (body, tags, keys, props, delay, priority), valid = drawn
            topic = f"pt{next(counter)}"  # a topic per example: key queries never see other examples
            admin.create_topic(topic, read_queues=2, write_queues=2, priority_levels=2)  # priorities 1..9: queue 1
            before = snapshot(url, ns)
            try:
                msg = Message(topic, body, tags, keys, props, delay_level=delay, priority=priority)
                result = producer.send(msg)
            except MQClientError as e:
                assert not valid, f"valid message refused: {e}"
                assert snapshot(url, ns) == before
                return
            by_id = admin.query_message(topic, result.msg_id)
            assert by_id is not None and _same(by_id, msg)
            assert result.message_queue.queue_id == min(msg.priority, 1)  # the queue of its level
            for key in set(msg.keys):
                assert result.msg_id in [m.msg_id for m in admin.query_messages_by_key(topic, key)]
            copy = Message("pt", msg.body, msg.tags, msg.keys, msg.properties)
            accepted.append((producer.send(copy).msg_id, copy))

        check()

    assert len(accepted) >= 10, f"only {len(accepted)} valid messages: the strategy tests little"
    consumer = PullConsumer("prop-g", url, namespace=ns)
    consumer.assign([MessageQueue("pt", "broker-a", 0)])
    got: list[Any] = []
    with consumer:
        consumer.seek(MessageQueue("pt", "broker-a", 0), 0)
        wait_for(lambda: bool(got.extend(consumer.poll(0.2))) or len(got) >= len(accepted), 30, "every accepted message")
    assert [m.msg_id for m in got] == [i for i, _ in accepted]
    assert all(_same(m, sent) for m, (_, sent) in zip(got, accepted))
    admin.close()


dedup_ids = st.one_of(
    text,
    st.text(alphabet=st.characters(codec=None), min_size=120, max_size=140),
    st.sampled_from([None, 0, 1.5, b"id", ["id"], "d" * 128, "d" * 129, "a\x1fb"]),
)
windows = st.one_of(st.integers(min_value=-2, max_value=8 * 24 * 3600), st.sampled_from([True, 1.5, "60", None]))


@SETTINGS
@given(dedup_id=dedup_ids, window=windows)
def test_dedup_ids_and_windows_are_refused_unchanged_or_deduplicated(server: RedisServer, dedup_id: Any, window: Any) -> None:
    ns = "prop-dedup"
    url = server.url
    topic = f"dd{abs(hash((repr(dedup_id), repr(window)))) % 10**9}"
    with Admin(url, ns) as admin, Producer("p", url, namespace=ns) as producer:
        before = snapshot(url, ns)
        try:
            admin.create_topic(topic, read_queues=2, write_queues=2, dedup_window_s=window)
        except MQClientError:
            assert not (isinstance(window, int) and not isinstance(window, bool) and 1 <= window <= 7 * 24 * 3600)
            assert snapshot(url, ns) == before
            return
        assert admin.topic_config(topic).dedup_window_s == window
        before = snapshot(url, ns)
        started = time.monotonic()
        try:
            first = producer.send(Message(topic, b"1", dedup_id=dedup_id))
        except MQClientError:
            valid = isinstance(dedup_id, str) and 1 <= len(dedup_id) <= 128 and dedup_id.isprintable()
            assert not valid, f"valid dedup id {dedup_id!r} refused"
            assert snapshot(url, ns) == before
            return
        again = producer.send(Message(topic, b"2", dedup_id=dedup_id))
        if dedup_id is None:
            assert not again.duplicate and again.msg_id != first.msg_id
        elif time.monotonic() - started < window:  # a 1 s window may pass on a loaded machine: not then
            assert again.duplicate and (again.msg_id, again.message_queue, again.queue_offset) == (
                first.msg_id,
                first.message_queue,
                first.queue_offset,
            )
            assert admin.query_message(topic, first.msg_id) is not None


@SETTINGS
@given(name=text)
def test_names_are_refused_unchanged_or_created_and_listed(server: RedisServer, name: str) -> None:
    ns = "prop-names"
    url = server.url
    before = snapshot(url, ns)
    with Admin(url, ns) as admin:
        try:
            admin.create_topic(name, read_queues=1, write_queues=1)
        except MQClientError:
            assert snapshot(url, ns) == before
        else:
            assert admin.topic_config(name).name == name
    before = snapshot(url, ns)
    with contextlib.suppress(MQClientError):
        Producer(name, url, namespace=ns).shutdown()
    assert snapshot(url, ns) == before  # building a producer writes nothing, refused or not


def test_lite_topic_names_are_refused_unchanged_or_created_listed_and_subscribed(server: RedisServer) -> None:
    ns = "prop-lite"
    url = server.url
    admin = owned(Admin(url, ns))
    admin.create_topic("LP", read_queues=1, write_queues=1, lite=True)
    created: list[str] = []
    consumer = SimpleConsumer("prop-lg", url, namespace=ns, subscriptions={"LP": "*"}, await_duration_s=0)
    with Producer("p", url, namespace=ns) as producer, consumer:

        @SETTINGS
        @given(name=text)
        def check(name: str) -> None:
            before = snapshot(url, ns)
            try:
                sent = producer.send(Message("LP", b"x", lite_topic=name))
            except MQClientError:
                assert snapshot(url, ns) == before
                with pytest.raises(MQClientError):
                    consumer.subscribe_lite("LP", name)
                assert snapshot(url, ns) == before
                return
            assert name in admin.list_lite_topics("LP", name, count=10_000).names
            assert sent.queue_offset == created.count(name)
            created.append(name)
            consumer.subscribe_lite("LP", name)

        check()

    assert len(set(created)) >= 10, f"only {len(set(created))} valid lite topic names: the strategy tests little"


# SQL92 pieces: mostly well-formed expressions over a few properties, and some noise.
props = st.sampled_from(["a", "b", "TAGS", "missing"])
literals = st.one_of(
    st.integers(-5, 5).map(str),
    st.sampled_from(["'x'", "'y'", "''", "'it''s'", "1.5", "TRUE"]),
    st.text(alphabet="xy'", max_size=4).map(lambda s: "'" + s + "'"),
)
atoms = st.one_of(
    st.builds(lambda p, op, v: f"{p} {op} {v}", props, st.sampled_from(["=", "<>", ">", "<", ">=", "<="]), literals),
    st.builds(lambda p, vs: f"{p} IN ({', '.join(vs)})", props, st.lists(literals, min_size=1, max_size=4)),
    st.builds(lambda p, n: f"{p} IS {n}NULL", props, st.sampled_from(["", "NOT "])),
    st.builds(lambda p, op, v: f"{p} {op} {v}", props, st.sampled_from(["CONTAINS", "STARTSWITH", "NOT ENDSWITH"]), literals),
    st.builds(lambda p, a, b: f"{p} BETWEEN {a} AND {b}", props, literals, literals),
)


def _combined(leaves: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``leaves`` joined by AND/OR and negated with NOT, up to six leaves."""
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(lambda x, op, y: f"({x}) {op} ({y})", inner, st.sampled_from(["AND", "OR"]), inner),
            inner.map(lambda x: f"NOT ({x})"),
        ),
        max_leaves=6,
    )


# Well-formed and well-typed, BETWEEN's bounds in order, at most two string tests
# (mq.filter.limits.MAX_TEXT_TESTS): the parser must take every one of these.
_STRING_TESTS = (" CONTAINS ", " STARTSWITH ", " ENDSWITH ")
numbers = st.one_of(st.integers(-5, 5).map(str), st.sampled_from(["1.5", "-0.5", "1000"]))
strings = st.one_of(
    st.sampled_from(["'x'", "'y'", "''", "'it''s'"]),
    st.text(alphabet="xy'", max_size=4).map(lambda s: "'" + s.replace("'", "''") + "'"),
)
typed_atoms = st.one_of(
    st.builds(lambda p, op, v: f"{p} {op} {v}", props, st.sampled_from([">", "<", ">=", "<="]), numbers),
    st.builds(
        lambda p, op, v: f"{p} {op} {v}",
        props,
        st.sampled_from(["=", "<>"]),
        st.one_of(numbers, strings, st.sampled_from(["TRUE", "FALSE"])),
    ),
    st.builds(lambda p, vs: f"{p} IN ({', '.join(vs)})", props, st.lists(strings, min_size=1, max_size=4)),
    st.builds(lambda p, n: f"{p} IS {n}NULL", props, st.sampled_from(["", "NOT "])),
    st.builds(lambda p, op, v: f"{p} {op} {v}", props, st.sampled_from(["CONTAINS", "STARTSWITH", "NOT ENDSWITH"]), strings),
    st.builds(
        lambda p, ab: f"{p} BETWEEN {ab[0]} AND {ab[1]}",
        props,
        st.lists(numbers, min_size=2, max_size=2).map(lambda ab: sorted(ab, key=float)),
    ),
)
# (expression, whether it is well-formed): a third well-formed, the rest mostly well-formed but
# possibly ill-typed or badly quoted, and some noise
expressions = st.one_of(
    _combined(typed_atoms).filter(lambda e: sum(e.count(w) for w in _STRING_TESTS) <= MAX_TEXT_TESTS).map(lambda e: (e, True)),
    _combined(atoms).map(lambda e: (e, False)),
    st.text(max_size=20).map(lambda e: (e, False)),
)

MESSAGES = [
    (None, {}),
    ("x", {"a": "1", "b": "x"}),
    ("y", {"a": "-3", "b": "it's"}),
    ("x", {"a": "1.5", "b": "z"}),
    (None, {"a": "TRUE", "b": "yx"}),
    ("z", {"a": "abc"}),
]


def test_filter_expressions_are_refused_or_filter_in_the_store_as_locally(server: RedisServer) -> None:
    ns = "prop-filter"
    url = server.url
    with Admin(url, ns) as admin, Producer("p", url, namespace=ns) as producer:
        admin.create_topic("F", read_queues=1, write_queues=1)
        ids = [producer.send(Message("F", b"m", tags, properties=p)).msg_id for tags, p in MESSAGES]
    store = owned(Store(Connection(url, ns)))
    parsed: list[str] = []

    @SETTINGS
    @given(expressions)
    def check(drawn: tuple[str, bool]) -> None:
        expression, well_formed = drawn
        before = snapshot(url, ns)
        try:
            selector = MessageSelector.by_sql(expression)
        except MQClientError as e:
            assert not well_formed, f"{expression!r} is well-formed and well-typed but was refused: {e}"
            assert snapshot(url, ns) == before
            return
        parsed.append(expression)
        expected = [i for i, (tags, p) in zip(ids, MESSAGES) if selector.matches(p, tags)]
        ftype, fdata = filter_args(selector)
        result = store.pull_many([PullRequest("F", 0, 0, 100, 1000, ftype, fdata)])[0]
        assert not isinstance(result, Exception), result
        assert [m.msg_id for m in result.messages] == expected, expression

    check()
    store.conn.close()
    assert len(parsed) >= 20, f"only {len(parsed)} expressions parsed: the strategy tests little"
