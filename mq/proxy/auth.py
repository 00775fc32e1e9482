"""RocketMQ's access-key signature (``MQv2-HMAC-SHA1``), checked on every RPC when keys are set.

A client sends ``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time,
Signature=<hex HMAC-SHA1 of the x-mq-date-time header, keyed with the secret key>``.

The signed ``x-mq-date-time`` must be a UTC time in RocketMQ's format (``20261127T233000Z``) within
:data:`MAX_SKEW_S` of this host's clock, as RocketMQ's proxy checks it: a header captured on the
plaintext port stops opening the endpoint after that long (D88).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from mq.proxy.codes import ProxyError

#: How far the signed date may be from this host's clock, seconds [RocketMQ proxy: 15 min].
MAX_SKEW_S = 15 * 60
#: The format of ``x-mq-date-time`` [RocketMQ ``yyyyMMdd'T'HHmmss'Z'``, UTC].
DATE_FORMAT = "%Y%m%dT%H%M%SZ"
_DATE = re.compile(r"^\d{8}T\d{6}Z$")
_AUTH = re.compile(r"^MQv2-HMAC-SHA1\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-fA-F]+)$")


def sign(secret_key: str, date_time: str) -> str:
    """The signature of ``date_time`` with ``secret_key`` (lowercase hex)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


class Credentials:
    """The one access key / secret key pair the endpoint accepts. The secret never appears in ``repr``."""

    def __init__(self, access_key: str, secret_key: str, *, max_skew_s: float = MAX_SKEW_S) -> None:
        if not access_key or not secret_key:
            raise ValueError("set both --access-key and --secret-key, or neither")
        if not (math.isfinite(max_skew_s) and max_skew_s > 0):
            raise ValueError(f"max_skew_s must be a positive finite number of seconds, got {max_skew_s!r}")
        self.access_key = access_key
        self._secret_key = secret_key
        #: How far a signed date may be from this host's clock, seconds.
        self.max_skew_s = max_skew_s

    def __repr__(self) -> str:
        return f"Credentials(access_key={self.access_key!r}, secret_key=<hidden>)"

    def fields(self) -> list[Any]:
        """``[access_key, secret_key, max_skew_s]``, for handing to an endpoint worker on its stdin
        (never on a command line, never logged)."""
        return [self.access_key, self._secret_key, self.max_skew_s]

    def check(self, metadata: Mapping[str, str], *, now_s: float | None = None) -> None:
        """Accept a request whose headers carry a valid signature of a current date.

        An unknown access key and a wrong signature get the same answer (and the same work), so the
        answer does not tell a prober which access keys exist.

        Args:
            metadata: the request's headers, lowercase names.
            now_s: this host's time, epoch seconds (default: now).

        Raises:
            ProxyError: ``UNAUTHORIZED`` naming what is wrong (never the expected signature).
        """
        header = metadata.get("authorization", "")
        match = _AUTH.match(header.strip())
        if match is None:
            raise ProxyError("UNAUTHORIZED", "missing or malformed authorization header: configure the client's credentials")
        access_key, signed, signature = match.groups()
        if signed.lower() != "x-mq-date-time" or "x-mq-date-time" not in metadata:
            raise ProxyError("UNAUTHORIZED", "the signature must cover the x-mq-date-time header")
        date_time = metadata["x-mq-date-time"]
        signed_s = _date_s(date_time)
        now = time.time() if now_s is None else now_s
        if abs(now - signed_s) > self.max_skew_s:
            raise ProxyError(
                "UNAUTHORIZED",
                f"x-mq-date-time {date_time!r} is more than {self.max_skew_s / 60:g} min from the endpoint's UTC clock: "
                "sync the client's clock (a client signing its local time, as rocketmq-python-client 5.1 does, "
                "needs TZ=UTC, or the endpoint a larger --max-clock-skew-min)",
            )
        key_ok = hmac.compare_digest(access_key.encode(), self.access_key.encode())
        signature_ok = hmac.compare_digest(signature.lower().encode(), sign(self._secret_key, date_time).encode())
        if not (key_ok and signature_ok):
            raise ProxyError("UNAUTHORIZED", "access key or signature does not match: check the client's credentials")


def _date_s(date_time: str) -> float:
    """``x-mq-date-time`` as epoch seconds.

    Raises:
        ProxyError: ``UNAUTHORIZED`` when it is not a date in :data:`DATE_FORMAT`.
    """
    try:
        if not _DATE.match(date_time):
            raise ValueError(date_time)
        return datetime.strptime(date_time, DATE_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise ProxyError("UNAUTHORIZED", f"x-mq-date-time {date_time[:32]!r} is not a UTC time like 20261127T233000Z") from None
