"""``mq demo``: a guided tour of what rocketredis does, on the embedded store by default.

The demo runs in a namespace of its own (``demo-`` and 8 hex digits unless ``--namespace`` names an
empty one) and removes every key of it at the end unless ``--keep``, so it leaves nothing behind in
the Redis it ran on. Offset ranges it prints are half-open, ``[first, end)``, as ``mq topic status``
shows them. The Spark step's JVM writes its own output to a log file, not between the demo's lines.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence

from mq.cli.common import Commands, add_leaf, connection_options
from mq.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    PushConsumer,
)
from mq.errors import MQClientError
from mq.filter import MessageSelector
from mq.model.message import Message, MessageExt
from mq.model.queue import MessageQueue
from mq.model.validation import RETRY_PREFIX
from mq.operator.admin import Admin
from mq.producer import LocalTransactionState, Producer, SelectMessageQueueByHash, TransactionProducer
from mq.store.connection import mask_url, resolve_url
from scheduler import BrokerConfig, BrokerService

#: The demo's topic.
TOPIC = "DemoOrders"
#: Orders the demo sends, each with a few events in order.
ORDERS = ("order-1001", "order-1002", "order-1003", "order-1004", "order-1005")
EVENTS = ("created", "paid", "shipped")
#: Seconds the demo waits for consumers to split queues or receive what it sent.
SETTLE_TIMEOUT_S = 20.0


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq demo``."""
    about = "run the end-to-end demo (on the embedded store unless --url or $MQ_URL names one)"
    own = connection_options(
        namespace_default=None,
        namespace_help="namespace the demo creates and removes at the end; it must hold no keys "
        "(default: a new one, demo- and 8 hex digits)",
    )
    demo = add_leaf(commands, "demo", _demo, about, own)
    demo.add_argument(
        "--keep", action="store_true", help="keep the demo's namespace and its data at the end (default: remove it)"
    )


def _demo(args: argparse.Namespace) -> int:
    return run(args.url, args.namespace, keep=args.keep)


def run(url: str | None = None, namespace: str | None = None, *, keep: bool = False) -> int:
    """Run the demo against ``url`` in ``namespace`` (None: a new ``demo-XXXXXXXX``); returns the exit code.

    Every key of the namespace is removed at the end (also when a step fails) unless ``keep``.

    Raises:
        MQClientError: ``namespace`` already holds keys (the demo would remove them).
    """
    url = resolve_url(url)
    namespace = namespace or f"demo-{uuid.uuid4().hex[:8]}"
    with Admin(url, namespace) as admin:
        if not admin.namespace_empty():
            raise MQClientError(
                f"namespace {namespace!r} already holds keys and the demo removes its namespace at the "
                "end: pass a new --namespace, or none for a fresh demo-XXXXXXXX"
            )
    print(f"rocketredis demo on {mask_url(url)} (namespace {namespace!r})")
    print("Offset ranges are half-open: [first, end) holds offsets first .. end-1.\n")
    try:
        with Admin(url, namespace) as admin, Producer("DemoProducer", url, namespace=namespace) as producer:
            _produce(admin, producer)
            _consume(url, namespace, admin, producer)
            _ordered(url, namespace, admin, producer)
            # check back every second (the default is 60 s) so the demo's unknown transaction resolves fast
            with BrokerService(url, namespace, BrokerConfig(transaction_check_interval_s=1.0)):
                _time(url, namespace, admin, producer)
                _transactions(url, namespace, admin)
        _spark_summary(url, namespace)
    finally:
        if keep:
            print(f"\nKept namespace {namespace!r}: mq topic list --url {mask_url(url)} --namespace {namespace}")
        else:
            with Admin(url, namespace) as admin:
                removed = admin.delete_namespace()
            print(f"\nRemoved namespace {namespace!r} ({removed} keys); --keep keeps it")
    if url.startswith("memory://"):
        print("Done. Try it on Redis: MQ_URL=redis://127.0.0.1:6379/0 make demo")
    else:
        print("Done.")
    return 0


def _produce(admin: Admin, producer: Producer) -> None:
    config = admin.create_topic(TOPIC, read_queues=4, write_queues=4)
    print(f"1. topic {config.name}: {config.read_queues} read / {config.write_queues} write queues")

    sent = []
    hash_selector = SelectMessageQueueByHash()
    for order in ORDERS:
        for event in EVENTS:
            msg = Message(
                TOPIC,
                f"{order} {event}".encode(),
                tags=event,
                keys=[order],
                properties={"region": "HZ" if order[-1] in "135" else "SH", "amount": "42"},
            )
            sent.append((order, producer.send(msg, selector=hash_selector, arg=order)))
    print(f"2. sent {len(sent)} order events by sharding key: each order's events share one queue")
    for order in ORDERS[:2]:
        queues = sorted({r.message_queue.queue_id for o, r in sent if o == order})
        print(f"     {order} -> queue {', '.join(map(str, queues))}")

    batch = [Message(TOPIC, f"audit {i}".encode(), tags="audit") for i in range(10)]
    result = producer.send_batch(batch)
    print(
        f"3. sent a batch of {len(batch)} to queue {result.message_queue.queue_id}, "
        f"offsets [{result.queue_offset}, {result.queue_offset + len(batch)})"
    )

    futures = [producer.send_async(Message(TOPIC, f"click {i}".encode(), tags="click")) for i in range(20)]
    done = [f.result(timeout=10) for f in futures]
    print(f"4. sent {len(done)} async messages (pipelined by the background sender)")

    first_id = sent[0][1].msg_id
    found = admin.query_message(TOPIC, first_id)
    print(f"5. query by id {first_id}: {found.body.decode() if found else 'not found'!r}")
    by_key = admin.query_messages_by_key(TOPIC, ORDERS[0])
    print(f"   query by key {ORDERS[0]}: {[m.body.decode() for m in by_key]}")

    print("6. queue status:")
    for mq, stats in sorted(admin.topic_status(TOPIC).items()):
        print(f"     queue {mq.queue_id}: offsets [{stats.min_offset}, {stats.max_offset})")


class _Recorder:
    """A listener that remembers what one consumer got."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        with self.lock:
            self.bodies.extend(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def _consumer(
    url: str,
    namespace: str,
    group: str,
    expression: str | MessageSelector,
    sink: _Recorder,
    where: ConsumeFromWhere = ConsumeFromWhere.FIRST_OFFSET,
    topic: str = TOPIC,
) -> PushConsumer:
    consumer = PushConsumer(group, url, namespace=namespace, consume_from_where=where)
    consumer.subscribe(topic, expression)
    consumer.register_message_listener(sink)
    return consumer.start()


def _consume(url: str, namespace: str, admin: Admin, producer: Producer) -> None:
    members = [_Recorder(), _Recorder()]
    paid, hz = _Recorder(), _Recorder()
    consumers = [_consumer(url, namespace, "DemoGroup", "*", sink, ConsumeFromWhere.LAST_OFFSET) for sink in members]
    consumers.append(_consumer(url, namespace, "DemoPaidOnly", "paid", paid))
    sql = MessageSelector.by_sql("region = 'HZ' AND TAGS IN ('created', 'shipped')")
    consumers.append(_consumer(url, namespace, "DemoHangzhou", sql, hz))
    try:
        split: list[set[MessageQueue]] = []

        def settled_now() -> bool:  # the two members split the demo's topic and the group's retry topic
            split[:] = [c.assigned_queues() for c in consumers[:2]]
            return split_settled(admin, split, (TOPIC, RETRY_PREFIX + "DemoGroup"))

        settled = _wait(settled_now)
        shares = [queue_names(share) for share in split]
        for i in range(40):
            producer.send(Message(TOPIC, f"ticket {i}".encode(), tags="ticket"))
        _wait(lambda: sum(len(m.bodies) for m in members) >= 40 and len(paid.bodies) >= 5 and len(hz.bodies) >= 6)
    finally:
        for consumer in consumers:
            consumer.shutdown()
    state = "" if settled else f" (still rebalancing after {SETTLE_TIMEOUT_S:g} s)"
    print(f"7. consumer group DemoGroup: two members split the queues [{shares[0]}] and [{shares[1]}]{state}, then")
    print(
        f"   40 new tickets were sent: member 1 got {len(members[0].bodies)}, member 2 got {len(members[1].bodies)}, "
        f"none twice: {not set(members[0].bodies) & set(members[1].bodies)}"
    )
    print(f"8. tag filter 'paid' (filtered in Redis): {sorted(paid.bodies)}")
    print(f"9. SQL92 filter {sql.expression!r}: {sorted(hz.bodies)}")
    lag = sum(p.lag for p in admin.consumer_progress("DemoGroup", TOPIC))
    print(f"10. DemoGroup lag after consuming: {lag}")


def split_settled(admin: Admin, shares: list[set[MessageQueue]], topics: Sequence[str]) -> bool:
    """Whether every member holds queues, no queue is held twice, and together they hold every readable
    queue of ``topics`` (those the group consumes)."""
    if not all(shares):
        return False
    held = [q for share in shares for q in share]
    if len(held) != len(set(held)):
        return False
    for topic in topics:
        config = admin.topic_config(topic)
        wanted = {q for q in range(config.read_queues) if config.readable(q)}
        if not wanted <= {q.queue_id for q in held if q.topic == topic}:
            return False
    return True


def queue_names(queues: set[MessageQueue]) -> str:
    """``topic:queue`` of each queue, the demo's topic first: ``DemoOrders:0, DemoOrders:1, %RETRY%DemoGroup:0``."""
    return ", ".join(f"{q.topic}:{q.queue_id}" for q in sorted(queues, key=lambda q: (q.topic != TOPIC, q.topic, q.queue_id)))


def _wait(done: Callable[[], bool], timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
    """Poll ``done`` until it is true or ``timeout_s`` passed; returns its last answer."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _ordered(url: str, namespace: str, admin: Admin, producer: Producer) -> None:
    """Order events of many orders, sent by sharding key, consumed in order by a group of two."""
    admin.create_topic("DemoOrderEvents", read_queues=4, write_queues=4, order=True)
    seen: dict[str, list[str]] = {}
    lock = threading.Lock()

    def in_order(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        for m in msgs:
            order, event = m.body.decode().split()
            with lock:
                seen.setdefault(order, []).append(event)
        return ConsumeOrderlyStatus.SUCCESS

    consumers = []
    for _ in range(2):
        c = PushConsumer("DemoOrderedGroup", url, namespace=namespace)
        c.subscribe("DemoOrderEvents", "*")
        c.register_orderly_listener(in_order)
        consumers.append(c.start())
    try:
        _wait(lambda: all(c.assigned_queues() for c in consumers))  # each member locked its queues
        orders = [f"order-{2000 + i}" for i in range(50)]
        selector = SelectMessageQueueByHash()
        for event in EVENTS:
            for order in orders:
                producer.send(Message("DemoOrderEvents", f"{order} {event}".encode(), tags=event), selector=selector, arg=order)
        _wait(lambda: sum(len(v) for v in seen.values()) >= len(orders) * len(EVENTS))
        shares = [sorted(q.queue_id for q in c.assigned_queues()) for c in consumers]
    finally:
        for c in consumers:
            c.shutdown()
    in_sequence = sum(1 for events in seen.values() if events == list(EVENTS))
    print(
        f"11. ordered: {len(orders)} orders x {len(EVENTS)} events sent by sharding key; two orderly members "
        f"locked queues {shares[0]} and {shares[1]};"
    )
    print(f"    {in_sequence} of {len(orders)} orders consumed exactly as created -> paid -> shipped")


def _time(url: str, namespace: str, admin: Admin, producer: Producer) -> None:
    """Delayed messages, a retry that succeeds, and a dead letter that is resent (needs the broker service)."""
    admin.create_topic("DemoTimeouts", read_queues=1, write_queues=1)
    admin.create_topic("DemoPayments", read_queues=2, write_queues=2)
    timeouts, payments = _Recorder(), _Attempts()
    consumers = [_consumer(url, namespace, "DemoTimeoutChecker", "*", timeouts, ConsumeFromWhere.LAST_OFFSET, "DemoTimeouts")]
    pay = PushConsumer("DemoPaymentService", url, namespace=namespace, max_reconsume_times=1)
    pay.subscribe("DemoPayments", "*")
    pay.register_message_listener(payments)
    consumers.append(pay.start())
    try:
        _wait(lambda: all(c.assigned_queues() for c in consumers))
        sent_at = time.time()
        producer.send(Message("DemoTimeouts", b"cancel order-1001 if unpaid", deliver_time_ms=int(sent_at * 1000) + 2000))
        producer.send(Message("DemoPayments", b"charge order-1002"))  # fails once, then succeeds
        producer.send(Message("DemoPayments", b"charge order-1003 (card declined)"))  # always fails
        _wait(lambda: bool(timeouts.bodies) and len(admin.dlq_messages("DemoPaymentService")) == 1)
        print(f"12. timer message delivered {time.time() - sent_at:.2f} s after sending (due after 2 s): {timeouts.bodies}")
        print(f"13. retry: {payments.summary('charge order-1002')}")
        print(
            f"14. dead letter after max_reconsume_times=1: {payments.summary('charge order-1003 (card declined)')}; "
            f"DLQ holds {[m.body.decode() for m in admin.dlq_messages('DemoPaymentService')]}"
        )
        payments.fix("charge order-1003 (card declined)")
        resent = admin.resend_dlq("DemoPaymentService")
        _wait(lambda: payments.succeeded("charge order-1003 (card declined)"))
        print(f"    resend_dlq resent {resent}; after the fix: {payments.summary('charge order-1003 (card declined)')}")
    finally:
        for consumer in consumers:
            consumer.shutdown()


def _transactions(url: str, namespace: str, admin: Admin) -> None:
    """The order/cart example: an order's message is sent only if clearing the cart commits."""
    admin.create_topic("DemoOrderCreated", read_queues=2, write_queues=2)
    created = _Recorder()
    consumers = [_consumer(url, namespace, "DemoCartCleaner", "*", created, ConsumeFromWhere.LAST_OFFSET, "DemoOrderCreated")]
    carts = {"order-3001": "committed", "order-3002": "rolled back", "order-3003": "unknown"}
    outcome = {
        "committed": LocalTransactionState.COMMIT_MESSAGE,
        "rolled back": LocalTransactionState.ROLLBACK_MESSAGE,
        "unknown": LocalTransactionState.UNKNOW,
    }

    def local_transaction(msg: Message, order: str) -> LocalTransactionState:
        return outcome[carts[order]]  # e.g. the database transaction that clears the cart

    def check_back(msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE  # the order row exists: the transaction did commit

    try:
        _wait(lambda: bool(consumers[0].assigned_queues()))
        with TransactionProducer("DemoOrderService", url, namespace=namespace, checker=check_back) as tp:
            print("15. transactions (order/cart): the order message goes out only if clearing the cart commits")
            for order in carts:
                r = tp.send_message_in_transaction(
                    Message("DemoOrderCreated", f"{order} created".encode()), local_transaction, order, check_immunity_time_s=1.0
                )
                print(f"    {order}: local transaction {carts[order]} -> {r.local_transaction_state.value}")
            _wait(lambda: len(created.bodies) >= 2)
            time.sleep(0.5)
    finally:
        consumers[0].shutdown()
    print(f"    consumers saw {sorted(created.bodies)} (the unknown one committed by check-back)")


def _spark_summary(url: str, namespace: str) -> None:
    """End with a Spark summary of what the demo stored, when pyspark is installed."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("16. Spark analytics: pip install 'rocketredis[spark]' (with Java 17) to end the demo with a Spark summary")
        return
    if url.startswith("memory://"):
        print("16. Spark summary: Spark's workers are separate processes and cannot see the embedded store;")
        print("    run the demo on Redis to get it: MQ_URL=redis://127.0.0.1:6379/0 make demo")
        return
    from spark.session import local_session
    from spark.summary import summary_lines

    log_path = os.path.join(tempfile.gettempdir(), f"mq-demo-spark-{namespace}.log")
    with _output_to(log_path):  # the JVM inherits these descriptors: its warnings go to the log for good
        lines = summary_lines(local_session(), url, namespace)
    print(f"16. Spark summary (spark.read.format('mq')); Spark's own output is in {log_path}:")
    for line in lines:
        print(f"    {line}")


@contextlib.contextmanager
def _output_to(path: str) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``path`` for the block (what child processes started in it,
    such as Spark's JVM, inherit and keep), then restore them for this process."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


class _Attempts:
    """A payment listener that fails the first try of order-1002 and every try of a declined card."""

    def __init__(self) -> None:
        self.tries: dict[str, list[str]] = {}
        self.fixed: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        body = msgs[0].body.decode()
        with self.lock:
            tries = self.tries.setdefault(body, [])
            ok = body in self.fixed or ("1002" in body and msgs[0].reconsume_times > 0)
            tries.append("ok" if ok else "failed")
        ctx.delay_level_when_next_consume = 1  # retry after 1 s (level 1) instead of the default 10 s
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS if ok else ConsumeConcurrentlyStatus.RECONSUME_LATER

    def summary(self, body: str) -> str:
        with self.lock:
            return " -> ".join(self.tries.get(body, []))

    def succeeded(self, body: str) -> bool:
        with self.lock:
            return "ok" in self.tries.get(body, [])

    def fix(self, body: str) -> None:
        with self.lock:
            self.fixed.add(body)
