"""Tiered storage: a queue's older messages in immutable Parquet segments on a local folder or an
S3-compatible store, read back at their offsets (extra ``rocketredis[tier]``).

- :mod:`mq.tier.segment`: a segment as the manifest records it, and the manifest's invariants;
- :mod:`mq.tier.format`: the Parquet form of a segment (one row per message);
- :mod:`mq.tier.location`: ``file://`` and ``s3://`` URLs opened with ``pyarrow.fs``;
- :mod:`mq.tier.writer`: writing a segment (a unique temporary name, then its final one);
- :mod:`mq.tier.reader`: reading rows back through a pull's filter;
- :mod:`mq.tier.plan`: what the uploader does to a queue (sans-I/O).

The store side (manifest, lease, the commit script, the pulls' read-through) is
:mod:`mq.store.tier`; the uploader job is :mod:`scheduler.tier`.
"""

from mq.tier.segment import Segment

__all__ = ["Segment"]
