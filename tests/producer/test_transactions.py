"""Transaction messages: half messages, commit/rollback, check-back by the broker service."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    LocalTransactionState,
    Message,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from mq.errors import MQClientError, TopicNotFoundError
from mq.keys import Keys
from scheduler import BrokerConfig, BrokerService
from tests.helpers import admin_once, raw_client, snapshot, stays_quiet
from tests.leaks import owned
from tests.procs import ROOT, wait_for

COMMIT, ROLLBACK, UNKNOW = (
    LocalTransactionState.COMMIT_MESSAGE,
    LocalTransactionState.ROLLBACK_MESSAGE,
    LocalTransactionState.UNKNOW,
)
FAST = BrokerConfig(transaction_timeout_s=1.0, transaction_check_interval_s=1.0, transaction_check_max=3)


class Inbox:
    """A consumer of topic T recording bodies with arrival times."""

    def __init__(self, url: str, ns: str) -> None:
        self.got: list[tuple[bytes, float]] = []
        self.lock = threading.Lock()
        self.consumer = PushConsumer("tx-readers", url, namespace=ns)
        self.consumer.subscribe("T", "*")
        self.consumer.register_message_listener(self._on)

    def _on(self, msgs, ctx):  # type: ignore[no-untyped-def]
        with self.lock:
            self.got.extend((m.body, time.time()) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [b for b, _ in self.got]


@pytest.fixture
def env(backend_url: str, namespace: str) -> Iterator[tuple[str, str, Admin, Inbox]]:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("T", read_queues=4, write_queues=4)
    inbox = Inbox(backend_url, namespace)
    with inbox.consumer:
        wait_for(lambda: len([q for q in inbox.consumer.assigned_queues() if q.topic == "T"]) == 4, 10, "the inbox's queues")
        yield backend_url, namespace, admin, inbox


def test_commit_is_visible_at_once_rollback_never_half_invisible(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, admin, inbox = env
    seen_during: list[int] = []

    def commit(msg, arg):  # type: ignore[no-untyped-def]
        # the half message is stored now: nobody may see it, however long the local transaction takes
        stays_quiet(lambda: len(inbox.bodies()), "the inbox while the transaction is open")
        seen_during.append(len(inbox.bodies()))
        seen_during.append(sum(s.max_offset for s in admin.topic_status("T").values()))
        return COMMIT

    with TransactionProducer("txg", url, namespace=ns, checker=lambda m: ROLLBACK) as tp:
        r = tp.send_message_in_transaction(Message("T", b"committed"), commit)
        assert r.local_transaction_state is COMMIT and r.queue_offset >= 0
        rolled = tp.send_message_in_transaction(Message("T", b"rolled back"), lambda m, a: ROLLBACK)
        assert rolled.local_transaction_state is ROLLBACK and rolled.queue_offset == -1
        wait_for(lambda: inbox.bodies() == [b"committed"], 5, "the committed message")
        assert admin.query_message("T", r.msg_id) is not None
    assert seen_during == [0, 0]
    stays_quiet(lambda: len(inbox.bodies()), "the inbox after the rollback")
    assert inbox.bodies() == [b"committed"]
    assert admin.query_message("T", rolled.msg_id) is None


def test_unknown_resolved_by_check_back(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, inbox = env
    answers = {b"check says commit": COMMIT, b"check says rollback": ROLLBACK, b"executor raised": COMMIT}

    def raises(msg, arg):  # type: ignore[no-untyped-def]
        raise RuntimeError("the local transaction crashed")

    with BrokerService(url, ns, FAST), TransactionProducer("txg", url, namespace=ns, checker=lambda m: answers[m.body]) as tp:
        sent = time.time()
        assert tp.send_message_in_transaction(Message("T", b"check says commit"), lambda m, a: UNKNOW).queue_offset == -1
        tp.send_message_in_transaction(Message("T", b"check says rollback"), lambda m, a: UNKNOW)
        r = tp.send_message_in_transaction(Message("T", b"executor raised"), raises)
        assert r.local_transaction_state is UNKNOW
        wait_for(lambda: len(inbox.bodies()) >= 2, 10, "both committed by check-back")
        stays_quiet(lambda: len(inbox.bodies()), "the inbox")  # two check intervals: the rolled-back one never comes
    assert sorted(inbox.bodies()) == [b"check says commit", b"executor raised"]
    arrived = dict(inbox.got)[b"check says commit"] - sent
    assert FAST.transaction_timeout_s <= arrived <= FAST.transaction_timeout_s + FAST.transaction_check_interval_s + 1


@pytest.mark.fault
def test_another_member_answers_for_a_killed_producer(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, inbox = env
    proc = subprocess.run(
        [sys.executable, "-m", "tests.tx_proc", url, ns, "txg", "T", "orphan"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -9 and "half stored" in proc.stdout
    assert inbox.bodies() == []
    with BrokerService(url, ns, FAST), TransactionProducer("txg", url, namespace=ns, checker=lambda m: COMMIT):
        wait_for(lambda: inbox.bodies() == [b"orphan"], 10, "the surviving member to commit it")


def test_unanswerable_half_is_checked_exactly_max_times_then_listed(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, admin, inbox = env
    checks: list[str] = []

    def never_sure(msg):  # type: ignore[no-untyped-def]
        checks.append(msg.system_properties["TRANSACTION_CHECK_TIMES"])
        return UNKNOW

    with BrokerService(url, ns, FAST), TransactionProducer("txg", url, namespace=ns, checker=never_sure) as tp:
        r = tp.send_message_in_transaction(Message("T", b"limbo", keys=["k"]), lambda m, a: UNKNOW)
        wait_for(lambda: bool(admin.discarded_transactions()), 15, "the half message to be rolled back and listed")
        stays_quiet(lambda: len(checks), "the checks")  # two check intervals: no further check
    assert checks == ["1", "2", "3"]
    [dead] = admin.discarded_transactions("T")
    assert (dead.msg_id, dead.body, dead.system_properties["TRANSACTION_CHECK_TIMES"]) == (r.msg_id, b"limbo", "3")
    assert dead.system_properties["DISCARD_REASON"] == "check_max"
    assert inbox.bodies() == []


def test_two_broker_services_check_once_per_interval_and_commit_once(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, inbox = env
    checks: dict[bytes, list[float]] = {}
    lock = threading.Lock()

    def third_time_lucky(msg):  # type: ignore[no-untyped-def]
        with lock:
            checks.setdefault(msg.body, []).append(time.time())
            return COMMIT if len(checks[msg.body]) >= 3 else UNKNOW

    config = BrokerConfig(transaction_timeout_s=1.0, transaction_check_interval_s=1.0, transaction_check_max=10)
    with (
        BrokerService(url, ns, config),
        BrokerService(url, ns, config),
        TransactionProducer("txg", url, namespace=ns, checker=third_time_lucky) as tp,
    ):
        for i in range(10):
            tp.send_message_in_transaction(Message("T", b"m%d" % i), lambda m, a: UNKNOW)
        wait_for(lambda: len(inbox.bodies()) >= 10, 20, "all committed")
        stays_quiet(lambda: (len(inbox.bodies()), sum(map(len, checks.values()))), "the deliveries and the checks")
    assert sorted(inbox.bodies()) == sorted(b"m%d" % i for i in range(10))  # once each
    assert all(len(times) == 3 for times in checks.values()), checks
    # What the brokers asked, read where they asked it: the request stream's ids are Redis times of
    # posting, so the producer's reading latency (which varies under load) does not blur the gaps.
    raw = raw_client(url)
    requests: dict[tuple[bytes, bytes], list[tuple[int, int]]] = {}  # (queue id, half id) -> (asked at, check no.)
    for entry_id, fields in raw.xrange(Keys(ns).group("txg").txcheck):
        half = (fields[b"queue_id"], fields[b"half_id"])  # half ids are per queue
        requests.setdefault(half, []).append((int(entry_id.split(b"-")[0]), int(fields[b"checks"])))
    raw.close()
    assert len(requests) == 10
    for half, asked in requests.items():
        assert [n for _, n in asked] == [1, 2, 3], (half, asked)  # each check counted once
        gaps = [b - a for (a, _), (b, _) in itertools.pairwise(asked)]
        assert all(gap >= 800 for gap in gaps), f"checked twice in one interval: {asked}"


def test_bad_input_is_refused_before_anything_is_stored(backend_url: str, namespace: str) -> None:
    admin_once(backend_url, namespace).create_topic("T", read_queues=2, write_queues=2)
    with TransactionProducer("txg", backend_url, namespace=namespace, checker=lambda m: COMMIT) as tp:
        before = snapshot(backend_url, namespace)
        with pytest.raises(MQClientError, match="delayed"):
            tp.send_message_in_transaction(Message("T", b"x", delay_level=2), lambda m, a: COMMIT)
        with pytest.raises(MQClientError, match="batches"):
            tp.send_message_in_transaction([Message("T", b"x")], lambda m, a: COMMIT)  # type: ignore[arg-type]
        with pytest.raises(TopicNotFoundError):
            tp.send_message_in_transaction(Message("nosuch", b"x"), lambda m, a: COMMIT)
        assert snapshot(backend_url, namespace) == before
    with pytest.raises(MQClientError, match="checker"):
        TransactionProducer("txg", backend_url, namespace=namespace, checker=None)  # type: ignore[arg-type]
    assert Producer  # the plain producer is unaffected by transactions


def test_a_commit_after_a_check_back_rollback_is_reported_as_rolled_back(backend_url: str, namespace: str) -> None:
    """The check-back decided first (rolled back); the local transaction then returns COMMIT: the
    result says what really happened, and the message never reaches consumers."""
    from mq import LocalTransactionState, Message, TransactionProducer

    admin_once(backend_url, namespace).create_topic("TXR", read_queues=1, write_queues=1)
    tp = TransactionProducer("txr", backend_url, namespace=namespace, checker=lambda m: LocalTransactionState.UNKNOW)
    with tp:
        real_end = tp._tx._end

        def check_back_wins(topic: str, queue_id: int, half_id: str, commit: bool) -> Iterator[Any]:
            yield from real_end(topic, queue_id, half_id, False)  # a broker's check-back rolled it back just before
            return (yield from real_end(topic, queue_id, half_id, commit))

        tp._tx._end = check_back_wins  # type: ignore[method-assign,assignment]
        result = tp.send_message_in_transaction(Message("TXR", b"x"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE)
        assert result.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
        assert result.queue_offset == -1
        tp._tx._end = real_end  # type: ignore[method-assign]
        ok = tp.send_message_in_transaction(Message("TXR", b"y"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE)
        assert ok.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE and ok.queue_offset == 0
    assert [m.body for m in admin_once(backend_url, namespace).messages("TXR", 0, 0)] == [b"y"]
