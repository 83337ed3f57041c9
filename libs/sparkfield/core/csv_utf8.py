"""Rows of a CSV read as UTF-8 that were not: Spark's CSV source decodes a byte that is not
UTF-8 as U+FFFD, the replacement character, so two ids that differ only in such a byte would
read alike and merge. Such rows are made malformed rows whose record says why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

REPLACEMENT = "\ufffd"
NOT_UTF8 = ("not UTF-8 (bytes read as U+FFFD; give the file's encoding: csv_encoding, or a "
            "mapping source's option encoding): ")
# the encodings Spark's CSV source reads (its legacy setting aside)
ENCODINGS = ("utf-8", "iso-8859-1", "us-ascii", "utf-16", "utf-16be", "utf-16le", "utf-32")


def reads_utf8(options: Mapping[str, str]) -> bool:
    """Whether a CSV read with ``options`` is decoded as UTF-8 (Spark's default; ``encoding``
    and its alias ``charset`` in any spelling)."""
    given = [v for k, v in options.items() if k.lower() in ("encoding", "charset")]
    return not given or given[-1].replace("-", "").replace("_", "").lower() == "utf8"


def mark_not_utf8(df: DataFrame, columns: Sequence[str], corrupt_col: str) -> DataFrame:
    """``df`` (string ``columns`` and ``corrupt_col``, as Spark's PERMISSIVE CSV read gives
    them) with every row holding U+FFFD in a column made a malformed row: ``corrupt_col`` holds
    :data:`NOT_UTF8` and the row as JSON."""
    if not columns:
        return df
    text = F.concat_ws("", *[F.col(f"`{c}`") for c in columns])
    record = F.concat(F.lit(NOT_UTF8),
                      F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns])))
    return df.withColumn(corrupt_col, F.coalesce(
        F.col(corrupt_col), F.when(F.instr(text, REPLACEMENT) > 0, record)))
