"""Admin views behind the web console (mq/operator/admin_views.py, mq/store/views.py) against a real
redis-server: queue states of many topics, key queries by page past the 64 cap, timer and half
backlogs per topic, what each group did with a message, resend reports, members of many groups."""

from __future__ import annotations

import threading
import time

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from mq.errors import MQClientError, TopicNotFoundError
from mq.operator.admin_views import CONSUMED, DEAD_LETTERED, PENDING, RETRYING, UNKNOWN
from scheduler import BrokerConfig, BrokerService
from tests.procs import wait_for


def test_messages_by_key_page_through_every_match_past_the_cap(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    url = redis_server.url
    with Admin(url, namespace) as admin, Producer("p", url, namespace=namespace) as producer:
        admin.create_topic("K", read_queues=3, write_queues=3)
        ids = [producer.send(Message("K", f"m{i}".encode(), keys=["k", f"own-{i}"])).msg_id for i in range(100)]
        for _ in range(10):
            producer.send(Message("K", b"other", keys=["kk"]))
        assert len(admin.query_messages_by_key("K", "k")) == 64  # the old call's cap
        assert admin.count_messages_by_key("K", "k") == 100 and admin.count_messages_by_key("K", "kk") == 10
        pages = [admin.messages_by_key("K", "k", start=s, count=30) for s in range(0, 120, 30)]
        assert [len(p) for p in pages] == [30, 30, 30, 10, 0][: len(pages)]
        found = [m.msg_id for p in pages for m in p]
        assert sorted(found) == sorted(ids)
        order = [(m.queue_id, m.queue_offset) for p in pages for m in p]
        assert order == sorted(order)  # (queue id, offset) order: pages never overlap
        assert [m.msg_id for m in admin.messages_by_key("K", "own-7", start=0, count=5)] == [ids[7]]
        for bad in ({"start": -1, "count": 1}, {"start": 0, "count": 0}, {"start": "0", "count": 1}):
            with pytest.raises(MQClientError):
                admin.messages_by_key("K", "k", **bad)
        with pytest.raises(MQClientError):
            admin.count_messages_by_key("K", "")
        with pytest.raises(TopicNotFoundError):
            admin.messages_by_key("Nope", "k", start=0, count=1)


def test_queue_states_read_every_queue_with_each_groups_offset(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    url = redis_server.url
    with Admin(url, namespace) as admin, Producer("p", url, namespace=namespace) as producer:
        admin.create_topic("A", read_queues=2, write_queues=3)
        admin.create_topic("B", read_queues=1, write_queues=1, perm="r")
        for q in range(3):
            for _ in range(q + 1):
                producer.send(Message("A", b"x"), queue=MessageQueue("A", "broker-a", q))
        for g in ("g1", "g2"):
            admin.create_group(g)
        admin.reset_offset("g1", MessageQueue("A", "broker-a", 1), 1)
        admin.reset_offset("g2", MessageQueue("A", "broker-a", 2), 3)
        states = admin.queue_states(["A", "B"])
        status = admin.topic_status("A")
        assert [s.stats for s in states["A"]] == [status[MessageQueue("A", "broker-a", q)] for q in range(3)]
        assert [s.offsets for s in states["A"]] == [{}, {"g1": 1}, {"g2": 3}]
        assert [(s.readable, s.writable) for s in states["A"]] == [(True, True), (True, True), (False, True)]
        assert [(s.readable, s.writable) for s in states["B"]] == [(True, False)]
        assert admin.group_lags(["g1", "g2", "g3"]) == {("g1", "A"): 1, ("g2", "A"): 0}  # g3: no offset, absent
        assert admin.group_lags([]) == {}
        bare = admin.queue_states(["A"], offsets=False)["A"]
        assert [s.stats for s in bare] == [s.stats for s in states["A"]] and [s.offsets for s in bare] == [{}, {}, {}]
        with pytest.raises(TopicNotFoundError):
            admin.queue_states(["A", "Nope"])


def test_backlogs_per_topic_come_from_the_timer_and_check_back_indexes(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    url = redis_server.url
    later = int(time.time() * 1000) + 3_600_000
    with Admin(url, namespace) as admin:
        for t in ("D1", "D2", "H"):
            admin.create_topic(t, read_queues=2, write_queues=2)
        assert admin.timer_backlog() == [] and admin.half_backlog() == []
        with Producer("p", url, namespace=namespace) as producer:
            for i in range(3):
                producer.send(Message("D1", b"later", deliver_time_ms=later + i))
            producer.send(Message("D2", b"later", deliver_time_ms=later + 10))
        with TransactionProducer("tx", url, namespace=namespace, checker=lambda m: LocalTransactionState.UNKNOW) as tp:
            tp.send_message_in_transaction(Message("H", b"limbo"), lambda m, a: LocalTransactionState.UNKNOW)
        timers = {b.topic: (b.waiting, b.earliest_ms) for b in admin.timer_backlog()}
        assert timers == {"D1": (3, later), "D2": (1, later + 10)}
        [half] = admin.half_backlog()
        assert half.topic == "H" and half.waiting == 1 and half.earliest_ms > time.time() * 1000 - 60_000


def test_message_states_tell_consumed_retrying_dead_lettered_pending_and_unknown(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    """No broker service runs: a retried copy waits in its retry topic's timer."""
    url = redis_server.url
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def listener_of(group: str, status: ConsumeConcurrentlyStatus):  # type: ignore[no-untyped-def]
        def listener(msgs, ctx):  # type: ignore[no-untyped-def]
            with lock:
                seen[group] = seen.get(group, 0) + len(msgs)
            return status

        return listener

    with Admin(url, namespace) as admin:
        admin.create_topic("M", read_queues=1, write_queues=1)
        admin.create_group("never")
        admin.create_group("late")
        consumers = []
        for group, status, retries in (
            ("ok", ConsumeConcurrentlyStatus.CONSUME_SUCCESS, 16),
            ("again", ConsumeConcurrentlyStatus.RECONSUME_LATER, 16),
            ("dead", ConsumeConcurrentlyStatus.RECONSUME_LATER, 0),
        ):
            c = PushConsumer(
                group, url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, max_reconsume_times=retries
            )
            c.subscribe("M")
            c.register_message_listener(listener_of(group, status))
            consumers.append(c)
        with Producer("p", url, namespace=namespace) as producer:
            sent = producer.send(Message("M", b"one"))
        admin.reset_offset("late", sent.message_queue, 0)
        for c in consumers:
            c.start()
        try:
            wait_for(lambda: len(seen) == 3 and len(admin.dlq_messages("dead")) == 1, 20, "the three groups to consume")
            wait_for(
                lambda: all(p.lag == 0 for g in ("ok", "again", "dead") for p in admin.consumer_progress(g, "M")), 20, "offsets"
            )
        finally:
            for c in consumers:
                c.shutdown()
        [message] = admin.find_message(sent.msg_id, "M")
        states = admin.message_states(message, ["ok", "again", "dead", "late", "never"])
        assert states == {"ok": CONSUMED, "again": RETRYING, "dead": DEAD_LETTERED, "late": PENDING, "never": UNKNOWN}
        with pytest.raises(MQClientError):
            admin.message_states(message, ["bad name!"])


def test_resend_report_names_the_letters_resent_and_skipped_and_dlq_pages(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    url = redis_server.url
    with Admin(url, namespace) as admin:
        admin.create_topic("R", read_queues=1, write_queues=1)
        admin.create_topic("Gone", read_queues=1, write_queues=1)
        c = PushConsumer("rg", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, max_reconsume_times=0)
        c.subscribe("R")
        c.subscribe("Gone")
        c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
        with c, Producer("p", url, namespace=namespace) as producer:
            ids = [producer.send(Message("R", f"r{i}".encode())).msg_id for i in range(3)]
            gone = producer.send(Message("Gone", b"g")).msg_id
            wait_for(lambda: len(admin.dlq_messages("rg")) == 4, 20, "four dead letters")
        letters = admin.dlq_messages("rg")
        assert [m.msg_id for m in admin.dlq_messages("rg", max_num=2, offset=letters[1].queue_offset)] == [
            m.msg_id for m in letters[1:3]
        ]
        assert admin.dlq_messages("rg", offset=letters[-1].queue_offset + 1) == []
        for bad in ({"max_num": 0}, {"max_num": 5000}, {"offset": -1}):
            with pytest.raises(MQClientError):
                admin.dlq_messages("rg", **bad)
        admin.delete_topic("Gone")
        first = admin.resend_dlq_report("rg", msg_ids=[ids[1]])
        assert first.resent == [ids[1]] and first.skipped == []
        rest = admin.resend_dlq_report("rg")
        assert sorted(rest.resent) == sorted([ids[0], ids[2]]) and rest.skipped == [f"{gone} (Gone: the topic is gone)"]
        assert admin.resend_dlq_report("rg").resent == []
        assert admin.resend_dlq("rg") == 0 and admin.last_resend_skipped == [f"{gone} (Gone: the topic is gone)"]


def test_members_of_many_groups_owners_broker_beats_and_stats_history(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    url = redis_server.url
    with Admin(url, namespace) as admin:
        admin.create_topic("O", read_queues=2, write_queues=2)
        admin.create_group("empty")
        assert admin.broker_beats() == {} and admin.stats_history() == []
        c = PushConsumer("og", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        c.subscribe("O")
        c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        with BrokerService(url, namespace, BrokerConfig(stats_interval_s=0.2, health_interval_s=0.2)) as broker, c:
            wait_for(lambda: len(admin.consumer_connections("og")) == 1, 10, "the member")
            wait_for(lambda: all(admin.queue_owners("O")[q].get("og") for q in (0, 1)), 10, "the queues owned")
            both = admin.consumer_connections_of(["og", "empty"])
            assert both == {"og": admin.consumer_connections("og"), "empty": []}
            assert admin.queue_owners("O") == {q: {"og": both["og"][0].client_id} for q in (0, 1)}
            states = admin.queue_states(["O", "%RETRY%og"], owners=True)  # every topic's owners in one pipeline
            assert [s.owners for s in states["O"]] == [{"og": both["og"][0].client_id}] * 2
            assert all(s.owners == {} for s in admin.queue_states(["O"])["O"])  # not read unless asked
            wait_for(lambda: len(admin.stats_history()) >= 2, 10, "two stats snapshots")
            beats = admin.broker_beats()
            assert list(beats) == [broker.id] and beats[broker.id] > time.time() * 1000 - 5_000
        assert "og" not in admin.queue_owners("O")[0]  # released at shutdown
        with pytest.raises(MQClientError):
            admin.consumer_connections_of(["bad name!"])
