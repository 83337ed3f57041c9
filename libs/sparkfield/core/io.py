"""Reading with rejects, and atomic writing of a job's output directory.

Outputs go to a staging directory beside the final one and are swapped into place only when
the whole job succeeded, so a failed run leaves the previous result untouched and a repeated
run never leaves a mix of two; ``_SUCCESS`` is written last (on an object store a folder's
rename copies file after file). All file operations go through Hadoop's FileSystem API, so the
same code writes to local disk, HDFS or an object store.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.csv_header import column_names, folder_headers_checkable
from sparkfield.core.csv_utf8 import mark_not_utf8, reads_utf8
from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.filesystem import hadoop_fs
from sparkfield.core.parts import CSV_PART_OPTIONS, append_parts, csv_header_line, written_parts
from sparkfield.core.paths import driver_private_path, hidden_sibling
from sparkfield.core.worker_parquet import ArrowRows, codec, write_worker_parquet

CORRUPT_COL = "_corrupt_record"
SUCCESS = "_SUCCESS"  # an output's last file: whole once it is there (see docs/operations.md)

REJECTS_SCHEMA = T.StructType([T.StructField("source", T.StringType(), False),
                               T.StructField("reason", T.StringType(), False),
                               T.StructField("record", T.StringType(), True)])


def path_exists(spark: SparkSession, path: str) -> bool:
    fs, jpath = hadoop_fs(spark, path)
    return bool(fs.exists(jpath))


def require_path(spark: SparkSession, path: str, what: str) -> None:
    """Fail early, naming the flag's meaning, when an input does not exist."""
    if not path_exists(spark, path):
        raise InputError(f"{what} not found: {path}")


def read_bytes(spark: SparkSession, path: str, last: int | None = None) -> bytes:
    """The whole content of a small file from any Hadoop filesystem, or its ``last`` bytes,
    read on the driver."""
    fs, jpath = hadoop_fs(spark, path)
    stream = fs.open(jpath)
    try:
        if last is not None:
            stream.seek(max(0, fs.getFileStatus(jpath).getLen() - last))
        jvm = spark.sparkContext._jvm
        data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data)


def read_text_file(spark: SparkSession, path: str) -> str:
    """The whole content of a small file (conf, GeoJSON) from any Hadoop filesystem."""
    raw = read_bytes(spark, path)
    if path.endswith(".gz"):
        import gzip
        import zlib

        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(f"{path}: truncated or corrupt gzip file ({exc})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


# columnPruning off: read line by line (multiLine false), Spark's parser would otherwise parse
# only the columns a query selects and take a line with too many or too few fields for a good row
CSV_DEFAULTS = {"multiLine": "true", "escape": '"', "columnPruning": "false"}


def csv_options(**options: str) -> dict[str, str]:
    """The options CSV sources are read with: RFC 4180 as spreadsheets, pandas and pm4py read
    it (a quoted field may hold line breaks, a quote inside quotes is doubled), then the
    caller's options, which win whatever their spelling (Spark's option names ignore case).
    ``multiLine: "false"`` lets Spark split large files known to have no quoted line breaks."""
    given = {k.lower() for k in options}
    return {**{k: v for k, v in CSV_DEFAULTS.items() if k.lower() not in given}, **options}


def read_csv_strings(spark: SparkSession, path: str, **options: str) -> DataFrame:
    """A CSV with every column as string plus ``_corrupt_record`` for rows that do not parse
    (wrong number of fields, broken quoting). Typing is left to the caller, who can then say
    exactly why a value is unusable instead of Spark silently turning it into null. Read with
    :func:`csv_options`, so quoted line breaks stay inside their field; a row with bytes that
    are not UTF-8 (read as UTF-8) is a malformed row too."""
    require_path(spark, path, "input")
    options = csv_options(**options)
    cols = column_names(spark, path, options)  # without scanning the file
    if not cols:
        raise InputError(f"{path}: empty file or no header")
    schema = T.StructType(
        [T.StructField(c, T.StringType(), True) for c in cols]
        + [T.StructField(CORRUPT_COL, T.StringType(), True)]
    )
    if folder_headers_checkable(spark, path, options, cols):
        options = {**options, "enforceSchema": "false"}
    df = (spark.read.options(header="true", mode="PERMISSIVE",
                             columnNameOfCorruptRecord=CORRUPT_COL, **options)
          .schema(schema).csv(path))
    return mark_not_utf8(df, cols, CORRUPT_COL) if reads_utf8(options) else df


def corrupt_record(df: DataFrame) -> Column:
    """The unparsed line of a CSV row with the wrong number of fields (null otherwise, and
    for sources that are not CSV)."""
    return F.col(CORRUPT_COL) if CORRUPT_COL in df.columns else F.lit(None).cast("string")


def as_record(df: DataFrame, exclude: Sequence[str] = (),
              fields: Sequence[str] | None = None) -> Column:
    """The raw row (or its ``fields``) as JSON text, or the unparsed line for a row CSV could
    not parse, for rejects."""
    cols = [c for c in (df.columns if fields is None else fields)
            if c != CORRUPT_COL and c not in exclude]
    as_json = F.to_json(F.struct(*[F.col(f"`{c}`") for c in cols]))
    if CORRUPT_COL in df.columns:
        return F.coalesce(F.col(CORRUPT_COL), as_json)
    return as_json


def rejects_of(df: DataFrame, source: str | Column, reason_col: str = "reject_reason",
               fields: Sequence[str] | None = None) -> DataFrame:
    """Rows of ``df`` whose ``reason_col`` is set, in the shared rejects schema (source, reason,
    record). ``source`` is a name or a column (one frame holding several sources); the record
    is ``fields`` (default: every column but the reason) as JSON, or the unparsed line."""
    src = F.lit(source) if isinstance(source, str) else source
    return df.where(F.col(reason_col).isNotNull()).select(
        src.alias("source"),
        F.col(reason_col).alias("reason"),
        as_record(df, exclude=(reason_col,), fields=fields).alias("record"),
    )


def rejects_from_rows(spark: SparkSession, rows: Iterable[Sequence[Any]]) -> DataFrame:
    """Rejects found on the driver (source, reason, record) in the shared rejects schema."""
    return spark.createDataFrame([tuple(r) for r in rows], REJECTS_SCHEMA)


REPORT_FILE = "run_report.json"
_PSEUDO_FS = ("/proc", "/sys", "/dev")


def _is_job_report(text: str, job: str | None) -> bool:
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict) and "job" in doc and (job is None or doc["job"] == job)


def _refusal(path: str, job: str | None) -> str:
    who = f"a {job} output" if job else "a Sparkfield output"
    return (f"--output {path} exists and is not {who} (no {REPORT_FILE} from an earlier "
            "run): refusing to replace it; give an empty or new directory")


def local_output_problem(path: str, job: str | None = None) -> str | None:
    """Why ``path`` (a local output directory) must not be written, or None.

    A missing or empty directory is fine, and so is a directory this job wrote before
    (recognised by its run_report.json). Anything else (a file, someone's folder, an input,
    the working directory, a path under a file or on /proc) is refused, untouched."""
    target = os.path.abspath(path.removeprefix("file:"))
    if target == "/" or any(target == p or target.startswith(p + "/") for p in _PSEUDO_FS):
        return f"--output {path}: not a place for outputs"
    cwd = os.getcwd()
    if cwd == target or cwd.startswith(target.rstrip("/") + "/"):
        return f"--output {path} is the working directory or one of its parents"
    if os.path.isdir(target):
        if not os.listdir(target):
            return None
        report = os.path.join(target, REPORT_FILE)
        try:
            with open(report, encoding="utf-8") as fh:
                if _is_job_report(fh.read(), job):
                    return None
        except (OSError, UnicodeDecodeError):
            pass
        return _refusal(path, job)
    if os.path.lexists(target):
        return f"--output {path} is a file, not a directory: refusing to replace it"
    parent = os.path.dirname(target)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"--output {path}: {parent} is a file, not a directory"
    if not os.access(parent, os.W_OK):
        return f"--output {path}: {parent} is not writable"
    return None


def output_problem(spark: SparkSession, path: str, job: str | None = None) -> str | None:
    """``local_output_problem`` for any Hadoop filesystem."""
    fs, jpath = hadoop_fs(spark, path)
    if fs.getUri().getScheme() == "file":
        return local_output_problem(jpath.toUri().getPath(), job)
    if not fs.exists(jpath):
        return None
    if not fs.getFileStatus(jpath).isDirectory():
        return f"--output {path} is a file, not a directory: refusing to replace it"
    if len(fs.listStatus(jpath)) == 0:
        return None
    report = jpath.suffix("/" + REPORT_FILE)
    if fs.exists(report):
        stream = fs.open(report)
        try:
            jvm = spark.sparkContext._jvm
            raw = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()
        if _is_job_report(raw.decode("utf-8", "replace"), job):
            return None
    return _refusal(path, job)


class AtomicOutput:
    """A job's output directory, written in a staging directory and swapped in on commit.

    Use as a context manager: the staging directory is committed when the block succeeds
    and deleted when it raises. Only a missing or empty directory, or an earlier output of a
    job (its run_report.json), is ever replaced: anything else raises InputError at once.
    """

    def __init__(self, spark: SparkSession, final_path: str, job: str | None = None):
        self.spark = spark
        self.final = final_path.rstrip("/")
        problem = output_problem(spark, self.final, job)
        if problem:
            raise InputError(problem)
        private = driver_private_path(self.final, spark)
        if private is not None:
            raise ConfigError(
                f"--output {final_path} is on the driver's local disk ({private}), which the "
                f"executors of {spark.sparkContext.master} cannot share: give a path every "
                "node reaches (hdfs://, s3a://, a shared mount)")
        token = uuid.uuid4().hex[:12]
        # hidden: a reader of OUT/run_date=* must not take a run in progress for a partition
        self.staging = hidden_sibling(self.final, f".__staging-{token}")
        self._old = hidden_sibling(self.final, f".__old-{token}")
        self.files: list[str] = []
        self._aborted = False
        fs, _ = hadoop_fs(spark, self.staging)
        self._local = fs if fs.getUri().getScheme() == "file" else None
        if self._local is not None:
            fs.setWriteChecksum(False)  # no .crc side files next to the outputs

    def path(self, name: str) -> str:
        if self._aborted:  # a part still running after the run failed: nothing more is made
            raise OSError(f"{self.final}: the run's output was aborted; {name} not written")
        self.files.append(name)
        return f"{self.staging}/{name}"

    def write_bytes(self, name: str, data: bytes) -> str:
        fs, jpath = hadoop_fs(self.spark, self.path(name))
        out = fs.create(jpath, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        return f"{self.final}/{name}"

    def write_text(self, name: str, text: str) -> str:
        return self.write_bytes(name, text.encode("utf-8"))

    def write_csv(self, name: str, frame: pd.DataFrame) -> str:
        """A small result (already on the driver) as one CSV file."""
        buf = io.StringIO()
        frame.to_csv(buf, index=False, lineterminator="\n")
        return self.write_text(name, buf.getvalue())

    def write_parquet(self, name: str, df: DataFrame, partitions: int | None = None) -> str:
        if partitions:
            df = df.coalesce(partitions)
        target = self.path(name)
        df.write.mode("overwrite").parquet(target)
        written_parts(self.spark, target)
        return f"{self.final}/{name}"

    def write_arrow_rows(self, name: str, rows: ArrowRows) -> str:
        """``rows`` as Parquet: by the Python workers on a local path, by Spark elsewhere."""
        compression = codec(self.spark.conf.get("spark.sql.parquet.compression.codec", "snappy"))
        if self._local is None or compression is None:  # not local, or a codec pyarrow lacks
            return self.write_parquet(name, rows.frame())
        fs, jpath = hadoop_fs(self.spark, self.path(name))
        write_worker_parquet(rows, fs.makeQualified(jpath).toUri().getPath(), compression)
        return f"{self.final}/{name}"

    def write_single_csv(self, name: str, df: DataFrame) -> str:
        """A DataFrame (already in its final order) as one CSV file with a header, written by
        the executors: fine for tables too big to collect. Each partition is written as a
        part by its own task, side by side, and the parts are joined in partition order (the
        rows' order, as one task reading the partitions in turn would write them)."""
        parts = f"{self.staging}/{name}.__parts"
        df.write.mode("overwrite").options(**CSV_PART_OPTIONS).csv(parts)
        fs, target = hadoop_fs(self.spark, self.path(name))
        out = fs.create(target, True)
        try:
            out.write(bytearray(csv_header_line(df.columns).encode("utf-8")))
            append_parts(self.spark, parts, out)
        finally:
            out.close()
        return f"{self.final}/{name}"

    def _checksums_back(self) -> None:
        """The session's local file system (shared by all its writes) writes .crc files again."""
        if self._local is not None:
            self._local.setWriteChecksum(True)
            self._local = None

    def commit(self) -> None:
        try:
            self._commit()
        finally:
            self._checksums_back()

    def _commit(self) -> None:
        fs, final = hadoop_fs(self.spark, self.final)
        _, staging = hadoop_fs(self.spark, self.staging)
        _, old = hadoop_fs(self.spark, self._old)
        if not fs.exists(staging):
            fs.mkdirs(staging)
        parent = final.getParent()
        if parent is not None and not fs.exists(parent):
            fs.mkdirs(parent)
        had_old = bool(fs.exists(final))
        _, mark = hadoop_fs(self.spark, f"{self.final}/{SUCCESS}")
        if had_old:  # first: where a rename is a copy, no reader takes the swap for an output
            fs.delete(mark, False)
        if had_old and not fs.rename(final, old):
            raise OSError(f"cannot move previous output {self.final} aside")
        if not fs.rename(staging, final):
            if had_old:
                fs.rename(old, final)
            raise OSError(f"cannot move {self.staging} to {self.final}")
        # Hadoop renames a folder onto an existing one by moving it inside: another run
        # published the output between the two renames. Its output stays (newer than the one
        # moved aside); this one's is moved back out, and the run fails rather than leave one
        # output nested in the other
        _, nested = hadoop_fs(self.spark, f"{self.final}/{staging.getName()}")
        raced = bool(fs.exists(nested))
        if raced:
            fs.rename(nested, staging)
        if had_old:
            fs.delete(old, True)
        if raced:
            raise OSError(f"another run published {self.final} while this one did: its output "
                          f"stays; this run's is left in {self.staging}")
        fs.create(mark, True).close()

    def abort(self) -> None:
        self._aborted = True
        try:
            fs, staging = hadoop_fs(self.spark, self.staging)
            if fs.exists(staging):
                fs.delete(staging, True)
        finally:
            self._checksums_back()

    def __enter__(self) -> AtomicOutput:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


@contextmanager
def optional_output(spark: SparkSession, final_path: str | None, job: str | None = None
                    ) -> Iterator[AtomicOutput | None]:
    """A job's output when it has one (None otherwise, e.g. from a notebook): deleted when the
    block raises; committing is the caller's last step (see ``stages.publish``)."""
    if not final_path:
        yield None
        return
    out = AtomicOutput(spark, final_path, job)
    try:
        yield out
    except BaseException:
        out.abort()
        raise
