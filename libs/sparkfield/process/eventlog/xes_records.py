"""Trace records as they pass between Spark and the XES reader's Python workers: a batch of
records as columns (:class:`Columns`, read with Arrow's kernels) or as ``(pos, line, block,
text)`` tuples, and the Arrow batches of :data:`RECORD_SCHEMA` that carry them through a
shuffle."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

RECORD_SCHEMA = T.StructType([
    T.StructField("pos", T.LongType()), T.StructField("line", T.LongType()),
    T.StructField("block", T.LongType()), T.StructField("text", T.StringType()),
])
_RECORD_ARROW = to_arrow_schema(RECORD_SCHEMA)

Record = tuple[int, int, int, str]  # pos, line, block, text


@dataclass
class Columns:
    """Trace records of one batch as columns: their text, ``pos`` and block, and the lines
    they start on (or the first one's: the others are counted when asked for, as only the
    errors of records read one by one name them). ``log_end``: a record may hold the log's
    end tag (False where the splitter found none in the batch's last record, the only one
    that may end the log)."""

    texts: pa.Array
    pos: np.ndarray
    lines: np.ndarray | int
    blocks: np.ndarray
    log_end: bool = True

    def line_numbers(self) -> np.ndarray:
        if not isinstance(self.lines, int):
            return self.lines
        breaks = pc.count_substring(self.texts, "\n").to_numpy().astype(np.int64)
        return self.lines + np.cumsum(breaks) - breaks

    def records(self) -> list[Record]:
        return list(zip(self.pos.tolist(), self.line_numbers().tolist(), self.blocks.tolist(),
                        self.texts.to_pylist(), strict=True))

    def batch(self) -> pa.RecordBatch:
        """As a batch of :data:`RECORD_SCHEMA`."""
        return pa.RecordBatch.from_arrays(
            [pa.array(self.pos, pa.int64()), pa.array(self.line_numbers(), pa.int64()),
             pa.array(self.blocks, pa.int64()), self.texts.cast(pa.string())],
            schema=_RECORD_ARROW)


Chunk = list[Record] | Columns


def _value_offsets(texts: pa.Array) -> np.ndarray:
    """Where each value of a string array starts in its data buffer, and where the last ends."""
    wide = pa.types.is_large_string(texts.type)
    offsets = np.frombuffer(texts.buffers()[1], np.int64 if wide else np.int32)
    return offsets[texts.offset:texts.offset + len(texts) + 1]


def utf8_bytes(texts: pa.Array) -> bytes:
    """The UTF-8 text of a string array's values, one after the other: one copy, searched
    at ``memchr`` speed (several times Arrow's substring kernels, which go string by
    string)."""
    offsets = _value_offsets(texts)
    data = texts.buffers()[2]
    return b"" if data is None else memoryview(data)[offsets[0]:offsets[-1]].tobytes()


def byte_lengths(texts: pa.Array) -> np.ndarray:
    """The UTF-8 length in bytes of each value of a string array, from its offsets."""
    return np.diff(_value_offsets(texts)).astype(np.int64)


def holds_markup(data: bytes) -> bool:
    """Whether UTF-8 text holds ``<!`` or ``<?`` (a search for the rare second character
    first, at memchr speed)."""
    return any(c in data and b"<" + c in data for c in (b"!", b"?"))


def record_batches(chunks: Iterator[Chunk]) -> Iterator[pa.RecordBatch]:
    """Chunks of records as Arrow batches of :data:`RECORD_SCHEMA`."""
    for chunk in chunks:
        if isinstance(chunk, Columns):
            yield chunk.batch()
        else:
            yield arrow_batch(list(zip(*chunk, strict=True)), _RECORD_ARROW)


def arrow_batch(columns: list, schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema)


def columns_of(batches: Iterator[pa.RecordBatch]) -> Iterator[Columns]:
    """Arrow batches of :data:`RECORD_SCHEMA` as columns."""
    for batch in batches:
        yield Columns(batch.column("text"), *(batch.column(n).to_numpy().astype(np.int64)
                                              for n in ("pos", "line", "block")))
