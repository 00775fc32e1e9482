"""Recall through ``mq proxy`` with the official clients (``rocketmq-python-client`` 5.1.2 and
``rocketmq-client-nodejs`` 1.0.8 send ``RecallMessage``): the endpoint's handles are the library's, so
either side recalls what the other sent."""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Iterator

import pytest

from mq import Admin, Producer
from mq.keys import Keys
from scheduler import BrokerService
from tests.helpers import raw_client
from tests.leaks import owned
from tests.procs import wait_for
from tests.proxy_clients import ProxyProcess, rr_client, run_node
from tests.servers import RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def endpoint(redis_server: RedisServer, namespace: str, tmp_path) -> Iterator[tuple[Admin, ProxyProcess]]:  # type: ignore[no-untyped-def]
    admin = owned(Admin(redis_server.url, namespace))
    admin.create_topic("later", read_queues=2, write_queues=2)
    with BrokerService(redis_server.url, namespace):
        proxy = ProxyProcess(redis_server.url, namespace, tmp_path / "proxy.log")
        try:
            yield admin, proxy
        finally:
            proxy.stop()


def test_official_client_recalls_through_the_endpoint(
    endpoint: tuple[Admin, ProxyProcess], redis_server: RedisServer, namespace: str
) -> None:
    admin, proxy = endpoint
    later, soon = int(time.time()) + 60, int(time.time()) + 2  # the client's delivery_timestamp is in seconds
    spec = [
        {"body": b"recalled twice".hex(), "delivery_timestamp": later, "recalls": 2},
        {"body": b"recalled by mq".hex(), "delivery_timestamp": later},
        {"body": b"due soon".hex(), "delivery_timestamp": soon},
    ]
    sent, recalled, again, by_mq, due = rr_client("produce", proxy.endpoint, "later", json.dumps(spec))
    assert sent["ok"] and sent["recall_handle"].startswith("r1.")
    assert recalled == {"ok": True, "recalled": sent["message_id"]}
    assert (again["ok"], again.get("code")) == (False, 40400), again  # NOT_FOUND: no longer scheduled
    assert "not scheduled" in again["text"]
    wait_for(
        lambda: [m.msg_id for q in range(2) for m in admin.messages("later", q, 0)] == [due["message_id"]], 30, "the one due soon"
    )
    with Producer("pg", redis_server.url, namespace=namespace) as producer:
        assert producer.recall(by_mq["recall_handle"]) is True  # a handle the endpoint gave, recalled by the library
        assert producer.recall(due["recall_handle"]) is False  # delivered already
    client = raw_client(redis_server.url)
    try:
        assert sum(client.zcard(Keys(namespace).queue("later", q).timer) for q in range(2)) == 0
    finally:
        client.close()
    assert [m.msg_id for q in range(2) for m in admin.messages("later", q, 0)] == [due["message_id"]]


#: A program of ours on the official Node.js client (``rocketmq-client-nodejs`` 1.0.8 sends
#: ``RecallMessage``): send one message due in a minute, recall it twice, one JSON line each.
NODE_RECALL = """
const { Producer } = require('rocketmq-client-nodejs');
async function main() {
  const producer = new Producer({ endpoints: 'ENDPOINT' });
  await producer.startup();
  const receipt = await producer.send({
    topic: 'later', body: Buffer.from('from node'), deliveryTimestamp: new Date(Date.now() + 60000),
  });
  console.log(JSON.stringify({ messageId: receipt.messageId, recallHandle: receipt.recallHandle }));
  for (let i = 0; i < 2; i++) {
    try {
      const recalled = await producer.recallMessage('later', receipt.recallHandle);
      console.log(JSON.stringify({ ok: true, messageId: recalled.messageId }));
    } catch (e) {
      console.log(JSON.stringify({ ok: false, error: String(e.message) }));
    }
  }
  await producer.shutdown();
}
main().catch((e) => { console.error(e); process.exit(1); });
"""


def test_official_nodejs_client_recalls_through_the_endpoint(
    endpoint: tuple[Admin, ProxyProcess], redis_server: RedisServer, namespace: str, tmp_path: pathlib.Path
) -> None:
    _, proxy = endpoint
    done = run_node(tmp_path, NODE_RECALL.replace("ENDPOINT", proxy.endpoint))
    assert done.returncode == 0, done.stdout + done.stderr
    sent, recalled, again = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sent["recallHandle"].startswith("r1.")
    assert recalled == {"ok": True, "messageId": sent["messageId"]}
    assert again["ok"] is False and "not scheduled" in again["error"] and "40400" in again["error"]
    client = raw_client(redis_server.url)
    try:  # gone from the timer: nothing left to deliver
        assert sum(client.zcard(Keys(namespace).queue("later", q).timer) for q in range(2)) == 0
    finally:
        client.close()
