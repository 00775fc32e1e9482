"""Where a tier lives: ``file:///path`` or ``s3://bucket/prefix``, opened with ``pyarrow.fs``.

Credentials come from the standard environment of the S3 SDK (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, profiles, instance roles); an S3-compatible server other than AWS (MinIO,
moto) is named by ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``. Nothing here stores or prints a
credential: the URL names a place, never a key.

Layout under the tier's root: ``<namespace>/<topic>/<queue id>/<start>-<end>-<token>.parquet``
(final segments) and ``…/<queue id>/_tmp/<token>.parquet`` (uploads in progress).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mq.errors import MQClientError

#: Folder of a queue that holds uploads in progress (never read; removed when older than the grace).
TMP_DIR = "_tmp"


def _pyarrow_fs() -> Any:
    try:
        from pyarrow import fs
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise MQClientError("tiered storage needs pyarrow: pip install 'rocketredis[tier]'") from e
    return fs


@dataclass(frozen=True)
class TierLocation:
    """An opened tier: the ``pyarrow.fs`` filesystem and the root path inside it.

    Attributes:
        url: the tier URL as configured.
        fs: a ``pyarrow.fs.FileSystem`` (LocalFileSystem or S3FileSystem).
        root: the root folder inside ``fs`` (no trailing slash).
    """

    url: str
    fs: Any
    root: str

    def namespace_dir(self, namespace: str) -> str:
        """The folder of one namespace's topics."""
        return f"{self.root}/{namespace}"

    def topic_dir(self, namespace: str, topic: str) -> str:
        """The folder of one topic's queues."""
        return f"{self.namespace_dir(namespace)}/{topic}"

    def queue_dir(self, namespace: str, topic: str, queue_id: int) -> str:
        """The folder of one queue's segments."""
        return f"{self.topic_dir(namespace, topic)}/{queue_id}"

    def path(self, namespace: str, topic: str, queue_id: int, name: str) -> str:
        """The path of segment file ``name`` of a queue."""
        return f"{self.queue_dir(namespace, topic, queue_id)}/{name}"

    def tmp_path(self, namespace: str, topic: str, queue_id: int, token: str) -> str:
        """Where an upload in progress is written."""
        return f"{self.queue_dir(namespace, topic, queue_id)}/{TMP_DIR}/{token}.parquet"

    def __repr__(self) -> str:
        return f"TierLocation({self.url!r})"


def open_tier(url: str) -> TierLocation:
    """Open the tier at ``url`` (nothing is read or written yet).

    Raises:
        MQClientError: the URL is neither ``file:///path`` nor ``s3://bucket[/prefix]``, or pyarrow is missing.
    """
    parts = urlsplit(url)
    fs = _pyarrow_fs()
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise MQClientError(f"a file tier URL is file:///absolute/path, got {url!r}")
        return TierLocation(url, fs.LocalFileSystem(), parts.path.rstrip("/") or "/")
    if parts.scheme == "s3":
        if not parts.netloc:
            raise MQClientError(f"an S3 tier URL is s3://bucket[/prefix], got {url!r}")
        if parts.username or parts.password:
            raise MQClientError("an S3 tier URL carries no credentials: they come from the environment (AWS_ACCESS_KEY_ID …)")
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        options: dict[str, Any] = {}
        if endpoint:
            ep = urlsplit(endpoint)
            options = {"endpoint_override": ep.netloc or endpoint, "scheme": ep.scheme or "https"}
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            options["region"] = region
        root = f"{parts.netloc}{parts.path}".rstrip("/")
        return TierLocation(url, fs.S3FileSystem(**options), root)
    raise MQClientError(f"tier_url must be file:///path or s3://bucket/prefix, got {url!r}")


def probe(url: str) -> None:
    """Write a small file under the tier's root, read it back and remove it (``mq doctor``).

    Raises:
        OSError: the tier cannot be reached or written (pyarrow's errors); MQClientError: a bad URL.
    """
    import uuid

    location = open_tier(url)
    folder = f"{location.root}/_probe"
    path = f"{folder}/{uuid.uuid4().hex}"
    payload = b"rocketredis tier probe"
    location.fs.create_dir(folder, recursive=True)
    with location.fs.open_output_stream(path) as out:
        out.write(payload)
    try:
        with location.fs.open_input_stream(path) as f:
            if f.read() != payload:
                raise OSError(f"the probe file {path} read back different bytes")
    finally:
        location.fs.delete_file(path)
