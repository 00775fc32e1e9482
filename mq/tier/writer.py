"""Writing one segment: Parquet row groups to a unique temporary name in the tier, then the final name.

A crash while writing leaves only the temporary file (never read; the sweep removes it); a crash
after the rename and before the manifest records it leaves an orphan final file (never read either:
readers go by the manifest; the sweep removes it too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from mq.model.message import MessageExt
from mq.tier import format as fmt
from mq.tier.location import TierLocation
from mq.tier.segment import Segment, segment_name

#: Called with a step's name as an upload passes it ("uploading" after each row group): a test
#: hook to stop the process at that point; does nothing by default.
Step = Callable[[str], None]


def write_segment(
    location: TierLocation,
    namespace: str,
    topic: str,
    queue_id: int,
    batches: Iterable[Sequence[MessageExt]],
    token: str,
    step: Step = lambda name: None,
) -> Segment | None:
    """Write the messages of ``batches`` (in offset order, contiguous) as one segment; returns it, or
    None when there was nothing to write. The file gets its final name only once it is complete.

    Raises:
        OSError: the tier could not be written (pyarrow's errors; the temporary file may remain).
    """
    import pyarrow.parquet as pq

    fs = location.fs
    tmp = location.tmp_path(namespace, topic, queue_id, token)
    fs.create_dir(tmp.rpartition("/")[0], recursive=True)
    start = end = min_st = max_st = -1
    with fs.open_output_stream(tmp) as out, pq.ParquetWriter(out, fmt.schema(), compression="zstd") as writer:
        pending: list[MessageExt] = []
        for batch in batches:
            pending.extend(batch)
            while len(pending) >= fmt.ROW_GROUP_ROWS:
                _write(writer, pending[: fmt.ROW_GROUP_ROWS])
                del pending[: fmt.ROW_GROUP_ROWS]
                step("uploading")
            if batch:
                if start < 0:
                    start, min_st = batch[0].queue_offset, batch[0].store_timestamp_ms
                end, max_st = batch[-1].queue_offset + 1, batch[-1].store_timestamp_ms
        if pending:
            _write(writer, pending)
            step("uploading")  # the footer is not written yet: still mid-upload
        if start >= 0:
            writer.add_key_value_metadata(
                {k.decode(): v.decode() for k, v in fmt.file_metadata(topic, queue_id, start, end).items()}
            )
    if start < 0:
        fs.delete_file(tmp)
        return None
    name = segment_name(start, end, token)
    final = location.path(namespace, topic, queue_id, name)
    fs.move(tmp, final)
    size = fs.get_file_info(final).size
    return Segment(start, end, name, int(size), min_st, max_st)


def _write(writer: object, messages: Sequence[MessageExt]) -> None:
    writer.write_batch(fmt.to_batch(messages), row_group_size=fmt.ROW_GROUP_ROWS)  # type: ignore[attr-defined]
