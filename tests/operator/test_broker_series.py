"""The broker service's series the operator kit's dashboard and alerts need besides lag and backlogs:
a group's consumed messages (its rate out) and its live members (the "no consumer" alert)."""

from __future__ import annotations

import pathlib

from mq import Message, MessageQueue, Producer
from mq.store import Store
from mq.store.connection import Connection
from scheduler.metrics import serve_metrics
from tests.helpers import admin_once
from tests.leaks import owned
from tests.operator.exporters import scrape
from tests.procs import ConsumerProc, wait_for
from tests.servers import free_port


def _values(port: int, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for f in scrape("127.0.0.1", port) for s in f.samples if s.name == name}


def test_group_consumed_messages_sums_committed_offsets(backend_url, namespace: str) -> None:
    url = backend_url
    admin_once(url, namespace).create_topic("C", read_queues=2, write_queues=2)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(10):
            producer.send(Message("C", b"%d" % i), queue=MessageQueue("C", "broker-a", i % 2))
    store = owned(Store(Connection(url, namespace)))
    store.commit_offsets("g", {MessageQueue("C", "broker-a", 0): 2, MessageQueue("C", "broker-a", 1): 5})
    port = free_port()
    with serve_metrics(port, url, namespace):
        assert _values(port, "rocketredis_group_consumed_messages") == {(("group", "g"), ("topic", "C")): 7}
        # an offset reset moves it back: a gauge, so rate() does not read the fall as a restart
        store.commit_offsets("g", {MessageQueue("C", "broker-a", 1): 1})
        assert _values(port, "rocketredis_group_consumed_messages") == {(("group", "g"), ("topic", "C")): 3}


def test_group_clients_counts_members_that_heartbeat(backend_url, namespace: str, tmp_path: pathlib.Path) -> None:
    """A killed consumer stays in the group's registry until the broker service's clean-up removes it;
    it stops counting once its heartbeat is older than the timeout (6 s), with no broker service running."""
    url = backend_url
    admin_once(url, namespace).create_topic("H", read_queues=2, write_queues=2)
    port = free_port()
    with serve_metrics(port, url, namespace):
        clients = lambda: _values(port, "rocketredis_group_clients").get((("group", "hb"),))  # noqa: E731
        procs = [ConsumerProc(url, namespace, "hb", "H", tmp_path / f"c{i}.log") for i in range(2)]
        try:
            wait_for(lambda: clients() == 2, 60, "both consumers to heartbeat")
            procs[0].kill()
            wait_for(lambda: clients() == 1, 30, "the killed consumer's heartbeat to age out")
            procs[1].stop()  # a clean shutdown leaves the registry at once
            assert clients() == 0
        finally:
            for p in procs:
                if p.proc.poll() is None:
                    p.kill()
