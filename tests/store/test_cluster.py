"""Cluster specifics: queues spread over the masters; every script stays in one slot."""

from __future__ import annotations

import pytest

from mq import Admin, Message, Producer
from mq.store import scripts
from mq.store.connection import Connection
from tests.helpers import raw_client
from tests.leaks import owned

pytestmark = pytest.mark.cluster


def test_queues_spread_over_all_masters(redis_cluster, namespace: str) -> None:
    with Admin(redis_cluster.url, namespace) as admin:
        admin.create_topic("spread", read_queues=16, write_queues=16)
    with Producer("pg", redis_cluster.url, namespace=namespace) as producer:
        route = producer._core.route("spread")
        per_node: dict[str, int] = {}
        for node in route.nodes.values():
            per_node[node] = per_node.get(node, 0) + 1
        assert len(per_node) == 3, per_node
        results = [producer.send(Message("spread", b"x")) for _ in range(48)]
    client = raw_client(redis_cluster.url)
    keys = owned(Connection("memory://", namespace)).keys  # key names only: no cluster client to leave open
    try:
        for r in results[:16]:  # each message is where its queue's slot says
            node = client.get_node_from_key(keys.queue("spread", r.message_queue.queue_id).log)
            assert f"{node.host}:{node.port}" == route.nodes[r.message_queue]
    finally:
        client.close()


def test_a_cross_slot_script_call_fails_loudly(redis_cluster, namespace: str) -> None:
    conn = owned(Connection(redis_cluster.url, namespace))
    keys = [conn.keys.queue("a", 0).meta, conn.keys.queue("b", 1).log]
    try:
        with pytest.raises(Exception, match=r"(?i)cross|slot"):
            scripts.run(conn.client, "queue-stats", keys, [])
    finally:
        conn.close()
