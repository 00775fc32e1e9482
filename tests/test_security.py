"""Security: least-privilege ACL users, TLS (rediss://), and secrets kept out of output."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    LocalTransactionState,
    Message,
    Producer,
    PushConsumer,
    SelectMessageQueueByHash,
    SimpleConsumer,
    TransactionProducer,
)
from mq.errors import MQBrokerError
from mq.operator.security import CHECK_COMMANDS, SCRIPT_COMMANDS, acl_setuser_args
from mq.store import Store
from mq.store.connection import Connection
from tests.helpers import admin_once
from tests.leaks import owned
from tests.procs import ROOT, wait_for
from tests.servers import RedisServer, free_port


def _round_trip(url: str, ns: str) -> list[bytes]:
    """Create a topic, send 5 messages and consume them with a push consumer; returns the bodies."""
    admin_once(url, ns).create_topic("sec", read_queues=2, write_queues=2)
    got: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("sec-group", url, namespace=ns)
    consumer.subscribe("sec", "*")
    consumer.register_message_listener(listener)
    with consumer, Producer("sec-producer", url, namespace=ns) as producer:
        wait_for(lambda: any(q.topic == "sec" for q in consumer.assigned_queues()), 10, "the consumer's queues")
        for i in range(5):
            producer.send(Message("sec", b"%d" % i))
        wait_for(lambda: len(got) >= 5, 10, "5 messages over the restricted connection")
    return sorted(got)


def test_script_commands_list_every_command_of_the_lua_scripts() -> None:
    used: set[str] = set()
    for script in (ROOT / "mq" / "store" / "lua").rglob("*.lua"):
        used |= {c.lower() for c in re.findall(r"redis\.p?call\(\s*'([A-Za-z]+)'", script.read_text())}
    assert len(used) > 10 and used <= set(SCRIPT_COMMANDS), sorted(used - set(SCRIPT_COMMANDS))


def test_least_privilege_acl_works_and_a_missing_permission_is_named(redis_server, namespace: str) -> None:
    admin_conn = redis_server.client()
    admin_conn.execute_command("ACL", "SETUSER", f"app-{namespace}", *acl_setuser_args(namespace, "client", "app-secret"))
    rules = acl_setuser_args(namespace, "client", "weak-secret")
    admin_conn.execute_command("ACL", "SETUSER", f"weak-{namespace}", *[r for r in rules if r != "+evalsha"])
    admin_conn.execute_command("ACL", "SETUSER", f"other-{namespace}", *acl_setuser_args(namespace + "x", "client", "o"))
    port = redis_server.port
    try:
        url = f"redis://app-{namespace}:app-secret@127.0.0.1:{port}/0"
        assert _round_trip(url, namespace) == [b"%d" % i for i in range(5)]

        weak = f"redis://weak-{namespace}:weak-secret@127.0.0.1:{port}/0"
        admin_once(url, namespace).create_topic("weak", read_queues=1, write_queues=1)
        with Producer("p", weak, namespace=namespace) as producer, pytest.raises(MQBrokerError) as info:
            producer.send(Message("weak", b"x"))
        assert "permission" in str(info.value) and "evalsha" in str(info.value)
        assert "weak-secret" not in str(info.value)

        other = f"redis://other-{namespace}:o@127.0.0.1:{port}/0"  # another namespace's user: no access here
        with pytest.raises(MQBrokerError, match="permission"):
            admin_once(other, namespace).topics()
    finally:
        for user in ("app", "weak", "other"):
            admin_conn.execute_command("ACL", "DELUSER", f"{user}-{namespace}")
        admin_conn.close()


def test_every_feature_runs_under_the_client_role(redis_server, namespace: str) -> None:
    """The broker service, every consumer kind, transactions, metrics and admin reads, run as a user
    with exactly the ``client`` rules: Redis's ACL log must show no command or key it refused."""
    from scheduler import BrokerConfig, BrokerService
    from scheduler.metrics import StoreCollector

    admin_conn = redis_server.client()
    user = f"full-{namespace}"
    admin_conn.execute_command("ACL", "SETUSER", user, *acl_setuser_args(namespace, "client", "full-secret"))
    url = f"redis://{user}:full-secret@127.0.0.1:{redis_server.port}/0"
    jobs = ("transaction_check", "retention", "timer_sweep", "cleanup", "stats")
    every_half_second = {f"{job}_interval_s": 0.5 for job in jobs}
    fast = BrokerConfig(message_delay_level="100ms 200ms 300ms", transaction_timeout_s=0.5, **every_half_second)
    got: dict[str, list[tuple[bytes, int]]] = {"A": [], "O": [], "X": []}
    lock = threading.Lock()

    def listener(topic: str, fail_first: bool):  # type: ignore[no-untyped-def]
        def on(msgs, ctx):  # type: ignore[no-untyped-def]
            with lock:
                got[topic].extend((m.body, m.reconsume_times) for m in msgs)
            if fail_first and any(m.body == b"poison" or m.reconsume_times == 0 for m in msgs):
                ctx.delay_level_when_next_consume = 1
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeOrderlyStatus.SUCCESS if topic == "O" else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return on

    def seen(topic: str) -> set[bytes]:
        with lock:
            return {b for b, _ in got[topic]}

    try:
        admin = owned(Admin(url, namespace))
        admin.create_topic("A", read_queues=2, write_queues=2)
        admin.create_topic("O", read_queues=2, write_queues=2, order=True)
        admin.create_topic("S", read_queues=1, write_queues=1)
        admin.create_topic("X", read_queues=1, write_queues=1)
        concurrent = PushConsumer("ga", url, namespace=namespace, max_reconsume_times=1)
        concurrent.subscribe("A", "*")
        concurrent.register_message_listener(listener("A", fail_first=True))
        orderly = PushConsumer("go", url, namespace=namespace)
        orderly.subscribe("O", "*")
        orderly.register_orderly_listener(listener("O", fail_first=False))
        tx_reader = PushConsumer("gx", url, namespace=namespace)
        tx_reader.subscribe("X", "*")
        tx_reader.register_message_listener(listener("X", fail_first=False))
        simple = SimpleConsumer("gs", url, namespace=namespace, subscriptions={"S": "*"}, await_duration_s=0.5)
        commit = LocalTransactionState.COMMIT_MESSAGE
        transactions = TransactionProducer("gt", url, namespace=namespace, checker=lambda msg: commit)
        held = [(concurrent, "A"), (orderly, "O"), (tx_reader, "X")]
        with (
            BrokerService(url, namespace, fast),
            concurrent,
            orderly,
            tx_reader,
            simple,
            transactions,
            Producer("p", url, namespace=namespace) as producer,
        ):
            wait_for(
                lambda: all(any(q.topic == t for q in c.assigned_queues()) for c, t in held),
                10,
                "each push consumer's queues",
            )
            sent = producer.send(Message("A", b"plain", keys=["k1"]))
            producer.send(Message("A", b"later", deliver_time_ms=int(time.time() * 1000) + 300))
            producer.send(Message("A", b"poison"))
            producer.send_batch([Message("A", b"batch-0"), Message("A", b"batch-1")])
            producer.send_async(Message("A", b"async")).result(timeout=10)
            for i in range(4):
                producer.send(Message("O", b"o%d" % i), selector=SelectMessageQueueByHash(), arg="order-1")
            producer.send(Message("S", b"s0"))
            producer.send(Message("S", b"s1"))
            transactions.send_message_in_transaction(Message("X", b"tx"), lambda msg, arg: LocalTransactionState.UNKNOW)
            wanted = {b"plain", b"later", b"poison", b"batch-0", b"batch-1", b"async"}
            wait_for(lambda: seen("A") >= wanted and len(admin.dlq_messages("ga")) == 1, 20, "retries and the DLQ")
            wait_for(lambda: seen("O") == {b"o0", b"o1", b"o2", b"o3"} and seen("X") == {b"tx"}, 20, "orderly and tx")
            received = simple.receive(max_messages=2, invisible_duration_s=10)
            assert sorted(v.body for v in received) == [b"s0", b"s1"]
            simple.ack(received[0])
            simple.change_invisible_duration(received[1], 20)
            assert admin.resend_dlq("ga") == 1
            wait_for(lambda: admin.broker_stats() is not None, 10, "the broker service's stats snapshot")
            names = {m.name for m in StoreCollector(owned(Store(Connection(url, namespace))), 10.0).collect()}
            assert "rocketredis_group_lag" in names and "rocketredis_brokers_healthy" in names
            queue = next(iter(admin.topic_status("A")))
            admin.search_offset(queue, int(time.time() * 1000))
            assert admin.query_message("A", sent.msg_id) is not None
            assert [m.body for m in admin.query_messages_by_key("A", "k1")] == [b"plain"]
            assert admin.consumer_connections("ga") and "ga" in admin.groups()
            assert admin.consumer_progress("ga")
            admin.reset_offset_by_time("gx", "X", int(time.time() * 1000))
            assert admin.discarded_transactions() == []
        admin.close()
        log = [entry for entry in admin_conn.acl_log() if entry.get("username") == user]
        refused = [entry for entry in log if entry.get("object") not in CHECK_COMMANDS]
        assert refused == [], refused  # every command and key the features use is in the client role
        # the broker's start-up store check tried its probes and fell back to "unknown" (mq doctor)
        assert {entry.get("object") for entry in log} <= set(CHECK_COMMANDS) and "config|get" in {e.get("object") for e in log}
    finally:
        admin_conn.execute_command("ACL", "DELUSER", user)
        admin_conn.close()


@pytest.fixture
def tls_server(tmp_path) -> Iterator[tuple[RedisServer, int, str]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    tls_port = free_port()
    args = [
        "--tls-port",
        str(tls_port),
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(cert),
        "--tls-auth-clients",
        "no",
    ]
    with RedisServer(extra_args=args, password="tls-pass") as server:  # plain port only for the harness probe
        yield server, tls_port, str(cert)


def test_tls_round_trip(tls_server, namespace: str) -> None:
    _, tls_port, cert = tls_server
    url = f"rediss://:tls-pass@127.0.0.1:{tls_port}/0?ssl_ca_certs={cert}"
    assert _round_trip(url, namespace) == [b"%d" % i for i in range(5)]
    untrusted = f"rediss://:tls-pass@127.0.0.1:{tls_port}/0?socket_connect_timeout=2"  # the self-signed cert is not trusted
    with pytest.raises(MQBrokerError) as info:
        admin_once(untrusted, namespace).topics()
    assert "tls-pass" not in str(info.value)


def test_secrets_stay_out_of_cli_output(redis_server, namespace: str) -> None:
    conn = redis_server.client()
    conn.execute_command("ACL", "SETUSER", f"cli-{namespace}", *acl_setuser_args(namespace, "admin", "cli-secret-123"))
    try:
        url = f"redis://cli-{namespace}:cli-secret-123@127.0.0.1:{redis_server.port}/0"
        outputs = []
        for args in (["demo"], ["topic", "list"], ["send", "nosuch", "x"], ["broker", "--check"]):
            r = subprocess.run(
                [sys.executable, "-m", "mq", *args, "--url", url, "--namespace", namespace],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=ROOT,
            )
            outputs.append(r.stdout + r.stderr)
        wrong = url.replace("cli-secret-123", "wrong-secret-456")
        r = subprocess.run(
            [sys.executable, "-m", "mq", "topic", "list", "--url", wrong, "--namespace", namespace],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        outputs.append(r.stdout + r.stderr)
    finally:
        conn.execute_command("ACL", "DELUSER", f"cli-{namespace}")
        conn.close()
    assert "redis://cli-" in outputs[0]  # the demo names its (masked) URL
    for out in outputs:
        assert "cli-secret-123" not in out and "wrong-secret-456" not in out
    assert r.returncode == 1 and "mq: error" in r.stderr


def _acl_user(redis_server: RedisServer, name: str, rules: list[str]) -> str:
    conn = redis_server.client()
    conn.execute_command("ACL", "SETUSER", name, *rules)
    conn.close()
    return f"redis://{name}:pw@127.0.0.1:{redis_server.port}/0"


def _drop_users(redis_server: RedisServer, *names: str) -> None:
    conn = redis_server.client()
    for name in names:
        conn.execute_command("ACL", "DELUSER", name)
    conn.close()


def test_the_client_role_cannot_delete_or_rewrite_topic_configs(redis_server: RedisServer, namespace: str) -> None:
    """Finding 5: delete_topic as ``client`` used to HDEL the config and then fail on UNLINK."""
    import redis

    user = f"cl-{namespace}"
    url = _acl_user(redis_server, user, acl_setuser_args(namespace, "client", "pw"))
    try:
        with Admin(url, namespace) as admin, Producer("p", url, namespace=namespace) as producer:
            admin.create_topic("keep", read_queues=1, write_queues=1)  # adding a topic is allowed (HSETNX)
            producer.send(Message("keep", b"x"))
            with pytest.raises(MQBrokerError, match="permission"):
                admin.delete_topic("keep")
            flags_before = redis.Redis.from_url(url).hgetall(f"{{{namespace}:keep:0}}:q")
            with pytest.raises(MQBrokerError, match="permission"):
                admin.update_topic("keep", write_queues=4, perm="r")  # rewriting a config needs the admin role
            assert admin.topic_config("keep").write_queues == 1
            assert redis.Redis.from_url(url).hgetall(f"{{{namespace}:keep:0}}:q") == flags_before  # refused before any write
            store = owned(Store(Connection(url, namespace)))
            assert [m.body for m in store.read("keep", 0, 0, 5)] == [b"x"]
            store.conn.close()
        raw = redis.Redis.from_url(url)
        for command in (
            ("DEL", f"{{{namespace}}}:topics"),
            ("HDEL", f"{{{namespace}}}:topics", "keep"),
            ("HSET", f"{{{namespace}}}:topics", "keep", "{}"),
            ("UNLINK", f"{{{namespace}:keep:0}}:log"),
            ("GET", "outside-the-namespace"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                raw.execute_command(*command)
        raw.close()
        admin_url = _acl_user(redis_server, f"ad-{namespace}", acl_setuser_args(namespace, "admin", "pw"))
        with Admin(admin_url, namespace) as admin:
            admin.delete_topic("keep")
            assert admin.topics() == []
    finally:
        _drop_users(redis_server, user, f"ad-{namespace}")


@pytest.mark.parametrize("bad", ["t*", "t?", "t[ab]", "a\\b", "x^y"])
def test_namespaces_with_glob_characters_are_refused(bad: str) -> None:
    """Finding 6: namespace ``t*`` gave its users ``~{t*}:*``, i.e. every namespace starting with t."""
    from mq.errors import MQClientError

    with pytest.raises(MQClientError, match="glob"):
        acl_setuser_args(bad, "client")
    with pytest.raises(MQClientError, match="glob"):
        Connection("memory://", bad)


def test_a_resource_user_reaches_only_its_topics_and_groups(redis_server: RedisServer, namespace: str) -> None:
    from mq import PullConsumer
    from mq.model.queue import MessageQueue
    from mq.operator.security import resource_acl_args

    admin = owned(Admin(redis_server.url, namespace))
    for topic in ("mine", "theirs"):
        admin.create_topic(topic, read_queues=1, write_queues=1)
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        secret = producer.send(Message("theirs", b"secret", keys=["k"]))
    user = f"res-{namespace}"
    url = _acl_user(redis_server, user, resource_acl_args(namespace, "pw", produce_topics=["mine"], consume={"g-mine": ["mine"]}))
    try:
        consumer = PullConsumer("g-mine", url, namespace=namespace)
        consumer.assign([MessageQueue("mine", "broker-a", 0)])
        with consumer, Producer("p", url, namespace=namespace) as producer:
            consumer.poll(0.2)
            producer.send(Message("mine", b"hello"))
            producer.send(Message("mine", b"later", deliver_time_ms=int(time.time() * 1000) + 60_000))
            with pytest.raises(MQBrokerError, match="permission"):
                producer.send(Message("theirs", b"intrusion"))
            got: list[bytes] = []
            wait_for(lambda: bool(got.extend(m.body for m in consumer.poll(0.5)) or got), 10, "the user's own topic")
            assert got == [b"hello"]
            consumer.commit()
        with Admin(url, namespace) as limited:
            with pytest.raises(MQBrokerError, match="permission"):
                limited.query_message("theirs", secret.msg_id)
            with pytest.raises(MQBrokerError, match="permission"):
                limited.query_messages_by_key("theirs", "k")
            with pytest.raises(MQBrokerError, match="permission"):
                limited.delete_topic("theirs")
        assert admin.query_message("theirs", secret.msg_id) is not None
        other = PullConsumer("g-other", url, namespace=namespace)  # a group it was not given
        other.assign([MessageQueue("mine", "broker-a", 0)])
        with pytest.raises(MQBrokerError, match="permission"), other:
            other.poll(0.5)
            other.commit()
        # its refused start closed the connections it opened (they stayed open until garbage collected)
        server = redis_server.client()
        try:
            wait_for(
                lambda: all(c.get("user") != user for c in server.client_list()), 5, "the refused consumer's connections closed"
            )
        finally:
            server.close()
    finally:
        admin.close()
        _drop_users(redis_server, user)


def test_a_client_losing_the_race_to_create_a_retry_topic_is_not_refused(redis_server: RedisServer, namespace: str) -> None:
    """Two consumers of a group start at once: both see no retry topic, one adds it, the other's add
    finds it there — and must not fall back to rewriting it (a client may not)."""
    from mq.model.topic import TopicConfig

    user = f"race-{namespace}"
    url = _acl_user(redis_server, user, acl_setuser_args(namespace, "client", "pw"))
    try:
        store = owned(Store(Connection(url, namespace)))
        first = TopicConfig("%RETRY%g", read_queues=1, write_queues=1)
        store.ensure_topic(first)
        stale_read = store.topic
        store.topic = lambda name: None  # type: ignore[method-assign]  # it was not there when this one looked
        try:
            store.ensure_topic(TopicConfig("%RETRY%g", read_queues=2, write_queues=2))
        finally:
            store.topic = stale_read  # type: ignore[method-assign]
        assert store.topic("%RETRY%g") == first
        store.conn.close()
    finally:
        _drop_users(redis_server, user)


def test_every_namespace_wide_key_has_a_place_in_the_client_role() -> None:
    """A new ``{ns}:…`` key must be listed as written or only read by clients, or the role refuses it."""
    from mq.keys import Keys
    from mq.operator.security import CLIENT_READ_ONLY_GLOBALS, CLIENT_WRITABLE_GLOBALS

    keys = Keys("ns")
    names = {value.removeprefix("{ns}:") for value in vars(keys).values() if isinstance(value, str) and value.startswith("{ns}:")}
    assert len(names) >= 8 and names == set(CLIENT_WRITABLE_GLOBALS) | set(CLIENT_READ_ONLY_GLOBALS)
    assert not set(CLIENT_WRITABLE_GLOBALS) & set(CLIENT_READ_ONLY_GLOBALS)
