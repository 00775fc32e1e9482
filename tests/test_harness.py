"""The test harness itself: real redis-server processes, AOF restarts, pause, and the 3-master cluster."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from tests.servers import NO_RETRY, RedisClusterProcs, RedisServer, free_port

ROOT = Path(__file__).resolve().parent.parent


def _alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (a zombie left unreaped by its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone_soon(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_free_port_with_bus_leaves_both_ports_bindable() -> None:
    port = free_port(with_bus=True)
    for p in (port, port + 10000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # raises if taken


def test_standalone_set_get(redis_server: RedisServer, namespace: str) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert _alive(redis_server.pid)
    with redis.Redis.from_url(redis_server.url) as client:
        client.set(f"{namespace}:k", b"v")
        assert client.get(f"{namespace}:k") == b"v"
    with redis_server.client() as client:
        assert client.get(f"{namespace}:k") == b"v"


def test_password_goes_into_url_and_is_required() -> None:
    with RedisServer(password="s3cret") as server:
        assert server.url == f"redis://:s3cret@127.0.0.1:{server.port}/0"
        with redis.Redis.from_url(server.url) as client:
            assert client.ping()
        anonymous = redis.Redis(host="127.0.0.1", port=server.port, retry=NO_RETRY)
        with anonymous, pytest.raises(redis.AuthenticationError):
            anonymous.get("k")


@pytest.mark.fault
def test_aof_keeps_key_across_restart(aof_server: RedisServer, namespace: str) -> None:
    port, old_pid = aof_server.port, aof_server.pid
    with aof_server.client() as client:
        client.set(f"{namespace}:k", b"kept")
    aof_server.restart()
    assert (aof_server.port, aof_server.pid != old_pid) == (port, True)
    assert not _alive(old_pid)
    with aof_server.client() as client:
        assert client.get(f"{namespace}:k") == b"kept"


@pytest.mark.fault
def test_aof_keeps_key_across_sigkill(aof_server: RedisServer, namespace: str) -> None:
    with aof_server.client() as client:
        client.set(f"{namespace}:k", b"fsynced")
    old_pid = aof_server.pid
    aof_server.kill()
    assert not _alive(old_pid) and not aof_server.running
    with aof_server.probe() as client, pytest.raises(redis.ConnectionError):
        client.ping()
    aof_server.start()
    with aof_server.client() as client:
        assert client.get(f"{namespace}:k") == b"fsynced"


@pytest.mark.fault
def test_pause_hangs_the_server_and_resume_wakes_it(aof_server: RedisServer) -> None:
    with aof_server.client(socket_timeout=0.3, retry=NO_RETRY) as client:
        assert client.ping()
        aof_server.pause()
        with pytest.raises(redis.TimeoutError):
            client.ping()
        aof_server.resume()
    with aof_server.client(socket_timeout=2) as client:
        assert client.ping()


def test_start_failure_raises_with_the_log_tail() -> None:
    server = RedisServer(extra_args=["--no-such-directive", "1"])
    with pytest.raises(RuntimeError, match="no-such-directive"):
        server.start()
    assert not server.running
    server.cleanup()
    assert not os.path.exists(server.workdir)


def test_missing_binary_says_run_make_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tests.servers.shutil.which", lambda name: None)
    with pytest.raises(RuntimeError, match="make test"):
        RedisServer().start()


@pytest.mark.parametrize("ending", ["return", "os._exit"])
def test_no_server_outlives_its_python_process(ending: str) -> None:
    """atexit kills a server left running; PR_SET_PDEATHSIG covers a hard exit that skips atexit."""
    exit_stmt = "os._exit(0)" if ending == "os._exit" else "pass"
    script = (
        "import os, sys\n"
        "from tests.servers import RedisServer\n"
        "server = RedisServer().start()\n"
        "print(server.pid, flush=True)\n"
        f"{exit_stmt}\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[0])
    assert _gone_soon(pid), f"redis-server {pid} outlived its parent"


@pytest.mark.cluster
def test_cluster_has_three_masters_covering_every_slot(redis_cluster: RedisClusterProcs, namespace: str) -> None:
    assert redis_cluster.url == "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in redis_cluster.ports)
    with redis_cluster.nodes[0].client() as node:
        shards = node.execute_command("CLUSTER", "SLOTS")
    owners = {int(shard[2][1]) for shard in shards}
    covered = sum(int(shard[1]) - int(shard[0]) + 1 for shard in shards)
    assert owners == set(redis_cluster.ports)
    assert covered == 16384
    with redis_cluster.client() as client:
        keys = [f"{namespace}:{i}" for i in range(30)]
        for k in keys:
            client.set(k, k)
        assert [client.get(k) for k in keys] == [k.encode() for k in keys]
        homes = {client.get_node_from_key(k).port for k in keys}
    assert homes == set(redis_cluster.ports)  # 30 keys land on all three masters


def _key_on(client: redis.RedisCluster, port: int, prefix: str) -> str:
    """A key whose slot master ``port`` owns."""
    for i in range(10_000):
        key = f"{prefix}:{i}"
        if client.get_node_from_key(key).port == port:  # type: ignore[no-untyped-call]
            return key
    raise AssertionError(f"no key found for port {port}")


@pytest.mark.cluster
@pytest.mark.fault
def test_stop_node_leaves_the_others_serving_and_start_node_heals(fresh_cluster: RedisClusterProcs, namespace: str) -> None:
    ports = fresh_cluster.ports
    with fresh_cluster.client() as client:
        keys = {p: _key_on(client, p, namespace) for p in ports}
        for p, k in keys.items():
            client.set(k, str(p))

        fresh_cluster.stop_node(0)
        with fresh_cluster.nodes[0].probe() as down, pytest.raises(redis.ConnectionError):
            down.ping()
        for p in ports[1:]:
            assert client.get(keys[p]) == str(p).encode()
            client.set(keys[p], "after-stop")
            assert client.get(keys[p]) == b"after-stop"
        with fresh_cluster.nodes[1].client() as survivor:
            assert survivor.cluster("info")["cluster_state"] == "ok"  # full coverage is not required

    fresh_cluster.start_node(0)
    for node in fresh_cluster.nodes:
        with node.probe() as c:
            info = c.cluster("info")
        assert (info["cluster_state"], int(info["cluster_slots_ok"]), int(info["cluster_size"])) == ("ok", 16384, 3)
    with fresh_cluster.client() as client:
        assert client.get(keys[ports[0]]) is None  # no AOF in the cluster: node 0 restarted empty
        client.set(keys[ports[0]], "back")
        assert client.get(keys[ports[0]]) == b"back"
        assert client.get(keys[ports[1]]) == b"after-stop"
