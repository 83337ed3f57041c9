"""The input tables of the nlp jobs: Parquet or CSV (a header, quoted line breaks kept inside
a text), the text columns checked, and an id for every row."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.columns import require_columns
from sparkfield.core.io import require_path

ROW_ID = "__id"  # the id column read_table makes when the job names none


def read_texts(spark: SparkSession, path: str, text_col: str, id_col: str | None) -> DataFrame:
    """A Parquet or CSV table (a header, quoted line breaks) with ``text_col`` and ``id_col``;
    without an id column, ``__id``: doc_id:sentence_idx for bag_of_words sentences, else a
    row id."""
    return read_table(spark, path, [text_col], id_col)


def read_table(spark: SparkSession, path: str, columns: list[str],
               id_col: str | None) -> DataFrame:
    """:func:`read_texts` with several text ``columns``."""
    require_path(spark, path, "input")
    df = spark.read.option("header", "true").option("multiLine", "true").option(
        "escape", '"').csv(path) if path.endswith((".csv", ".csv.gz")) \
        else spark.read.parquet(path)
    require_columns(df, [*columns, id_col], path)
    if not id_col:
        # bag_of_words sentences: doc_id + sentence_idx identify a sentence (null when
        # either is null: such a row is rejected, not given a partial id)
        if {"doc_id", "sentence_idx"} <= set(df.columns):
            df = df.withColumn(ROW_ID, F.concat(F.col("doc_id").cast("string"), F.lit(":"),
                                                F.col("sentence_idx").cast("string")))
        else:
            df = df.withColumn(ROW_ID, F.monotonically_increasing_id().cast("string"))
    return df
