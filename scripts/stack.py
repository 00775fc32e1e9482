"""The docker/docker-compose.yml topology without Docker: local processes on loopback (``make stack``).

    python scripts/stack.py [--duration-s 10] [--messages 100] [--rate 200] [--verbose]

Starts what the compose file starts, as child processes of this script:

1. ``redis-server`` on a free 127.0.0.1 port with AOF (``appendonly yes``, ``appendfsync everysec``) in
   a temporary directory;
2. the broker service, ``mq broker``;
3. two ``examples/consumer_app.py`` in one consumer group, and, once they have split the topic's
   queues between them, one ``examples/producer_app.py`` sending ``--messages`` messages;
4. the web console, ``mq console`` on a free 127.0.0.1 port (printed as ``console on http://…``).

Every child gets ``MQ_URL`` (and ``--namespace``). The stack then waits until the producer has sent
every message and exited 0, the consumers together have received every one of them (each consumer
some), ``mq broker --check`` exits 0, and the console's API lists the topic and the group with no
lag. Then it stops everything in reverse order with SIGTERM
(SIGKILL after ``--grace-s``) and checks that each process exited 0 on its own.

``--duration-s`` bounds the time from the first start to a verified exchange; the shutdown adds at
most ``--grace-s`` per stage. Everything is stopped also on a failure, SIGTERM or Ctrl-C, and on
Linux the children die with this process even if it is SIGKILLed. The last line is
``STACK OK sent=N received=N duplicates=D per_consumer=A,B broker_check=0 console=ok pids=P,… elapsed_s=S``
(exit 0), or ``STACK FAILED: <reason>`` (exit 1) after the tail of every child's output.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import IO

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
POLL_S = 0.05

_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """``preexec_fn``: Linux SIGKILLs the child when this process (its spawning thread) dies."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


class StackError(Exception):
    """The stack did not come up, exchange messages or shut down cleanly; the message says why."""


class Interrupted(Exception):
    """This script was asked to stop."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Child:
    """One child process (own session, dies with us) whose merged stdout/stderr is collected line by line."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], *, verbose: bool = False) -> None:
        self.name = name
        self.argv = list(argv)
        self.verbose = verbose
        self.lines: list[str] = []
        self.killed = False
        self.code: int | None = None  # exit code once stopped by Stack.shutdown
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), name=f"read-{name}", daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            line = line.rstrip("\n")
            with self._lock:
                self.lines.append(line)
            if self.verbose:
                print(f"  [{self.name}] {line}", flush=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> list[str]:
        """The lines printed so far."""
        with self._lock:
            return list(self.lines)

    def tail(self, n: int = 15) -> str:
        lines = self.output()[-n:]
        return "\n".join(f"    {line}" for line in lines) if lines else "    (no output)"

    def terminate(self) -> None:
        """Send SIGTERM (no wait)."""
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self, grace_s: float) -> int:
        """Wait ``grace_s`` for the exit, then SIGKILL; returns the exit code (negative: killed by a signal)."""
        try:
            self.proc.wait(max(0.0, grace_s))
        except subprocess.TimeoutExpired:
            self.killed = True
            self.proc.kill()
            self.proc.wait()
        self._reader.join(2.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return int(self.proc.returncode)

    def stop(self, grace_s: float) -> int:
        self.terminate()
        return self.wait_stopped(grace_s)


class Stack:
    """The processes of one run and the checks on them."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.children: list[Child] = []
        self.start = time.monotonic()
        self.deadline = self.start + args.duration_s
        self.workdir = tempfile.mkdtemp(prefix="rocketredis-stack-")
        self.url = ""
        self.redis: Child | None = None
        self.broker: Child | None = None
        self.consumers: list[Child] = []
        self.producer: Child | None = None
        self.console: Child | None = None
        self.console_url = ""
        self.stop_codes: dict[str, int] = {}

    # -- helpers ---------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        print(f"stack: {text}", flush=True)

    def env(self) -> dict[str, str]:
        return {**os.environ, "MQ_URL": self.url, "PYTHONUNBUFFERED": "1"}

    def spawn(self, name: str, argv: Sequence[str]) -> Child:
        child = Child(name, argv, self.env(), verbose=self.args.verbose)
        self.children.append(child)
        return child

    def remaining(self) -> float:
        return float(self.deadline - time.monotonic())

    def wait_for(self, predicate: Callable[[], bool], what: str, *, may_exit: Sequence[Child] = ()) -> None:
        """Poll ``predicate`` until true; fail when the time limit passes or a child exits unexpectedly."""
        while not predicate():
            for child in self.children:
                if child not in may_exit and not child.running:
                    raise StackError(f"{child.name} exited with code {child.proc.returncode} while waiting for {what}")
            if self.remaining() <= 0:
                raise StackError(f"timed out after {self.args.duration_s:g} s (--duration-s) waiting for {what}")
            time.sleep(POLL_S)

    # -- the run ---------------------------------------------------------------------------------

    def start_redis(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StackError("redis-server is not installed: `make stack` installs it (as root), or apt-get install redis-server")
        import redis  # a dependency of the project

        for _attempt in range(3):  # a port picked here may be taken by someone else before redis binds it
            port = free_port()
            argv = [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--dir",
                self.workdir,
                "--daemonize",
                "no",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
                "--logfile",
                "",
            ]
            server = self.redis = self.spawn("redis-server", argv)

            def up(port: int = port, server: Child = server) -> bool:
                if not server.running:
                    return True  # exited: looked at below
                with (
                    contextlib.suppress(redis.RedisError, OSError),
                    redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1) as c,
                ):
                    return bool(c.ping())
                return False

            self.wait_for(up, "redis-server to answer PING", may_exit=[server])
            if server.running:
                self.url = f"redis://127.0.0.1:{port}/0"
                self.say(f"redis-server on 127.0.0.1:{port} (appendonly yes, appendfsync everysec), pid {server.pid}")
                return
            server.wait_stopped(0)
            if not any("Address already in use" in line for line in server.output()):
                raise StackError(f"redis-server exited at start:\n{server.tail()}")
            self.children.remove(server)  # lost the port to another process: try another one
        raise StackError("redis-server found no free port in 3 attempts")

    def mq_command(self) -> list[str]:
        beside = pathlib.Path(sys.executable).parent / "mq"
        found = str(beside) if beside.exists() else shutil.which("mq")
        if found is None:
            raise StackError("the `mq` command is missing: install the project (`make stack` does)")
        return [found]

    def start_services(self) -> None:
        a = self.args
        self.broker = self.spawn("broker", [*self.mq_command(), "broker", "--namespace", a.namespace])
        for i in range(1, a.consumers + 1):
            self.consumers.append(
                self.spawn(
                    f"consumer-{i}",
                    [
                        sys.executable,
                        str(EXAMPLES / "consumer_app.py"),
                        "--namespace",
                        a.namespace,
                        "--topic",
                        a.topic,
                        "--group",
                        a.group,
                        "--queues",
                        str(a.queues),
                        "--duration-s",
                        "0",
                        "--count",
                        "0",
                    ],
                )
            )
        self.wait_for(self.group_split, f"the {a.consumers} consumers to split the {a.queues} queues of {a.topic}")
        shares = ", ".join(f"{c.name} [{','.join(map(str, sorted(self.assigned(c) or ())))}]" for c in self.consumers)
        self.say(f"broker service pid {self.broker.pid}; consumer group {a.group}: {shares}")

    def start_console(self) -> None:
        """``mq console`` on a free loopback port (it starts while the services do: see :meth:`console_up`)."""
        port = free_port()
        argv = [*self.mq_command(), "console", "--namespace", self.args.namespace, "--port", str(port)]
        self.console = self.spawn("console", argv)
        self.console_url = f"http://127.0.0.1:{port}"

    def console_up(self) -> None:
        """Wait until the console answers ``GET /api``."""
        assert self.console is not None
        self.wait_for(lambda: self.console_get("/api") is not None, "the console to answer GET /api")
        self.say(f"console on {self.console_url}/ pid {self.console.pid}")

    def console_get(self, path: str) -> dict[str, object] | None:
        """The console's JSON answer to ``GET path``, or None when it does not answer (yet)."""
        try:
            with urllib.request.urlopen(self.console_url + path, timeout=2) as response:
                data = json.loads(response.read())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def console_items(self, path: str) -> list[dict[str, object]]:
        """The ``items`` of the console's JSON list at ``GET path`` (none when it does not answer yet)."""
        items = (self.console_get(path) or {}).get("items")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def console_check(self) -> None:
        """The console lists the topic, and the group with no lag left."""
        a = self.args

        def shows() -> bool:
            topics = self.console_items(f"/api/topics?search={a.topic}")
            groups = self.console_items(f"/api/groups?search={a.group}")
            return any(t.get("name") == a.topic for t in topics) and any(
                g.get("group") == a.group and g.get("total_lag") == 0 for g in groups
            )

        done = [self.producer] if self.producer is not None else []
        self.wait_for(shows, f"the console to list {a.topic} and {a.group} with no lag", may_exit=done)
        self.say(f"console lists {a.topic} and group {a.group} with total lag 0")

    @staticmethod
    def assigned(consumer: Child) -> set[int] | None:
        """The queue ids the consumer reported last (None before its first report)."""
        reports = [line for line in consumer.output() if line.startswith("assigned")]
        if not reports:
            return None
        ids = reports[-1].partition(" ")[2]
        return {int(i) for i in ids.split(",") if i}

    def group_split(self) -> bool:
        """Every consumer owns some queues, no queue twice, and together all of them."""
        shares = [self.assigned(c) for c in self.consumers]
        if any(not s for s in shares):
            return False
        owned = [q for s in shares for q in s or ()]
        return len(owned) == len(set(owned)) == int(self.args.queues)

    def start_producer(self) -> None:
        a = self.args
        self.producer = self.spawn(
            "producer",
            [
                sys.executable,
                str(EXAMPLES / "producer_app.py"),
                "--namespace",
                a.namespace,
                "--topic",
                a.topic,
                "--queues",
                str(a.queues),
                "--count",
                str(a.messages),
                "--rate",
                str(a.rate),
            ],
        )

    def exchange(self) -> tuple[list[str], list[list[str]]]:
        """Wait until the producer has sent everything and the consumers have received all of it."""
        a = self.args
        assert self.producer is not None
        producer = self.producer
        self.wait_for(lambda: not producer.running, f"the producer to send {a.messages} messages", may_exit=[producer])
        producer.wait_stopped(0)
        sent = [line.split()[2] for line in producer.output() if line.startswith("sent ")]
        if producer.proc.returncode != 0 or len(sent) != a.messages:
            raise StackError(
                f"the producer exited with code {producer.proc.returncode} after sending {len(sent)} "
                f"of {a.messages} messages:\n{producer.tail()}"
            )
        self.say(f"producer sent {len(sent)} messages to {a.topic}")
        want = set(sent)

        def received() -> list[list[str]]:
            return [[line.split()[1] for line in c.output() if line.startswith("received ")] for c in self.consumers]

        def all_received() -> bool:
            return want <= {b for per in received() for b in per}

        try:
            self.wait_for(all_received, f"the consumers to receive the {len(want)} messages", may_exit=[producer])
        except StackError as e:
            got = {b for per in received() for b in per}
            raise StackError(f"{e}: {len(want & got)} of {len(want)} received") from None
        return sent, received()

    def broker_check(self) -> str:
        """Run ``mq broker --check`` until it exits 0; returns its output."""
        argv = [*self.mq_command(), "broker", "--check", "--namespace", self.args.namespace]
        last = ""
        while True:
            try:
                done = subprocess.run(
                    argv, cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=max(1.0, min(10.0, self.remaining()))
                )
            except subprocess.TimeoutExpired:
                last = "(timed out)"
            else:
                last = (done.stdout + done.stderr).strip()
                if done.returncode == 0:
                    return last
            if self.remaining() <= 0:
                raise StackError(f"`mq broker --check` did not report healthy within --duration-s: {last}")
            time.sleep(0.3)

    def shutdown(self) -> list[str]:
        """Stop every child, latest stage first (consumers and producer, then the broker, then Redis).

        Returns the problems: a child that needed SIGKILL or exited with a non-zero code.
        """
        grace = self.args.grace_s
        ordered: list[list[Child | None]] = [[self.producer, *self.consumers, self.console], [self.broker], [self.redis]]
        known = {id(c) for stage in ordered for c in stage if c is not None}
        stages = [[c for c in self.children if id(c) not in known]] + [[c for c in s if c is not None] for s in ordered]
        problems = []
        for stage in stages:  # anything unexpected first, then the apps, the broker, Redis
            members = [c for c in stage if c.code is None]
            for c in members:  # one stage stops in parallel
                c.terminate()
            for c in members:
                code = c.code = self.stop_codes[c.name] = c.wait_stopped(grace)
                if c.killed:
                    problems.append(f"{c.name} did not stop within {grace:g} s of SIGTERM and was killed")
                elif code != 0:
                    problems.append(f"{c.name} exited with code {code}")
        shutil.rmtree(self.workdir, ignore_errors=True)
        return problems

    def run(self) -> str:
        """Bring the stack up, check it, and return the summary line (raises StackError)."""
        self.start_redis()
        self.start_console()
        self.start_services()
        self.console_up()
        self.start_producer()
        health = self.broker_check()  # while the producer starts
        self.say(f"mq broker --check: {health}")
        sent, received = self.exchange()
        self.console_check()
        flat = [b for per in received for b in per]
        duplicates = len(flat) - len(set(flat))
        per = [len(set(r)) for r in received]
        if not all(per):
            idle = [c.name for c, n in zip(self.consumers, per) if n == 0]
            raise StackError(f"{', '.join(idle)} received nothing although the group had split the queues")
        self.say(
            f"consumers received {len(set(flat) & set(sent))} of {len(sent)} "
            f"({', '.join(f'{c.name} {n}' for c, n in zip(self.consumers, per))}), {duplicates} duplicates"
        )
        pids = [c.pid for c in self.children]
        problems = self.shutdown()
        if problems:
            raise StackError("unclean shutdown: " + "; ".join(problems))
        unreported = [c.name for c in self.consumers if not any(line.startswith("consumer done:") for line in c.output())]
        if unreported:
            raise StackError(f"{', '.join(unreported)} exited without its final report")
        self.say("stopped " + ", ".join(f"{name} (exit {code})" for name, code in self.stop_codes.items()))
        return (
            f"STACK OK sent={len(sent)} received={len(set(flat) & set(sent))} duplicates={duplicates} "
            f"per_consumer={','.join(map(str, per))} broker_check=0 console=ok pids={','.join(map(str, pids))} "
            f"elapsed_s={time.monotonic() - self.start:.1f}"
        )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stack.py", description="run the compose topology as local processes on loopback")
    p.add_argument(
        "--duration-s", type=float, default=10.0, help="time limit from the first start to a verified exchange (default: 10)"
    )
    p.add_argument("--messages", type=int, default=100, help="messages the producer sends (default: 100)")
    p.add_argument("--rate", type=float, default=200.0, help="producer rate, messages per second; 0 = unpaced (default: 200)")
    p.add_argument("--consumers", type=int, default=2, help="consumer processes in the group (default: 2)")
    p.add_argument("--queues", type=int, default=4, help="queues of the topic (default: 4)")
    p.add_argument("--namespace", default="mq")
    p.add_argument("--topic", default="StackDemo")
    p.add_argument("--group", default="StackConsumers")
    p.add_argument("--grace-s", type=float, default=8.0, help="wait per shutdown stage before SIGKILL (default: 8)")
    p.add_argument("--verbose", "-v", action="store_true", help="echo every child's output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.consumers < 1 or args.queues < args.consumers or args.messages < args.consumers:
        print("stack.py: need 1 <= --consumers <= --queues and --messages >= --consumers", file=sys.stderr)
        return 2

    def interrupt(signum: int, _frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    stack = Stack(args)
    try:
        summary = stack.run()
    except (StackError, Interrupted) as e:
        reason = f"interrupted by {e}" if isinstance(e, Interrupted) else str(e)
        problems: list[str] = []
        with contextlib.suppress(Interrupted):
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            problems = stack.shutdown()
        for child in stack.children:
            print(
                f"--- {child.name} (pid {child.pid}, exit {'?' if child.code is None else child.code}):\n{child.tail()}",
                file=sys.stderr,
            )
        more = f" (and on shutdown: {'; '.join(problems)})" if problems else ""
        print(f"STACK FAILED: {reason}{more}", flush=True)
        return 1
    finally:
        stack.shutdown()  # idempotent: a no-op after a clean run
        for s, handler in old.items():
            signal.signal(s, handler)
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
