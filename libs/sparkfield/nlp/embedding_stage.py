"""Sentence embeddings as a Spark ML stage: :class:`SentenceEmbeddings`, a
:class:`pyspark.ml.Transformer` from a text column to a vector column, usable alone or in a
:class:`pyspark.ml.Pipeline` beside Spark's own stages, on classic Spark and over Spark Connect.

It runs the embed job's own engine (:func:`~sparkfield.nlp.embed.embedding_column`, made ready
by :func:`~sparkfield.nlp.embed.ready`), and takes its defaults, checks and help texts from the
job's schema (:data:`~sparkfield.nlp.params.EMBED`). It saves and loads itself through the
DataFrame API (:mod:`sparkfield.core.ml`), so persistence needs no SparkContext either."""

from __future__ import annotations

from typing import Any

from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.functions import array_to_vector
from pyspark.ml.param import Param, TypeConverters
from pyspark.ml.param.shared import HasInputCol, HasOutputCol
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.columns import column, require_columns
from sparkfield.core.errors import ConfigError
from sparkfield.core.ml import Persistent, StageParams, given, schema_param
from sparkfield.nlp.embed import EMBEDDING, embedding_column, ready, worker_threads
from sparkfield.nlp.encoder import PRECISIONS
from sparkfield.nlp.engine import ENGINES, EngineSpec
from sparkfield.nlp.params import EMBED

# stage param -> the embed job's key whose default, checks and help text it takes
JOB_KEYS = {
    "inputCol": "text_col",
    "engine": "engine",
    "quantize": "quantize",
    "batchSize": "batch_size",
    "maxTokens": "max_tokens",
    "modelPath": "model",
    "onnxDir": "onnx_dir",
    "device": "device",
    "bucket": "bucket",
    "precision": "precision",
}
NULLABLE = {name for name, key in JOB_KEYS.items() if EMBED.by_key[key].allows_null}


def _param(name: str, base: Any, allowed: tuple[str, ...] | None = None,
           doc: str | None = None) -> Param:
    """A stage param with the job key's help text (or ``doc``) and checks."""
    return schema_param(EMBED, name, JOB_KEYS[name], base, doc, allowed)


def _job_defaults(*names: str) -> dict[str, Any]:
    return {name: EMBED.by_key[JOB_KEYS[name]].default for name in names}


class ModelParams(StageParams):
    """The model params every stage running the embed job's engine shares (this module's
    :class:`SentenceEmbeddings`, :mod:`sparkfield.nlp.classify`'s classifiers), checked as
    the embed job's keys and with their defaults."""

    modelPath = _param("modelPath", TypeConverters.toString,
                       doc="local model folder (None: SentenceEmbeddings' bundled model; a "
                       "classifier needs one)")
    device = _param("device", TypeConverters.toString)
    batchSize = _param("batchSize", TypeConverters.toInt)
    bucket = _param("bucket", TypeConverters.toBoolean)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(**_job_defaults("modelPath", "device", "batchSize", "bucket"))


class _SentenceEmbeddingsParams(HasInputCol, HasOutputCol, ModelParams):
    """SentenceEmbeddings' own params and defaults (the embed job's)."""

    engine = _param("engine", TypeConverters.toString, ENGINES,
                    "torch, or onnx: ONNX Runtime on an export of the model (made once, cached "
                    "on disk)")
    quantize = _param("quantize", TypeConverters.toString)
    maxTokens = _param("maxTokens", TypeConverters.toInt)
    onnxDir = _param("onnxDir", TypeConverters.toString)
    precision = _param("precision", TypeConverters.toString, PRECISIONS)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(outputCol=EMBEDDING, **_job_defaults(
            "inputCol", "engine", "quantize", "maxTokens", "onnxDir", "precision"))


class SentenceEmbeddings(Transformer, _SentenceEmbeddingsParams, Persistent):
    """Text column -> sentence-embedding vector column (``pyspark.ml.linalg.DenseVector``,
    ``VectorUDT``: what Spark ML's feature, clustering and LSH stages take), L2-normalised,
    384 dimensions with the bundled all-MiniLM-L6-v2. Every input row is kept; a null or blank
    text gets a null vector (the embed job rejects it as "null text" / "empty text"). Texts
    longer than ``maxTokens`` are truncated.

    ``modelPath``: a local model folder (``None``: the bundled model). On classic Spark it is
    checked on the driver and, off a local master, shipped to the executors (as is the ONNX
    export, made on the driver). Over Spark Connect nothing is shipped: the path must be one
    the server's executors can read (a local folder on a one-machine server, or shared
    storage), and they check it and make any ONNX export there (``onnxDir`` for a read-only
    model folder).

    ``transform`` runs no Spark job: the texts are embedded when the result is computed (on
    classic Spark it checks the model folder, makes any ONNX export and ships the folders
    first). ``save``/``load`` work on both kinds of session, and so does a ``Pipeline`` or
    ``PipelineModel`` holding this stage (pyspark saves each stage through its own writer)."""

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 engine: str | None = None, quantize: str | None = None,
                 batchSize: int | None = None, maxTokens: int | None = None,
                 modelPath: str | None = None, onnxDir: str | None = None,
                 device: str | None = None, bucket: bool | None = None,
                 precision: str | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, inputCol: str | None = None, outputCol: str | None = None,
                  engine: str | None = None, quantize: str | None = None,
                  batchSize: int | None = None, maxTokens: int | None = None,
                  modelPath: str | None = None, onnxDir: str | None = None,
                  device: str | None = None, bucket: bool | None = None,
                  precision: str | None = None) -> SentenceEmbeddings:
        """Sets the params given; ``None`` sets ``modelPath`` or ``onnxDir`` back to their
        defaults' meaning and leaves the others as they are."""
        return self._set(**given(self._input_kwargs, NULLABLE))

    # --- transform -------------------------------------------------------------------------

    def engine_spec(self, spark: SparkSession) -> EngineSpec:
        """What each worker builds, made ready for this session (:func:`ready`)."""
        if self.getQuantize() != "none" and self.getEngine() != "onnx":
            raise ConfigError(f"quantize {self.getQuantize()} needs engine onnx")
        spec = EngineSpec(self.getModelPath(), self.getEngine(), self.getDevice(),
                          self.getMaxTokens(), threads=worker_threads(spark),
                          quantize=self.getQuantize(), onnx_dir=self.getOnnxDir(),
                          precision=self.getPrecision())
        return ready(spark, spec)

    def _transform(self, dataset: DataFrame) -> DataFrame:
        text, out = self.getInputCol(), self.getOutputCol()
        require_columns(dataset, [text])
        if out in dataset.columns:
            raise ConfigError(f"output column {out!r} already exists")
        encoded = embedding_column(column(text), self.engine_spec(dataset.sparkSession),
                                   self.getBatchSize(), self.getBucket())[EMBEDDING]
        # array_to_vector fails on a null array; the UDF still runs once per row
        return dataset.withColumn(out, F.when(encoded.isNotNull(), array_to_vector(encoded)))
