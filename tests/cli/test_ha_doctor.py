"""``mq doctor`` on real servers: eviction policy, persistence, replicas, sentinel quorum, cluster, ACL."""

from __future__ import annotations

import logging
import time

import pytest

from mq.cli.main import main
from mq.operator.doctor import FAIL, OK, WARN, Finding, check
from mq.operator.security import acl_setuser_args
from scheduler import BrokerService, healthy_brokers
from tests.servers import RedisClusterProcs, RedisServer, SentinelProcs


def _by_check(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.check.split(" [")[0], []).append(f)
    return out


def test_eviction_policy_fails_and_the_command_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with RedisServer(extra_args=["--maxmemory-policy", "allkeys-lru"]) as server:
        assert main(["doctor", "--url", server.url]) == 1
        out = capsys.readouterr().out
        assert "FAIL maxmemory-policy: allkeys-lru" in out
        assert "WARN persistence: AOF off" in out
        assert "WARN replicas: none" in out
        assert "OK   version: Redis 7" in out and "WAIT" in out


def test_aof_on_is_ok_and_a_plain_server_exits_0(aof_server: RedisServer, capsys: pytest.CaptureFixture[str]) -> None:
    found = _by_check(check(aof_server.url))
    assert [f.level for f in found["persistence"]] == [OK] and "appendfsync always" in found["persistence"][0].text
    assert [f.level for f in found["maxmemory-policy"]] == [OK]
    assert main(["doctor", "--url", aof_server.url]) == 0  # WARNs (no replica) do not fail


@pytest.mark.ha
@pytest.mark.slow
def test_healthy_replicated_sentinel_store_is_all_ok(capsys: pytest.CaptureFixture[str]) -> None:
    with SentinelProcs(extra_args=["--appendonly", "yes"]) as topology:
        findings = check(topology.url)
        assert {f.level for f in findings} == {OK}, [str(f) for f in findings]
        found = _by_check(findings)
        assert "online" in found["replicas"][0].text and found["sentinel quorum"][0].level == OK
        assert main(["doctor", "--url", topology.url]) == 0
        # two of three sentinels gone: no majority can authorise a failover
        topology.sentinels[0].stop()
        topology.sentinels[1].stop()
        found = _by_check(check(topology.url))
        assert found["sentinel quorum"][0].level == FAIL
        assert any("unreachable" in f.text for f in found["sentinel"])


def test_user_without_config_gets_unknown_never_a_crash(redis_server: RedisServer, namespace: str) -> None:
    user = f"app-{namespace}"
    with redis_server.client() as admin:
        admin.execute_command("ACL", "SETUSER", user, *acl_setuser_args(namespace, "client", "app-pw"), "+info")
        try:
            url = f"redis://{user}:app-pw@127.0.0.1:{redis_server.port}/0"
            found = _by_check(check(url, namespace))
            assert found["maxmemory-policy"][0].level == WARN and "unknown" in found["maxmemory-policy"][0].text
            assert found["persistence"][0].level == WARN  # from INFO: AOF is off on this server
            assert found["acl"][0].level == WARN and "unknown" in found["acl"][0].text
            # an admin checks that user's commands: all there; a user without WAIT is reported
            assert _by_check(check(redis_server.url, namespace, acl_user=user))["acl"][0].level == OK
            admin.execute_command("ACL", "SETUSER", user, "-wait")
            acl = _by_check(check(redis_server.url, namespace, acl_user=user))["acl"][0]
            assert acl.level == FAIL and "wait" in acl.text.split(": ")[1].split(" (")[0].split(", ")
        finally:
            admin.execute_command("ACL", "DELUSER", user)


def test_user_without_info_or_config_gets_unknown(redis_server: RedisServer, namespace: str) -> None:
    user = f"bare-{namespace}"
    with redis_server.client() as admin:
        admin.execute_command("ACL", "SETUSER", user, *acl_setuser_args(namespace, "client", "pw"))
        try:
            findings = check(f"redis://{user}:pw@127.0.0.1:{redis_server.port}/0", namespace)
            assert all(f.level == WARN and "unknown" in f.text for f in findings), [str(f) for f in findings]
        finally:
            admin.execute_command("ACL", "DELUSER", user)


@pytest.mark.cluster
def test_cluster_without_replicas_warns_per_master(redis_cluster: RedisClusterProcs) -> None:
    found = _by_check(check(redis_cluster.url))
    assert found["cluster"][0].level == OK and "16384/16384" in found["cluster"][0].text
    assert len(found["replicas"]) == 3 and {f.level for f in found["replicas"]} == {WARN}


@pytest.mark.cluster
@pytest.mark.ha
@pytest.mark.slow
def test_replicated_cluster_ok_then_uncovered_slots_fail(replicated_cluster: RedisClusterProcs) -> None:
    found = _by_check(check(replicated_cluster.url))
    assert found["cluster"][0].level == OK
    assert len(found["replicas"]) == 3 and {f.level for f in found["replicas"]} == {OK}
    # a master and its replica gone: its slots are served by nobody
    victim = 0  # created as a master
    replicated_cluster.nodes[replicated_cluster.replica_of(victim)].kill()
    replicated_cluster.nodes[victim].kill()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = _by_check(check(replicated_cluster.url))
        if found["cluster"][0].level == FAIL:
            break
        time.sleep(0.5)
    assert found["cluster"][0].level == FAIL and "slots served" in found["cluster"][0].text


def test_broker_logs_checks_at_start_and_check_fails_on_a_fail(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with RedisServer(extra_args=["--maxmemory-policy", "volatile-lru"]) as server:
        with caplog.at_level(logging.INFO, logger="scheduler"), BrokerService(server.url, "mq"):
            assert main(["broker", "--check", "--url", server.url]) == 1  # healthy, but the store check FAILs
            assert "FAIL maxmemory-policy: volatile-lru" in capsys.readouterr().out
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert any("maxmemory-policy: volatile-lru" in m for m in errors)
        infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert any("WARN persistence: AOF off" in m for m in infos)  # a dev Redis does not warn at every start
        server.client().config_set("maxmemory-policy", "noeviction")
        with BrokerService(server.url, "mq"):
            assert main(["broker", "--check", "--url", server.url]) == 0


def test_a_failing_check_never_keeps_the_broker_from_starting(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import mq.operator.doctor

    def broken(*args: object, **kwargs: object) -> list[Finding]:
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(mq.operator.doctor, "check", broken)
    with caplog.at_level(logging.WARNING, logger="scheduler"), BrokerService(redis_server.url, namespace) as service:
        assert service.id in healthy_brokers(redis_server.url, namespace)
    assert any("store checks could not run: probe exploded" in r.getMessage() for r in caplog.records)
