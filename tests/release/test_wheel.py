"""The release as a user gets it (issue 32, D125): the sdist and the wheel built once with
``python -m build`` (the wheel from the sdist, as pip does), ``twine check``, then the wheel installed
in a fresh virtual environment — no extra first, then ``[proxy]``, ``[console]``, ``[otel]``,
``[tier]`` and ``[spark]`` one at a time into the same environment (pip's cache keeps each install to
seconds) — and after each install the entry points the README names for it: ``mq --version``, ``mq
demo``, ``mq proxy`` answering the official Python client's send, ``mq console --check``, tiering
and ``mq tier status``, ``spark.read.format("mq")``.

The order is the proof: each entry point runs before any later extra is installed, and the
no-extra environment is shown refusing what the next extras bring (``mq proxy``, ``mq console``, a
tier), with the pip line to run. Everything runs from a directory outside the checkout without
``PYTHONPATH``, so the installed package is what is imported, never the source tree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from mq import Admin, Message, Producer
from tests.proxy_clients import rr_client
from tests.servers import RedisServer, free_port, spawn_dying_with_parent, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
#: What the build must not see of a checkout: VCS, environments, caches, earlier builds and the
#: endpoint's modules a developer generated (the build makes its own).
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", ".*_cache", "_pb", "results", "node_modules"
)
#: The environment of every command run in the new environment: no source tree on the path, no
#: store or Spark settings of the developer's shell.
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MQ_URL", "PYSPARK_PYTHON", "VIRTUAL_ENV", "PYTHONHOME")}


def run(argv: Sequence[str | Path], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd`` with :data:`ENV`, its output captured."""
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=timeout_s)


def succeed(argv: Sequence[str | Path], cwd: Path, timeout_s: float) -> str:
    """:func:`run`, which must exit 0; its stdout."""
    done = run(argv, cwd, timeout_s)
    shown = " ".join(map(str, argv))
    assert done.returncode == 0, f"{shown} exited {done.returncode}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@dataclass
class Dist:
    wheel: Path
    sdist: Path


@dataclass
class Venv:
    root: Path
    workdir: Path  # the directory commands run in: outside the checkout
    wheel: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def install(self, extra: str | None) -> float:
        """``pip install WHEEL[extra]`` (pip of this test's interpreter, ``--python`` the new
        environment); returns the seconds it took."""
        spec = f"{self.wheel}[{extra}]" if extra else str(self.wheel)
        started = time.monotonic()
        succeed([sys.executable, "-m", "pip", "--python", self.python, "install", "--quiet", spec], self.workdir, 600)
        took = time.monotonic() - started
        print(f"install [{extra or ''}]: {took:.1f} s")
        return took

    def run(self, *argv: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        """A program of the environment (``mq``, ``python``) with ``argv``."""
        return run([self.root / "bin" / argv[0], *argv[1:]], self.workdir, timeout_s)

    def ok(self, *argv: str, timeout_s: float = 120) -> str:
        """:meth:`run`, which must exit 0; its stdout."""
        return succeed([self.root / "bin" / argv[0], *argv[1:]], self.workdir, timeout_s)

    def script(self, source: str, *args: str, timeout_s: float = 300) -> str:
        """Run ``source`` with the environment's python; its stdout (it must exit 0)."""
        path = self.workdir / f"script_{uuid.uuid4().hex[:8]}.py"
        path.write_text(textwrap.dedent(source))
        return self.ok("python", str(path), *args, timeout_s=timeout_s)

    def start(self, log: Path, *argv: str) -> subprocess.Popen[bytes]:
        """A long-running program of the environment, its output to ``log`` (killed if the test dies)."""
        with open(log, "wb") as out:
            return spawn_dying_with_parent(
                [str(self.root / "bin" / argv[0]), *argv[1:]], stdout=out, stderr=subprocess.STDOUT, env=ENV, cwd=self.workdir
            )

    def has(self, module: str) -> bool:
        """Whether ``module`` is importable in the environment."""
        return self.run("python", "-c", f"import {module}").returncode == 0


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def build(outdir: Path, *args: str, prefix: Sequence[str] = ()) -> None:
    """``python -m build --outdir OUTDIR ARGS`` (run by ``prefix``, e.g. ``unshare --net --``), which must succeed."""
    succeed([*prefix, sys.executable, "-m", "build", "--outdir", outdir, *args], outdir.parent, 600)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """``python -m build`` on a copy of the checkout (the build writes egg-info into its source, and
    a checkout's generated ``mq/proxy/_pb`` must not be what ships); the wheel is built from the sdist."""
    work = tmp_path_factory.mktemp("build")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    started = time.monotonic()
    build(work / "dist", str(source))
    print(f"python -m build: {time.monotonic() - started:.1f} s")
    (wheel,) = (work / "dist").glob("*.whl")
    (sdist,) = (work / "dist").glob("*.tar.gz")
    return Dist(wheel, sdist)


@pytest.fixture(scope="module")
def venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh virtual environment with the wheel and no extra."""
    root = tmp_path_factory.mktemp("venv")
    workdir = tmp_path_factory.mktemp("cwd")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, env=ENV, timeout=120)
    print(f"venv: {time.monotonic() - started:.1f} s")
    env = Venv(root, workdir, dist.wheel)
    env.install(None)
    return env


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        yield s


def namespace() -> str:
    return f"rel{uuid.uuid4().hex[:8]}"


def test_build_and_twine_check_pass_and_both_carry_the_generated_modules(dist: Dist) -> None:
    assert dist.wheel.name == f"rocketredis-{_version()}-py3-none-any.whl"
    succeed([sys.executable, "-m", "twine", "check", "--strict", dist.wheel, dist.sdist], dist.wheel.parent, 120)
    generated = ("definition_pb2.py", "service_pb2.py", "service_pb2_grpc.py")
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
        for name in generated:
            assert f"mq/proxy/_pb/apache/rocketmq/v2/{name}" in names
        assert "mq/proxy/_pb/SOURCE_HASH" in names  # mq.proxy.pb finds them current: no generation at run time
        # the licence travels with the code (Apache-2.0 needs its text beside what is redistributed)
        assert f"rocketredis-{_version()}.dist-info/licenses/LICENSE" in names
        metadata = wheel.read(f"rocketredis-{_version()}.dist-info/METADATA").decode()
        definition = wheel.read("mq/proxy/_pb/apache/rocketmq/v2/definition_pb2.py").decode()
        grpc_module = wheel.read("mq/proxy/_pb/apache/rocketmq/v2/service_pb2_grpc.py").decode()
    listed = subprocess.run(["tar", "tzf", str(dist.sdist)], capture_output=True, text=True, check=True).stdout
    for name in generated:
        assert f"/mq/proxy/_pb/apache/rocketmq/v2/{name}" in listed
    assert f"rocketredis-{_version()}/LICENSE" in listed.splitlines()
    requires = [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    assert not [r for r in requires if r.startswith("grpcio-tools") and not r.endswith('extra == "dev"')], (
        "users must not need grpcio-tools"
    )
    # the generated modules refuse, at import, runtimes older than their generator: the proxy
    # extra's floors must be at least what the pinned grpcio-tools wrote
    gencode = re.search(r"^# Protobuf Python Version: (\S+)$", definition, re.MULTILINE)
    grpc_generated = re.search(r"^GRPC_GENERATED_VERSION = '(\S+)'$", grpc_module, re.MULTILINE)
    assert gencode and grpc_generated
    assert f'protobuf>={gencode[1]}; extra == "proxy"' in requires
    assert f'grpcio>={grpc_generated[1]}; extra == "proxy"' in requires


def test_the_sdist_builds_its_wheel_with_no_network(dist: Dist, tmp_path: Path) -> None:
    """Given the build requirements (this interpreter has them: the dev extra pins the build's
    grpcio-tools), the sdist builds its wheel in a network namespace of its own: nothing is
    downloaded, and the generated modules are the same bytes as the isolated build's."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--net", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs `unshare --net` (util-linux, root) to take the network away")
    build(tmp_path / "offline", "--wheel", "--no-isolation", str(dist.sdist), prefix=(unshare, "--net", "--"))
    (offline,) = (tmp_path / "offline").glob("*.whl")

    def generated(wheel: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(wheel) as z:
            return {n: z.read(n) for n in z.namelist() if n.startswith("mq/proxy/_pb/")}

    assert generated(offline) == generated(dist.wheel)
    assert len(generated(offline)) == 9  # four packages, four modules, the stamp


def test_the_dev_extra_pins_the_build_s_grpcio_tools() -> None:
    """A checkout regenerates mq/proxy/_pb with the dev extra's grpcio-tools: the same as the wheel's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (build_pin,) = [r for r in project["build-system"]["requires"] if r.startswith("grpcio-tools")]
    assert "==" in build_pin
    assert build_pin in project["project"]["optional-dependencies"]["dev"]


def test_no_extra_runs_version_and_demo_and_names_the_extras_it_lacks(venv: Venv, server: RedisServer) -> None:
    out = venv.ok("mq", "--version", "--url", server.url).splitlines()
    with server.client() as client:
        assert out == [f"mq {_version()}", f"server: Redis {client.info('server')['redis_version']} at {server.url}"]
    assert "Done." in venv.ok("mq", "demo", timeout_s=300)  # the embedded store, as `make demo`
    for module in ("grpc", "grpc_tools", "starlette", "pyarrow", "pyspark", "opentelemetry"):
        assert not venv.has(module), f"{module} is installed without its extra"
    refused = venv.run("mq", "proxy", "--url", server.url, "--port", "0")
    # (mq proxy says it on stdout)
    assert refused.returncode == 2 and "pip install 'rocketredis[proxy]'" in refused.stdout, refused.stdout + refused.stderr
    refused = venv.run("mq", "console", "--url", server.url, "--port", str(free_port()))
    assert refused.returncode == 1 and "pip install 'rocketredis[console]'" in refused.stderr, refused.stderr
    refused = venv.run("mq", "broker", "--url", server.url, "--namespace", namespace(), "--tier-url", f"file://{venv.workdir}/t")
    assert refused.returncode == 1 and "pip install 'rocketredis[tier]'" in refused.stderr, refused.stderr


def test_proxy_answers_an_official_client_s_send(venv: Venv, server: RedisServer) -> None:
    venv.install("proxy")
    assert not venv.has("grpc_tools")
    ns, topic = namespace(), "released"
    with Admin(server.url, ns) as admin:
        admin.create_topic(topic, read_queues=1, write_queues=1)
        log = venv.workdir / "proxy.log"
        proxy = venv.start(log, "mq", "proxy", "--url", server.url, "--namespace", ns, "--port", "0")
        try:
            port: list[int] = []

            def listening() -> bool:
                assert proxy.poll() is None, f"mq proxy exited {proxy.returncode}: {log.read_text()[-3000:]}"
                found = re.search(r"endpoint on 127\.0\.0\.1:(\d+)", log.read_text())
                port.extend([int(found[1])] if found else [])
                return bool(found)

            wait_until(listening, 60, "mq proxy listening")
            sent = rr_client("produce", f"127.0.0.1:{port[0]}", topic, json.dumps([{"body": b"from-the-wheel".hex()}]))
        finally:
            stop(proxy)
        assert [r["ok"] for r in sent] == [True], sent
        stored = admin.messages(topic, 0, 0)
    assert [(m.body, m.msg_id) for m in stored] == [(b"from-the-wheel", sent[0]["message_id"])]


def test_console_check_finds_the_console_healthy(venv: Venv, server: RedisServer) -> None:
    venv.install("console")
    port = free_port()
    log = venv.workdir / "console.log"
    console = venv.start(log, "mq", "console", "--url", server.url, "--namespace", namespace(), "--port", str(port))
    try:

        def healthy() -> bool:
            assert console.poll() is None, f"mq console exited {console.returncode}: {log.read_text()[-3000:]}"
            return venv.run("mq", "console", "--check", "--port", str(port)).returncode == 0

        wait_until(healthy, 60, "mq console --check healthy")
        assert venv.ok("mq", "console", "--check", "--port", str(port)).startswith("healthy: ")
    finally:
        stop(console)


def test_otel_finds_the_opentelemetry_api(venv: Venv) -> None:
    """The extra has no entry point of its own: mq.observe.otel sees the API (spans need a tracer provider the
    application sets, from an SDK the extra does not bring, so none is recorded here)."""
    venv.install("otel")
    out = venv.script("""
        import mq.observe.otel
        print(mq.observe.otel.trace is not None, mq.observe.otel.enabled())
    """)
    assert out.split() == ["True", "False"]


def test_tier_moves_messages_into_segments_and_tier_status_shows_them(venv: Venv, server: RedisServer) -> None:
    venv.install("tier")
    ns, topic, tier_url = namespace(), "tiered", f"file://{venv.workdir}/tier"
    # the broker service `mq broker --tier-url` runs, with segments cut at once instead of after 10 minutes
    venv.script(
        """
        import sys, time
        from mq import Admin, Message, Producer
        from scheduler import BrokerService
        from scheduler.config import BrokerConfig

        url, ns, topic, tier_url = sys.argv[1:]
        with Admin(url, ns) as admin:
            admin.create_topic(topic, read_queues=1, write_queues=1)
            with Producer("release-test", url, namespace=ns) as producer:
                for n in range(5):
                    producer.send(Message(topic, b"m%d" % n))
            config = BrokerConfig(tier_url=tier_url, tier_interval_s=0.2, tier_segment_age_s=0.001)
            with BrokerService(url, ns, config):
                deadline = time.monotonic() + 60
                while sum(t.segments for t in admin.tier_status(topic).values()) == 0:
                    assert time.monotonic() < deadline, "no segment after 60 s"
                    time.sleep(0.1)  # polling the tier's manifest, bounded above
        """,
        server.url,
        ns,
        topic,
        tier_url,
    )
    out = venv.ok("mq", "tier", "status", topic, "--url", server.url, "--namespace", ns).splitlines()
    assert out[0] == f"tier: {tier_url}"
    header, row = out[1].split(), out[2].split()
    assert dict(zip(header, row))["TIER_END"] == "5"


def test_spark_reads_a_topic(venv: Venv, server: RedisServer) -> None:
    venv.install("spark")
    ns, topic = namespace(), "sparked"
    with Admin(server.url, ns) as admin:
        admin.create_topic(topic, read_queues=2, write_queues=2)
    with Producer("release-test", server.url, namespace=ns) as producer:
        for n in range(6):
            producer.send(Message(topic, f"b{n}".encode()))
    out = venv.script(
        """
        import json, sys
        from spark import local_session

        url, ns, topic = sys.argv[1:]
        spark = local_session(cores=1)
        try:
            df = spark.read.format("mq").option("url", url).option("namespace", ns).option("topic", topic).load()
            print(json.dumps(sorted(bytes(r.body).decode() for r in df.select("body").collect())))
        finally:
            spark.stop()
        """,
        server.url,
        ns,
        topic,
        timeout_s=600,
    )
    assert json.loads(out.splitlines()[-1]) == [f"b{n}" for n in range(6)]


def _version() -> str:
    import mq

    return mq.__version__
