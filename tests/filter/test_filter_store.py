"""The store's Lua filter gives exactly what ``MessageSelector.matches`` gives, message by message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mq import Message, MessageSelector, Producer
from mq.consumer.puller import filter_args
from mq.errors import MQBrokerError
from mq.store import Store
from mq.store.connection import Connection
from mq.store.store import PullRequest
from tests.helpers import admin_once
from tests.leaks import owned
from tests.sql92_rocketmq_cases import CASES

PROPS: list[tuple[str | None, dict[str, str]]] = [
    (None, {}),
    ("a", {"region": "HZ", "n": "5"}),
    ("b", {"region": "SH", "n": "10", "price": "5.5"}),
    ("a", {"region": "BJ", "n": "-3", "price": ".5", "flag": "true"}),
    ("c", {"n": "abc", "price": "5E10", "flag": "FALSE", "q": "it's"}),
    ("a", {"n": "9223372036854775807", "big": "9223372036854775806"}),
    ("b", {"n": "007", "price": "1e-3", "name": "HelloWorld"}),
    ("", {"n": " 5", "name": "x"}),
    ("a", {"region": "SH", "n": "5.0", "name": "World"}),
]

EXPRESSIONS = [
    "TRUE",
    "FALSE",
    "TAGS = 'a'",
    "TAGS <> 'a'",
    "TAGS IS NULL",
    "TAGS IS NOT NULL",
    "region = 'HZ'",
    "region <> 'HZ'",
    "region IN ('HZ', 'SH')",
    "region NOT IN ('HZ', 'SH')",
    "TAGS = 'a' AND region IN ('HZ','SH')",
    "n > 4",
    "n >= 5",
    "n < 5",
    "n <= -3",
    "n = 5",
    "n <> 5",
    "n BETWEEN 0 AND 10",
    "n NOT BETWEEN 0 AND 10",
    "price > 5",
    "price < 1",
    "price = 5.5",
    "price >= .5",
    "price > 5E9",
    "n = 9223372036854775807",
    "n > 9223372036854775806L",
    "big < n",
    "n > big",
    "flag = TRUE",
    "flag = FALSE",
    "flag <> TRUE",
    "missing IS NULL",
    "missing IS NOT NULL",
    "missing = 'x'",
    "NOT (missing = 'x')",
    "missing = 'x' OR TRUE",
    "missing = 'x' AND FALSE",
    "NOT missing IS NULL",
    "name CONTAINS 'World'",
    "name STARTSWITH 'Hello'",
    "name ENDSWITH 'World'",
    "name NOT CONTAINS 'x'",
    "name NOT STARTSWITH 'W'",
    "missing CONTAINS 'a'",
    "missing NOT CONTAINS 'a'",
    "q = 'it''s'",
    "(region = 'HZ' OR region = 'SH') AND NOT (n > 7)",
    "n > -4 AND n < +6",
    "region = ''",
    "TAGS IN ('a', 'c') OR price IS NOT NULL",
    "n = '5'",
    "n = 5 OR n = 10",
    "name CONTAINS ''",
    "name STARTSWITH ''",
    "name ENDSWITH ''",
    "name NOT CONTAINS ''",
    "name NOT ENDSWITH ''",
    "n = 5 -- five\nOR n = 10",
    "n /* n */ > 4 -- the end",
]


@pytest.fixture
def loaded(backend_url: str, namespace: str) -> Iterator[tuple[Store, list[str]]]:
    admin_once(backend_url, namespace).create_topic("F", read_queues=1, write_queues=1)
    with Producer("p", backend_url, namespace=namespace) as producer:
        ids = [
            producer.send(Message("F", b"%d" % i, tags=tags or None, properties=props)).msg_id
            for i, (tags, props) in enumerate(PROPS)
        ]
    store = owned(Store(Connection(backend_url, namespace)))
    yield store, ids
    store.conn.close()


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_store_filter_equals_python(expression: str, loaded: tuple[Store, list[str]]) -> None:
    store, ids = loaded
    selector = MessageSelector.by_sql(expression)
    expected = [ids[i] for i, (tags, props) in enumerate(PROPS) if selector.matches(props, tags or None)]
    ftype, fdata = filter_args(selector)
    result = store.pull_many([PullRequest("F", 0, 0, 100, 1000, ftype, fdata)])[0]
    assert not isinstance(result, Exception)
    assert [m.msg_id for m in result.messages] == expected
    assert result.next_offset == len(PROPS)


def test_store_tag_filter_skips_untagged_and_others(loaded: tuple[Store, list[str]]) -> None:
    store, ids = loaded
    ftype, fdata = filter_args(MessageSelector.by_tag("a || c"))
    result = store.pull_many([PullRequest("F", 0, 0, 100, 1000, ftype, fdata)])[0]
    assert not isinstance(result, Exception)
    assert [m.msg_id for m in result.messages] == [ids[i] for i, (t, _) in enumerate(PROPS) if t in ("a", "c")]


def test_scan_bound_moves_the_offset_without_matches(loaded: tuple[Store, list[str]]) -> None:
    store, _ = loaded
    ftype, fdata = filter_args(MessageSelector.by_sql("missing = 'nothing'"))
    result = store.pull_many([PullRequest("F", 0, 0, 100, 3, ftype, fdata)])[0]
    assert not isinstance(result, Exception)
    assert result.messages == [] and result.next_offset == 3  # scanned 3, matched none, moves on


@pytest.fixture
def rocketmq_loaded(backend_url: str, namespace: str) -> Iterator[tuple[Store, list[str]]]:
    """Topic R holding one message per ported RocketMQ case, in case order (queue offset = case index)."""
    admin_once(backend_url, namespace).create_topic("R", read_queues=1, write_queues=1)
    with Producer("p", backend_url, namespace=namespace) as producer:
        ids = [
            producer.send(Message("R", b"%d" % i, tags=case.tags, properties=case.properties)).msg_id
            for i, case in enumerate(CASES)
        ]
    store = owned(Store(Connection(backend_url, namespace)))
    yield store, ids
    store.conn.close()


def test_rocketmq_filter_cases_in_lua_and_python(rocketmq_loaded: tuple[Store, list[str]]) -> None:
    """Every RocketMQ filter case gives RocketMQ's answer in both evaluators, and for each expression the
    store's Lua evaluator picks exactly the messages the Python one matches among all the cases' messages."""
    store, ids = rocketmq_loaded
    case_of = {msg_id: i for i, msg_id in enumerate(ids)}
    wrong: list[str] = []
    for expression in dict.fromkeys(case.expression for case in CASES):
        selector = MessageSelector.by_sql(expression)
        python = {i for i, case in enumerate(CASES) if selector.matches(case.properties, case.tags)}
        result = store.pull_many([PullRequest("R", 0, 0, len(CASES), len(CASES), *filter_args(selector))])[0]
        assert not isinstance(result, Exception)
        lua = {case_of[m.msg_id] for m in result.messages}
        if lua != python:
            wrong.append(f"{expression!r}: Lua and Python disagree on the messages of cases {sorted(lua ^ python)}")
        for i, case in enumerate(CASES):
            if case.expression == expression and {i in lua, i in python} != {case.expected}:
                wrong.append(f"{case}: Lua {i in lua}, Python {i in python}")
    assert not wrong, "\n".join(wrong)


def test_the_store_refuses_an_unbounded_filter_sent_directly(loaded: tuple[Store, list[str]]) -> None:
    """A client that skips the library's expression limits and calls the script itself is refused."""
    store, _ = loaded
    huge = "\x1f".join(f"t{i}" for i in range(40_000))  # about 270 KB of tags
    result = store.pull_many([PullRequest("F", 0, 0, 100, 1000, "TAG", huge)])[0]
    assert isinstance(result, MQBrokerError) and "over the limit" in str(result)
