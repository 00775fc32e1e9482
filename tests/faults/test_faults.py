"""Faults: a stopped cluster master, an unreachable Redis, a Redis restart with AOF."""

from __future__ import annotations

import time

import pytest

from mq import Admin, Message, Producer
from mq.errors import MQBrokerError
from tests.helpers import admin_once
from tests.leaks import owned

pytestmark = pytest.mark.fault


@pytest.mark.cluster
@pytest.mark.slow
def test_latency_fault_tolerance_avoids_a_stopped_master(fresh_cluster, namespace: str) -> None:
    url = fresh_cluster.url
    admin_once(url, namespace).create_topic("ft", read_queues=16, write_queues=16)
    with Producer("pg", url, namespace=namespace, send_latency_fault_enable=True) as producer:
        route = producer._core.route("ft")
        nodes = sorted(set(route.nodes.values()))
        assert len(nodes) == 3
        victim = fresh_cluster.nodes[0]
        victim_node = f"127.0.0.1:{victim.port}"
        assert victim_node in nodes
        victim.kill()

        served: list[str] = []
        for i in range(200):
            started = time.monotonic()
            r = producer.send(Message("ft", b"%d" % i))  # must not raise
            # no speed bound: the 3 s budget plus a margin for a loaded machine; a send that ignored it fails this
            assert time.monotonic() - started < 3.0 + 2.0, "a send exceeded its 3 s budget"
            served.append(route.nodes[r.message_queue])
        assert victim_node not in served
        assert set(served) == set(nodes) - {victim_node}
        assert not producer._fault.is_available(victim_node)


def test_unreachable_redis_fails_fast_then_recovers(aof_server, namespace: str) -> None:
    url = aof_server.url
    admin_once(url, namespace).create_topic("down", read_queues=4, write_queues=4)
    with Producer("pg", url, namespace=namespace) as producer:
        before = producer.send(Message("down", b"before", keys="k"))
        aof_server.stop()
        started = time.monotonic()
        with pytest.raises(MQBrokerError):
            producer.send(Message("down", b"lost?"), timeout_s=3.0)
        assert time.monotonic() - started < 3.0 + 2.0  # its 3 s budget, a margin for load: not a reply timeout's wait
        future = producer.send_async(Message("down", b"async while down"))
        with pytest.raises(MQBrokerError):
            future.result(timeout=10)

        aof_server.start()  # AOF keeps what was acknowledged
        after = producer.send(Message("down", b"after", keys="k"))  # same producer, no restart
    stored = {m.msg_id for m in admin_once(url, namespace).query_messages_by_key("down", "k")}
    assert stored == {before.msg_id, after.msg_id}


def test_acknowledged_sends_survive_kill_9_of_redis(aof_server, namespace: str) -> None:
    url = aof_server.url
    admin_once(url, namespace).create_topic("durable", read_queues=4, write_queues=4)
    with Producer("pg", url, namespace=namespace) as producer:
        acked = [producer.send(Message("durable", b"%d" % i)) for i in range(300)]
        aof_server.kill()  # SIGKILL: appendfsync always in the fixture
        aof_server.start()
        more = producer.send(Message("durable", b"after restart"))
    admin = owned(Admin(url, namespace))
    for r in acked[::17] + [acked[-1], more]:
        found = admin.query_message("durable", r.msg_id)
        assert found is not None and found.queue_offset == r.queue_offset
    assert sum(s.max_offset for s in admin.topic_status("durable").values()) == 301
