"""RocketMQ's access-key signature (``MQv2-HMAC-SHA1``), checked on every RPC when keys are set.

A client sends ``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time,
Signature=<hex HMAC-SHA1 of the x-mq-date-time header, keyed with the secret key>``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping

from mq.proxy.codes import ProxyError

_AUTH = re.compile(r"^MQv2-HMAC-SHA1\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-fA-F]+)$")


def sign(secret_key: str, date_time: str) -> str:
    """The signature of ``date_time`` with ``secret_key`` (lowercase hex)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


class Credentials:
    """The one access key / secret key pair the endpoint accepts. The secret never appears in ``repr``."""

    def __init__(self, access_key: str, secret_key: str) -> None:
        if not access_key or not secret_key:
            raise ValueError("set both --access-key and --secret-key, or neither")
        self.access_key = access_key
        self._secret_key = secret_key

    def __repr__(self) -> str:
        return f"Credentials(access_key={self.access_key!r}, secret_key=<hidden>)"

    def check(self, metadata: Mapping[str, str]) -> None:
        """Accept a request whose headers carry a valid signature.

        Raises:
            ProxyError: ``UNAUTHORIZED`` naming what is wrong (never the expected signature).
        """
        header = metadata.get("authorization", "")
        match = _AUTH.match(header.strip())
        if match is None:
            raise ProxyError("UNAUTHORIZED", "missing or malformed authorization header: configure the client's credentials")
        access_key, signed, signature = match.groups()
        if not hmac.compare_digest(access_key, self.access_key):
            raise ProxyError("UNAUTHORIZED", f"unknown access key {access_key!r}")
        if signed.lower() != "x-mq-date-time" or "x-mq-date-time" not in metadata:
            raise ProxyError("UNAUTHORIZED", "the signature must cover the x-mq-date-time header")
        if not hmac.compare_digest(signature.lower(), sign(self._secret_key, metadata["x-mq-date-time"])):
            raise ProxyError("UNAUTHORIZED", "wrong signature: check the client's secret key")
