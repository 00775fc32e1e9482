"""Fixtures: real redis-server processes started by the suite on free loopback ports."""

from __future__ import annotations

import gc
import inspect
import pathlib
import signal
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mq import Admin
from tests.apis import api  # noqa: F401 - the both-APIs fixture, for every test module
from tests.leaks import ConnectionWatch, close_owned
from tests.procs import ConsumerProc
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


#: Names a module that needs a server holds: the server fixtures (asked for by argument or with
#: ``request.getfixturevalue``) and the classes that start servers, a Spark session or a browser.
NEEDS_A_SERVER = (
    "redis_server",
    "aof_server",
    "redis_cluster",
    "fresh_cluster",
    "sentinel",
    "replicated_cluster",
    "backend_url",
    "RedisServer",
    "RedisClusterProcs",
    "SentinelProcs",
    "spark_session",
    "chromium",
)


def _is_unit_module(item: pytest.Item, slow: bool) -> bool:
    """A module that needs no server (nor Spark, nor a browser) and has no ``slow`` test. Read from its
    text and the text of the test modules it takes fixtures or helpers from: a server asked for at
    run time (``request.getfixturevalue``) shows in no test's fixture names."""
    module = getattr(item, "module", None)
    if slow or module is None:
        return False
    sources = {item.path}
    for value in vars(module).values():
        name = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
        if isinstance(name, str) and name.startswith("tests.") and name.rpartition(".")[2].startswith("test_"):
            sources.add(pathlib.Path(sys.modules[name].__file__ or ""))
    return not any(name in source.read_text(encoding="utf-8") for source in sources for name in NEEDS_A_SERVER)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Unit test modules (no Redis) run first, then modules with a ``slow`` test, then the rest; each
    module's tests kept together and in order.

    Unit modules take seconds together and fail fastest when the logic is wrong, so they come first.
    ``make test`` hands whole files to two workers in collection order (``--dist loadfile``); in
    alphabetical order the longest files (the partition suite, the 10x-maxmemory tier run: minutes
    each) came last, and one worker ran them alone for the last minutes of the run. Started right
    after the unit modules, they overlap the many short files instead."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    first = {item.path: item for item in reversed(items)}
    unit = {path for path, item in first.items() if _is_unit_module(item, path in slow)}
    # stable: the order within each group is kept
    items.sort(key=lambda item: (item.path not in unit, item.path not in slow))


#: A text that marks a test module as one that runs on the worker's Spark session.
SPARK_MARK = "spark_session"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` in collection order, except that every module using the Spark session is one
    unit of work: one worker runs them all, so one JVM starts in the whole run instead of one per worker
    (its start took 20 s of both cores; its heap, about a GiB per worker).

    In collection order: pytest-xdist's default (``--loadscope-reorder``) hands out the files with the
    most tests first, which undid :func:`pytest_collection_modifyitems`: the partition suite (10 tests)
    went out 41st of 90 files, the 10x-maxmemory tier run (4 tests) 66th, the HA chaos run 80th."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False

    rootdir = pathlib.Path(str(config.rootpath))
    uses_spark: dict[str, bool] = {}

    class SparkTogether(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path not in uses_spark:
                try:
                    uses_spark[path] = SPARK_MARK in (rootdir / path).read_text(encoding="utf-8")
                except OSError:
                    uses_spark[path] = False
            return "spark-session" if uses_spark[path] else path

    return SparkTogether(config, log)


@pytest.fixture(autouse=True)
def _no_store_connection_left_open() -> Iterator[None]:
    """Fail a test that leaves a store connection open (D67).

    Every :class:`Connection` made while the test runs (by the test or by the library objects it
    uses) must hold no open socket once the test and its other fixtures are done and garbage is
    collected: the test closes what it keeps (``with Admin(...)``, ``conn.close()``), and each library
    object closes the connections it made when it is closed or stopped (tests/leaks.py). Garbage is
    collected first, so an asyncio connection dropped unclosed warns (an error) in the test that
    dropped it."""
    watch = ConnectionWatch()
    watch.start()
    try:
        yield
    finally:
        watch.stop()
        close_owned()  # what the test marked as its own to close (tests.leaks.owned)
    gc.collect()
    left = watch.left_open()
    for conn, _, _ in left:
        watch.bury(conn)
    if left:
        pytest.fail(
            "store connections left open by this test (close them, or the library object that made them):\n"
            + "\n".join(f"{conn!r}: {count} socket(s), made at\n{made_at}" for conn, count, made_at in left),
            pytrace=False,
        )


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One standalone server for the session (tests keep apart by namespace)."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """One local[2] SparkSession for the Spark test modules (JVM start-up costs seconds)."""
    pytest.importorskip("pyspark", reason="pip install 'rocketredis[spark]'")
    from spark import local_session

    session = local_session(2, app_name="rocketredis-tests", shuffle_partitions=2)
    yield session
    session.stop()


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
def admin(backend_url: str, namespace: str) -> Iterator[Admin]:
    """An :class:`~mq.Admin` on the test's backend and namespace, closed after the test (a module may
    define its own, e.g. one that also creates its topic)."""
    with Admin(backend_url, namespace) as a:
        yield a


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


@pytest.fixture
def procs() -> Iterator[list[ConsumerProc]]:
    """Consumer processes the test starts (tests/consumer_proc.py); those still running at the end are
    resumed (if a test paused them) and killed."""
    started: list[ConsumerProc] = []
    yield started
    for p in started:
        if p.proc.poll() is None:
            p.proc.send_signal(signal.SIGCONT)
            p.kill()
