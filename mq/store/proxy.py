"""Store operations of the RocketMQ 5 endpoint (``mq proxy``): the clients' settings, kept in Redis so
that an endpoint restart, or another replica, still knows them."""

from __future__ import annotations

from mq.store.base import StoreBase
from mq.store.ops import Cmd, Op, operation


class ProxyOps(StoreBase):
    """The endpoint's copy of each client's Telemetry settings."""

    @operation
    def save_proxy_client(self, client_id: str, settings: bytes, ttl_ms: int) -> Op[None]:
        """Keep client ``client_id``'s settings (serialized protobuf) for ``ttl_ms`` milliseconds."""
        with self._errors(f"saving the settings of client {client_id!r}"):
            (yield Cmd(lambda c: c.set(self.keys.proxy_client(client_id), settings, px=int(ttl_ms))))

    @operation
    def proxy_client(self, client_id: str) -> Op[bytes | None]:
        """Client ``client_id``'s last settings, or None when unknown (or expired)."""
        with self._errors(f"reading the settings of client {client_id!r}"):
            raw = yield Cmd(lambda c: c.get(self.keys.proxy_client(client_id)))
        return bytes(raw) if raw is not None else None
