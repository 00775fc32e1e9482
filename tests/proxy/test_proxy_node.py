"""The official RocketMQ 5 Node.js client (``rocketmq-client-nodejs`` from npm) through ``mq proxy``:
its own example programs (Producer.cjs, SimpleConsumer.cjs) with only endpoint, topic and group
filled in, each in a node process of its own."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from mq import Admin
from mq.consumer.types import ConsumeFromWhere
from tests.leaks import owned
from tests.proxy_clients import ProxyProcess, example, run_node
from tests.servers import RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def proxy(redis_server: RedisServer, tmp_path: pytest.TempPathFactory) -> Iterator[tuple[ProxyProcess, Admin]]:
    namespace = f"pn{uuid.uuid4().hex[:8]}"
    admin = owned(Admin(redis_server.url, namespace))
    proc = ProxyProcess(redis_server.url, namespace, tmp_path / "proxy.log")  # type: ignore[operator]
    try:
        yield proc, admin
    finally:
        proc.stop()
        admin.close()


def test_node_producer_and_simple_consumer_round_trip(
    proxy: tuple[ProxyProcess, Admin], tmp_path: pytest.TempPathFactory
) -> None:
    endpoint_proc, admin = proxy
    admin.create_topic("TopicNode", read_queues=4, write_queues=4)
    admin.create_group("node-group", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    common = {"'127.0.0.1:8081'": f"'{endpoint_proc.endpoint}'", "require('..')": "require('rocketmq-client-nodejs')"}
    produced = run_node(tmp_path, example("node/Producer.cjs", common | {"topic: 'TopicTest'": "topic: 'TopicNode'"}))  # type: ignore[arg-type]
    assert produced.returncode == 0, produced.stdout + produced.stderr
    [msg_id] = re.findall(r"messageId: '([0-9A-F]+)'", produced.stdout)
    [stored] = [m for q in range(4) for m in admin.messages("TopicNode", q, 0)]
    assert stored.msg_id == msg_id and stored.tags == "nodejs-demo"
    assert b"rocketmq-client-nodejs world" in stored.body

    consumer = example(
        "node/SimpleConsumer.cjs",
        common | {"'nodejs-demo-group'": "'node-group'", "set('TopicTest', 'nodejs-demo')": "set('TopicNode', 'nodejs-demo')"},
    )
    consumed = run_node(tmp_path, consumer)  # type: ignore[arg-type]
    assert consumed.returncode == 0, consumed.stdout + consumed.stderr
    assert "got 1 messages" in consumed.stdout, consumed.stdout + consumed.stderr
    assert "rocketmq-client-nodejs world" in consumed.stdout and msg_id in consumed.stdout
    again = run_node(tmp_path, consumer)  # type: ignore[arg-type]
    assert "got 0 messages" in again.stdout, again.stdout + again.stderr  # it was acked
