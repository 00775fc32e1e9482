"""``mq.aio.Admin`` runs the sync admin's very operations (``mq.operator.admin.AdminCore``): every method is there,
awaitable, and the same calls on two namespaces of one server give the same results, errors included."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import mq
from mq import ConsumeFromWhere, Message, MessageQueue, Producer, PullConsumer, aio
from mq.errors import MQClientError, TopicNotFoundError
from mq.model.message import MessageExt
from mq.operator.admin import AdminCore
from mq.operator.admin_views import AdminViews

#: The console's dashboard views (``mq.operator.admin_views.AdminViews``), mixed into the sync admin only so far.
SYNC_ONLY = {n for n in dir(AdminViews) if not n.startswith("_")} - {
    "CONSUMED",
    "DEAD_LETTERED",
    "PENDING",
    "RETRYING",
    "UNKNOWN",
}


def _public_methods(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def test_every_sync_method_is_there_with_the_same_signature() -> None:
    # run: the runner each admin is (one runs at once, one returns a coroutine), not an admin method
    sync_names = _public_methods(mq.Admin) - {"close", "run"} - SYNC_ONLY
    assert sync_names <= _public_methods(aio.Admin)
    assert len(sync_names) >= 30  # the whole admin, not a part
    assert not SYNC_ONLY & _public_methods(aio.Admin)  # not there rather than there and blocking
    for name in sync_names:  # the very same operation (same code, names and arguments), run by another runner
        sync_method, aio_method = getattr(mq.Admin, name), getattr(aio.Admin, name)
        assert aio_method.op is sync_method.op is inspect.getattr_static(AdminCore, name).op, name
        assert inspect.signature(aio_method) == inspect.signature(sync_method), name
        assert inspect.iscoroutinefunction(aio_method) and not inspect.iscoroutinefunction(sync_method), name
    for name in ("start", "shutdown", "close", "__aenter__", "__aexit__"):
        assert inspect.iscoroutinefunction(getattr(aio.Admin, name)), name


def _calls(q0: MessageQueue) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Admin calls covering every method (and some errors), in an order that makes each meaningful."""
    return [
        ("create_topic", ("A",), {"read_queues": 2, "write_queues": 2}),
        ("create_topic", ("%RETRY%x",), {}),  # an error: reserved name
        ("update_topic", ("A",), {"perm": "rw"}),
        ("update_topic", ("missing",), {}),  # an error: no such topic
        ("topic_exists", ("A",), {}),
        ("topics", (), {}),
        ("topic_config", ("A",), {}),
        ("topic_status", ("A",), {}),
        ("search_offset", (q0, 0), {}),
        ("query_message", ("A", "0" * 32), {}),
        ("query_messages_by_key", ("A", "k1"), {}),
        ("query_messages_by_key", ("A", "k1"), {"max_num": 0}),  # an error: bad max_num
        ("messages", ("A", 0, 0), {}),
        ("find_message", ("0" * 32,), {}),
        ("query_message", ("A", None), {}),  # None: the id of the run's first message
        ("find_message", (None,), {}),
        ("create_group", ("g",), {"retry_max_times": 3}),
        ("update_group", ("g",), {"consume_enable": False}),
        ("update_group", ("g",), {"nope": 1}),  # an error: unknown setting
        ("group_config", ("g",), {}),
        ("groups", (), {}),
        ("consumer_connections", ("g",), {}),
        ("consumer_progress", ("g",), {}),
        ("consumer_progress", ("g", "A"), {}),
        ("reset_offset_by_time", ("g", "A", 0), {}),
        ("reset_offset", ("g", q0, 1), {}),
        ("reset_offset", ("unknown-group", q0, 1), {}),  # an error: unknown group
        ("set_trace", (True,), {}),
        ("message_trace", ("A", "0" * 32), {}),
        ("dlq_messages", ("g",), {}),
        ("resend_dlq", ("g",), {}),
        ("purge_dlq", ("g",), {}),
        ("broker_stats", (), {}),
        ("discarded_transactions", (), {}),
        ("stats", (), {}),
        ("delete_group", ("g",), {}),
        ("delete_topic", ("missing",), {}),  # an error: no such topic
        ("namespace_empty", (), {}),
        ("delete_namespace", (), {}),
        ("namespace_empty", (), {}),
    ]


def _comparable(value: Any) -> Any:
    """A result without what differs between two runs: store times and message ids."""
    if isinstance(value, list):
        if value and all(isinstance(v, MessageExt) for v in value):  # equal store times sort either way
            value = sorted(value, key=lambda m: (m.topic, m.queue_id, m.queue_offset))
        return [_comparable(v) for v in value]
    if isinstance(value, dict):
        return {repr(k): _comparable(v) for k, v in value.items()}
    if isinstance(value, Exception):
        return (type(value).__name__, str(value).split(":")[0])
    if hasattr(value, "__dataclass_fields__") or (hasattr(value, "__slots__") and hasattr(value, "body")):
        fields = {k: getattr(value, k) for k in getattr(value, "__dataclass_fields__", {}) or ("body", "queue_offset")}
        return (type(value).__name__, {k: _comparable(v) for k, v in fields.items() if "time" not in k and "msg_id" not in k})
    return value


def _fill(url: str, ns: str) -> str:
    """Messages with key ``k1`` in topic A (queues 0 and 1) and group ``g`` offsets; returns a msg id."""
    with mq.Admin(url, ns) as admin:
        admin.create_topic("A", read_queues=2, write_queues=2)
    with Producer("p", url, namespace=ns) as producer:
        ids = [
            producer.send(Message("A", b"m%d" % i, keys=["k1"]), queue=MessageQueue("A", "broker-a", i % 2)).msg_id
            for i in range(4)
        ]
    pc = PullConsumer("g", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pc.subscribe("A")
    with pc:
        got: list[Any] = []
        while len(got) < 4:
            got += pc.poll(2)
        pc.commit()
    return ids[0]


@pytest.mark.anyio
async def test_the_same_calls_give_the_same_results(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    url = redis_server.url
    q0 = MessageQueue("A", "broker-a", 0)
    results: dict[str, list[Any]] = {"sync": [], "aio": []}
    ids = {kind: _fill(url, namespace + kind) for kind in results}
    sync_admin = mq.Admin(url, namespace + "sync")
    async with aio.Admin(url, namespace + "aio") as aio_admin:
        for name, args, kwargs in _calls(q0):
            for kind in ("sync", "aio"):
                given = tuple(ids[kind] if a is None else a for a in args)  # None: the run's first msg id
                try:
                    if kind == "sync":
                        value = getattr(sync_admin, name)(*given, **kwargs)
                    else:
                        call = getattr(aio_admin, name)(*given, **kwargs)
                        assert inspect.iscoroutine(call), name
                        value = await call
                except (MQClientError, TopicNotFoundError) as e:
                    value = e
                results[kind].append((name, _comparable(value)))
    sync_admin.close()
    for (name, mine), (_, theirs) in zip(results["aio"], results["sync"]):
        assert mine == theirs, name
    assert len(results["aio"]) == len(results["sync"])
    by_name = dict(results["sync"])
    assert by_name["create_topic"][0] == "InvalidNameError"  # the last of the name: the error
    assert by_name["delete_namespace"] > 0 and by_name["namespace_empty"] is True
    found = [v for n, v in results["sync"] if n in ("query_message", "find_message") and v not in (None, [])]
    assert [v[1]["body"] if isinstance(v, tuple) else [m[1]["body"] for m in v] for v in found] == [b"m0", [b"m0"]]
    errors = [n for n, v in results["sync"] if isinstance(v, tuple) and v[0].endswith("Error")]
    assert errors == ["create_topic", "update_topic", "query_messages_by_key", "update_group", "reset_offset", "delete_topic"], (
        errors
    )


@pytest.mark.anyio
async def test_bad_input_fails_on_await_before_anything_is_written(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    async with aio.Admin(redis_server.url, namespace) as admin:
        with pytest.raises(MQClientError, match="max_num"):
            await admin.query_messages_by_key("A", "k", max_num=100)
        with pytest.raises(TopicNotFoundError, match="create it"):
            await admin.topic_config("missing")
        assert await admin.namespace_empty()
        assert repr(admin).startswith("Admin(Connection(")
