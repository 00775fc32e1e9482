"""Security: least-privilege ACL users, TLS (rediss://), and secrets kept out of output."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from mq import Admin, ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from mq.errors import MQBrokerError
from mq.security import acl_setuser_args
from tests.procs import ROOT, wait_for
from tests.servers import RedisServer, free_port


def _round_trip(url: str, ns: str) -> list[bytes]:
    """Create a topic, send 5 messages and consume them with a push consumer; returns the bodies."""
    Admin(url, ns).create_topic("sec", read_queues=2, write_queues=2)
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
        time.sleep(0.3)
        for i in range(5):
            producer.send(Message("sec", b"%d" % i))
        wait_for(lambda: len(got) >= 5, 10, "5 messages over the restricted connection")
    return sorted(got)


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
        Admin(url, namespace).create_topic("weak", read_queues=1, write_queues=1)
        with Producer("p", weak, namespace=namespace) as producer, pytest.raises(MQBrokerError) as info:
            producer.send(Message("weak", b"x"))
        assert "permission" in str(info.value) and "evalsha" in str(info.value)
        assert "weak-secret" not in str(info.value)

        other = f"redis://other-{namespace}:o@127.0.0.1:{port}/0"  # another namespace's user: no access here
        with pytest.raises(MQBrokerError, match="permission"):
            Admin(other, namespace).topics()
    finally:
        for user in ("app", "weak", "other"):
            admin_conn.execute_command("ACL", "DELUSER", f"{user}-{namespace}")
        admin_conn.close()


@pytest.fixture
def tls_server(tmp_path) -> Iterator[tuple[RedisServer, int, str]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    tls_port = free_port()
    args = ["--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"]  # fmt: skip
    with RedisServer(extra_args=args, password="tls-pass") as server:  # plain port only for the harness probe
        yield server, tls_port, str(cert)


def test_tls_round_trip(tls_server, namespace: str) -> None:
    _, tls_port, cert = tls_server
    url = f"rediss://:tls-pass@127.0.0.1:{tls_port}/0?ssl_ca_certs={cert}"
    assert _round_trip(url, namespace) == [b"%d" % i for i in range(5)]
    untrusted = f"rediss://:tls-pass@127.0.0.1:{tls_port}/0?socket_connect_timeout=2"  # the self-signed cert is not trusted
    with pytest.raises(MQBrokerError) as info:
        Admin(untrusted, namespace).topics()
    assert "tls-pass" not in str(info.value)


def test_secrets_stay_out_of_cli_output(redis_server, namespace: str) -> None:
    conn = redis_server.client()
    conn.execute_command("ACL", "SETUSER", f"cli-{namespace}", *acl_setuser_args(namespace, "admin", "cli-secret-123"))
    try:
        url = f"redis://cli-{namespace}:cli-secret-123@127.0.0.1:{redis_server.port}/0"
        outputs = []
        for args in (["demo"], ["topic", "list"], ["send", "nosuch", "x"], ["broker", "--check"]):
            r = subprocess.run([sys.executable, "-m", "mq", *args, "--url", url, "--namespace", namespace],
                               capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
            outputs.append(r.stdout + r.stderr)
        wrong = url.replace("cli-secret-123", "wrong-secret-456")
        r = subprocess.run([sys.executable, "-m", "mq", "topic", "list", "--url", wrong, "--namespace", namespace],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
        outputs.append(r.stdout + r.stderr)
    finally:
        conn.execute_command("ACL", "DELUSER", f"cli-{namespace}")
        conn.close()
    assert "redis://cli-" in outputs[0]  # the demo names its (masked) URL
    for out in outputs:
        assert "cli-secret-123" not in out and "wrong-secret-456" not in out
    assert r.returncode == 1 and "mq: error" in r.stderr
