"""Hosts as Linux network namespaces on a private switch, for partition tests (root only).

A :class:`Network` makes, under one short random prefix:

- a *switch* namespace holding two bridges, ``main`` and ``cut`` (neither has an address: the switch
  namespace is not a host and the root namespace is never on it);
- one namespace per host, joined to the switch by a veth pair made directly in the two namespaces
  (no device is ever in the root namespace), with an address ``10.213.0.N/24``.

A partition moves the switch ends of some hosts' veths onto the ``cut`` bridge: the two sides then
reach only their own side, connections across the cut neither fail nor get an answer (packets are
dropped, as on a real network), and :meth:`Network.heal` moves them back. Processes run inside a host
with :meth:`Network.popen` (``ip netns exec``); the test process itself never sends a packet to the
hosts' addresses — it watches servers through unix sockets, which are paths in a shared directory.

Everything is removed by :meth:`Network.close` (also a context manager), and namespaces left by a run
that was SIGKILLed are removed by :func:`remove_stale` (they all carry :data:`PREFIX`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

#: Every namespace this module makes starts with it (stale ones are found by it).
PREFIX = "rrp"
#: The hosts' subnet (only inside the namespaces made here).
SUBNET = "10.213.0"
#: Seconds one ``ip`` command may take.
IP_TIMEOUT_S = 10.0


def unavailable() -> str | None:
    """Why network namespaces cannot be used here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    probe = f"{PREFIX}probe{secrets.token_hex(3)}"
    try:
        made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, timeout=IP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`ip netns add` failed: {e}"
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.decode(errors='replace').strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=IP_TIMEOUT_S)
    return None


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    """Run ``ip [-n NETNS] ARGS…``; its stdout. Raises RuntimeError with its stderr when it fails."""
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(cmd, capture_output=True, timeout=IP_TIMEOUT_S)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode()


def remove_stale() -> list[str]:
    """Remove every namespace named with :data:`PREFIX` whose run is gone; the names removed.

    A run's namespaces hold its pid in their name (``rrp<pid>x<hex>…``): those of a live process are kept,
    so two runs at once do not remove each other's."""
    removed = []
    for line in ip("netns", "list").splitlines():
        name = line.split(" ")[0]
        if not name.startswith(PREFIX) or "x" not in name:
            continue
        pid = name[len(PREFIX) :].split("x", 1)[0]
        if pid.isdigit() and os.path.exists(f"/proc/{pid}"):
            continue
        ip("netns", "del", name, check=False)
        removed.append(name)
    return removed


class Network:
    """Hosts on a switch, each a network namespace (see the module's docstring).

    Args:
        hosts: the hosts' names (short words); host ``i`` (from 0) gets address ``10.213.0.{i + 1}``.
    """

    def __init__(self, hosts: Sequence[str]) -> None:
        self.run_id = f"{PREFIX}{os.getpid()}x{secrets.token_hex(2)}"
        self.switch = f"{self.run_id}sw"
        self.hosts = {name: f"{self.run_id}{name}" for name in hosts}
        self.addresses = {name: f"{SUBNET}.{i + 1}" for i, name in enumerate(hosts)}
        self._ports = {name: f"p{i}" for i, name in enumerate(hosts)}  # switch-side veth of each host
        self._made: list[str] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> Network:
        """Make the namespaces, the bridges and the links (everything made is removed if this fails)."""
        try:
            for ns in [self.switch, *self.hosts.values()]:
                ip("netns", "add", ns)
                self._made.append(ns)
                ip("link", "set", "lo", "up", netns=ns)
            for bridge in ("main", "cut"):
                ip("link", "add", bridge, "type", "bridge", netns=self.switch)
                ip("link", "set", bridge, "up", netns=self.switch)
            for name, ns in self.hosts.items():
                port = self._ports[name]
                ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", self.switch)
                ip("link", "set", port, "master", "main", "up", netns=self.switch)
                ip("addr", "add", f"{self.addresses[name]}/24", "dev", "eth0", netns=ns)
                ip("link", "set", "eth0", "up", netns=ns)
        except BaseException:
            self.close()
            raise
        return self

    def partition(self, side: Sequence[str]) -> None:
        """Cut the hosts of ``side`` off from the others (they still reach each other)."""
        for name in side:
            ip("link", "set", self._ports[name], "master", "cut", netns=self.switch)

    def heal(self) -> None:
        """Join every host to the one bridge again."""
        for port in self._ports.values():
            ip("link", "set", port, "master", "main", netns=self.switch)

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace."""
        return ["ip", "netns", "exec", self.hosts[host], *argv]

    def popen(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``host``; it is killed by :meth:`close` if still running then."""
        from tests.servers import spawn_dying_with_parent  # SIGKILLed if this process dies first

        proc = spawn_dying_with_parent(self.command(host, argv), stdin=subprocess.DEVNULL, **kwargs)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        """Kill the processes started here that still run, and remove every namespace made here."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):  # a process stuck in the kernel: go on
                proc.wait(10)
        self.procs.clear()
        for ns in reversed(self._made):  # deleting a namespace deletes its veth ends and bridges
            ip("netns", "del", ns, check=False)
        self._made.clear()

    def __enter__(self) -> Network:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
