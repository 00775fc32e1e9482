"""On a cluster every call goes to the node of its hash tag without asking a node where its keys are
(issue 33 item 1).

redis-py's cluster client asks a node ``COMMAND GETKEYS`` for every command whose key positions it
does not parse itself (those flagged ``movablekeys``, such as ``XREAD``): an extra round trip per call,
all on one node, a ceiling that adding masters cannot lift. The test runs a whole cycle through both
APIs — sends (one delayed, through the broker service), push, pull and simple consumers, a transaction
— and reads each node's ``INFO commandstats`` afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, LocalTransactionState, Message
from scheduler import BrokerConfig, BrokerService
from tests.apis import Api
from tests.procs import wait_for
from tests.servers import RedisClusterProcs

pytestmark = pytest.mark.cluster

#: Short delay levels: the delayed message comes back in a fraction of a second.
FAST_LEVELS = "100ms 200ms 300ms"
#: The field of ``INFO commandstats`` counting ``COMMAND GETKEYS`` (redis 7+: ``cmdstat_`` + the
#: command and its subcommand joined by ``|``).
GETKEYS = "cmdstat_command|getkeys"
#: Messages of the cycle, spread over the topic's queues (and so over every master).
COUNT = 24


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterProcs]:
    """A cluster of this module's own: no other test's client can add to its command counts."""
    with RedisClusterProcs() as procs:
        yield procs


def _node_clients(cluster: RedisClusterProcs) -> list[redis.Redis]:
    return [redis.Redis(port=p) for p in cluster.ports]


def _reset_stats(cluster: RedisClusterProcs) -> None:
    for node in _node_clients(cluster):
        with node:
            node.config_resetstat()


def _calls(cluster: RedisClusterProcs) -> tuple[int, int]:
    """(``COMMAND GETKEYS`` calls, all calls) summed over every node since the last reset."""
    getkeys = total = 0
    for node in _node_clients(cluster):
        with node:
            stats = node.info("commandstats")
        getkeys += int(stats.get(GETKEYS, {}).get("calls", 0))
        total += sum(int(s["calls"]) for s in stats.values())
    return getkeys, total


def test_a_full_cycle_asks_no_node_for_key_positions(api: Api, cluster: RedisClusterProcs, namespace: str) -> None:
    url = cluster.url
    _reset_stats(cluster)
    admin = api.admin(url, namespace)
    admin.create_topic("R", read_queues=8, write_queues=8)
    pushed: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            pushed.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = api.push_consumer("route-push", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    push.subscribe("R", "*")
    push.register_message_listener(listener)
    pull = api.pull_consumer("route-pull", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pull.subscribe("R", "*")
    simple = api.simple_consumer("route-simple", url, namespace=namespace, subscriptions={"R": "*"}, await_duration_s=0.5)
    expected = {b"m%d" % i for i in range(COUNT)} | {b"delayed", b"committed"}
    with (
        BrokerService(url, namespace, BrokerConfig(message_delay_level=FAST_LEVELS)),
        push,
        pull,
        simple,
        api.producer("route-p", url, namespace=namespace) as producer,
        api.transaction_producer(
            "route-tx", url, namespace=namespace, checker=lambda m: LocalTransactionState.COMMIT_MESSAGE
        ) as tp,
    ):
        for body in sorted(expected - {b"delayed", b"committed"}):
            producer.send(Message("R", body))
        producer.send(Message("R", b"delayed", delay_level=1))
        tp.send_message_in_transaction(Message("R", b"committed"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE)

        polled: set[bytes] = set()
        wait_for(lambda: polled.update(m.body for m in pull.poll(timeout_s=0.5)) or polled >= expected, 20, "the pull consumer")
        received: set[bytes] = set()

        def receive() -> bool:
            for view in simple.receive(max_messages=16, invisible_duration_s=30):
                received.add(view.body)
                simple.ack(view)
            return received >= expected

        wait_for(receive, 20, "the simple consumer")
        wait_for(lambda: set(pushed) >= expected, 20, "the push consumer")
    getkeys, total = _calls(cluster)
    assert total > 0
    assert getkeys == 0, f"{getkeys} of {total} calls asked a node for key positions (COMMAND GETKEYS)"
