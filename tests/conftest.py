"""Fixtures: real redis-server processes started by the suite on free loopback ports."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.servers import RedisClusterProcs, RedisServer, SentinelProcs

MARKERS = {
    "slow": "takes more than a few seconds",
    "cluster": "needs the 3-master Redis Cluster",
    "fault": "stops, kills or restarts processes",
    "spark": "needs pyspark and Java",
    "ha": "needs a Sentinel topology or a replicated cluster",
}


def pytest_configure(config: pytest.Config) -> None:
    """Register the suite's markers (so ``--strict-markers`` passes without the pyproject list too)."""
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One standalone server for the session (tests keep apart by namespace)."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def aof_server() -> Iterator[RedisServer]:
    """A fresh server with AOF (``appendfsync always``) that a test may stop, kill and restart."""
    with RedisServer(appendonly=True) as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterProcs]:
    """A 3-master cluster for the session."""
    with RedisClusterProcs() as cluster:
        yield cluster


@pytest.fixture
def fresh_cluster() -> Iterator[RedisClusterProcs]:
    """A 3-master cluster of the test's own, for tests that stop nodes."""
    with RedisClusterProcs() as cluster:
        yield cluster


@pytest.fixture
def sentinel() -> Iterator[SentinelProcs]:
    """A Sentinel topology of the test's own: 1 master, 1 replica, 3 sentinels (1 s down-after)."""
    with SentinelProcs() as topology:
        yield topology


@pytest.fixture
def replicated_cluster() -> Iterator[RedisClusterProcs]:
    """A cluster of the test's own: 3 masters with 1 replica each."""
    with RedisClusterProcs(replicas=1) as cluster:
        yield cluster


@pytest.fixture
def namespace() -> str:
    """A namespace no other test uses: ``t`` and 8 hex digits."""
    return "t" + uuid.uuid4().hex[:8]


@pytest.fixture(params=["standalone", pytest.param("cluster", marks=pytest.mark.cluster)])
def backend_url(request: pytest.FixtureRequest) -> str:
    """The URL of the standalone server, then of the cluster: behaviour tests run on both."""
    if request.param == "standalone":
        return str(request.getfixturevalue("redis_server").url)
    return str(request.getfixturevalue("redis_cluster").url)


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (``@pytest.mark.anyio``) run on asyncio, the loop ``mq.aio`` is built for (D39)."""
    return "asyncio"
