"""The store is the only boundary: no module outside ``mq/store`` runs a Lua script, builds a
pipeline, sends a raw Redis command, reaches into the store (its ``_run`` alias, its ``_client``, the
connection's ``async_client``) or into redis-py (private modules, private attributes, subclasses).
``mq/store/connection.py`` stays outside the store because ``mq.Connection`` is public API: it parses the
URL and builds and closes clients with redis-py's public constructors, and defines the ``client`` and
``async_client`` the store runs on (D109); every other rule holds for it too."""

from __future__ import annotations

import ast
import functools
import pathlib
import pkgutil

import pytest
import redis

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("mq", "scheduler", "spark")
#: The module that defines the clients the store runs on (``client``, ``async_client``).
CONNECTION = ROOT / "mq" / "connection.py"

#: redis-py modules code outside the store may import: the clients, their retry settings and the errors.
PUBLIC_REDIS = frozenset(
    {
        "redis",
        "redis.asyncio",
        "redis.asyncio.cluster",
        "redis.asyncio.retry",
        "redis.asyncio.sentinel",
        "redis.backoff",
        "redis.cluster",
        "redis.exceptions",
        "redis.retry",
        "redis.sentinel",
    }
)
#: The store's own way in: the runner's alias, the client operations run on, the asyncio client.
STORE_INTERNALS = frozenset({"_run", "_client", "async_client"})


def _outside_store() -> list[pathlib.Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (ROOT / "mq" / "store") not in path.parents
    ]


@functools.cache
def _redis_modules() -> frozenset[str]:
    """Every module of the installed redis-py that is not public (``redis.connection``, ``redis._parsers``…)."""
    names = {m.name for m in pkgutil.walk_packages(redis.__path__, "redis.")}
    return frozenset(names - PUBLIC_REDIS)


def _imported_from_redis(tree: ast.AST) -> set[str]:
    """Names a module imported from redis-py: a class deriving from one is a subclass of theirs."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "redis"
        for alias in node.names
    }


def _subclasses_redis(node: ast.ClassDef, from_redis: set[str]) -> bool:
    return any((_dotted(b) or "").split(".")[0] == "redis" or _dotted(b) in from_redis for b in node.bases)


def _private_names(tree: ast.AST, *, skip_redis_subclasses: bool = False) -> set[str]:
    """The ``_name`` methods and ``self._name`` / ``cls._name`` attributes ``tree`` defines (with
    ``skip_redis_subclasses``, not counting the bodies of subclasses of redis-py's classes, whose
    ``self._sock`` is redis-py's)."""
    from_redis = _imported_from_redis(tree)
    skipped = set()
    if skip_redis_subclasses:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _subclasses_redis(node, from_redis):
                skipped |= {id(n) for n in ast.walk(node)}
    names = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


@functools.cache
def _redis_private() -> frozenset[str]:
    """Private attribute names redis-py's objects have and the code outside the store does not define
    itself: reading one (``conn._sock``, ``pool._get_free_connections()``) reads redis-py's internals.
    Names both define (``_lock``) cannot be told apart by name and are left to review."""
    package = pathlib.Path(redis.__file__).parent
    theirs = set().union(*(_private_names(ast.parse(p.read_text(encoding="utf-8"))) for p in package.rglob("*.py")))
    ours = set().union(
        *(_private_names(ast.parse(p.read_text(encoding="utf-8")), skip_redis_subclasses=True) for p in _outside_store())
    )
    return frozenset(theirs - ours - STORE_INTERNALS)


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of plain names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _redis_private_module(name: str) -> bool:
    return name in _redis_modules() or any(name.startswith(m + ".") for m in _redis_modules())


def _offences(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    from_redis = _imported_from_redis(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("mq.store", "mq.store.scripts"):
            if any(alias.name == "scripts" for alias in node.names) or node.module == "mq.store.scripts":
                found.append(f"{path}:{node.lineno} imports the script loader")
        elif isinstance(node, ast.Import) and any(a.name == "mq.store.scripts" for a in node.names):
            found.append(f"{path}:{node.lineno} imports the script loader")
        elif isinstance(node, ast.ImportFrom) and node.module and _redis_private_module(node.module):
            found.append(f"{path}:{node.lineno} imports redis-py's internal module {node.module}")
        elif isinstance(node, ast.Import) and any(_redis_private_module(a.name) for a in node.names):
            found.append(f"{path}:{node.lineno} imports a redis-py internal module")
        elif isinstance(node, ast.ClassDef) and _subclasses_redis(node, from_redis):
            found.append(f"{path}:{node.lineno} subclasses a redis-py class ({node.name})")
        elif not isinstance(node, ast.Attribute):
            continue
        elif node.attr == "client" and path != CONNECTION:
            found.append(f"{path}:{node.lineno} uses a raw client ({ast.unparse(node)})")
        elif node.attr == "async_client" and path != CONNECTION:
            found.append(f"{path}:{node.lineno} uses the connection's asyncio client ({ast.unparse(node)})")
        elif node.attr == "_client":
            found.append(f"{path}:{node.lineno} uses the store's client ({ast.unparse(node)})")
        elif node.attr == "_run" and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            # ``self._run`` is a class's own loop (a thread's or a task's): the store's is ``store._run``
            found.append(f"{path}:{node.lineno} uses the store's private runner ({ast.unparse(node)}): use run()")
        elif node.attr in _redis_private():
            found.append(f"{path}:{node.lineno} reads redis-py's private {node.attr} ({ast.unparse(node)})")
        elif (dotted := _dotted(node)) is not None and dotted in _redis_modules():
            found.append(f"{path}:{node.lineno} uses redis-py's internal module {dotted}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pipeline":
            found.append(f"{path}:{node.lineno} builds a pipeline")
    return found


def test_only_mq_store_talks_to_redis() -> None:
    offences = []
    for path in _outside_store():
        offences += _offences(path)
    assert offences == [], "\n".join(offences)


def test_the_check_finds_an_offence(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from mq.store import Store, scripts\n\ndef f(conn):\n    pipe = conn.client.pipeline()\n")
    found = _offences(bad)
    assert len(found) == 3, found


@pytest.mark.parametrize(
    ("source", "offence"),
    [
        ("def f(store, op):\n    return store._run(op)\n", "private runner (store._run)"),
        ("class C:\n    def f(self, op):\n        return self._store._run(op)\n", "private runner (self._store._run)"),
        ("def f(store):\n    return store._client.get('k')\n", "store's client (store._client)"),
        ("class C:\n    def __init__(self, store):\n        self._client = 1\n", "store's client (self._client)"),
        ("def f(conn):\n    return conn.async_client\n", "asyncio client (conn.async_client)"),
        ("from redis.connection import Connection\n", "internal module redis.connection"),
        ("from redis._parsers import _RESP2Parser\n", "internal module redis._parsers"),
        ("import redis.asyncio.connection\n", "imports a redis-py internal module"),
        ("import redis\n\nX = redis.connection.Connection\n", "internal module redis.connection"),
        ("def f(conn):\n    return conn._sock\n", "private _sock (conn._sock)"),
        ("def f(pool):\n    return pool._get_free_connections()\n", "private _get_free_connections"),
        ("import redis\n\nclass C(redis.Redis):\n    pass\n", "subclasses a redis-py class (C)"),
        ("from redis.sentinel import Sentinel\n\nclass C(Sentinel):\n    pass\n", "subclasses a redis-py class (C)"),
    ],
)
def test_the_check_finds_each_kind_of_offence(tmp_path: pathlib.Path, source: str, offence: str) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(source)
    found = _offences(bad)
    assert len(found) == 1 and offence in found[0], found


@pytest.mark.parametrize(
    "source",
    [
        "class C:\n    def _run(self):\n        pass\n\n    def start(self):\n        self._run()\n",  # a class's own loop
        "def f(store, op):\n    return store.run(op)\n",
        "import redis.exceptions\nfrom redis.retry import Retry\n\nE = redis.exceptions.ConnectionError\n",
        "import redis\n\nE = redis.ConnectionError\n",
    ],
)
def test_the_check_lets_the_public_way_pass(tmp_path: pathlib.Path, source: str) -> None:
    good = tmp_path / "good.py"
    good.write_text(source)
    assert _offences(good) == []


def test_only_mq_connection_may_name_the_clients(tmp_path: pathlib.Path) -> None:
    other = tmp_path / "connection.py"  # the same file name elsewhere is not the connection module
    other.write_text("def f(conn):\n    return conn.client, conn.async_client\n")
    assert len(_offences(other)) == 2
