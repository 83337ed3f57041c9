"""Spark NLP engine: DocumentAssembler -> sentence-embeddings annotator loaded from a local
folder -> EmbeddingsFinisher, with the torch engine's output schema. It needs the Spark NLP jar
on the JVM classpath; without it this fails at once and says which coordinate to pass."""

from __future__ import annotations

import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.errors import ConfigError
from sparkfield.nlp.embed import split_texts

SPARK_NLP_VERSION = "7.0.0"  # the Spark NLP line that supports pyspark 4.1 (Scala 2.13)
ANNOTATORS = {
    "bert": "BertSentenceEmbeddings",
    "e5": "E5Embeddings",
    "minilm": "MiniLMEmbeddings",
}


class EngineUnavailable(ConfigError):
    """A missing piece of the environment: exit 2 with what to install or pass."""


def coordinate(gpu: bool = False) -> str:
    artifact = "spark-nlp-gpu_2.13" if gpu else "spark-nlp_2.13"
    return f"com.johnsnowlabs.nlp:{artifact}:{SPARK_NLP_VERSION}"


def require_spark_nlp(spark: SparkSession) -> None:
    """Fail fast, before any work, when the JVM classes or the Python package are missing."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName("com.johnsnowlabs.nlp.DocumentAssembler", False,
                                    jvm.Thread.currentThread().getContextClassLoader())
    except Exception as exc:
        raise EngineUnavailable(
            "--engine sparknlp needs the Spark NLP jar on the classpath, and it is not there. "
            f"For pyspark {pyspark.__version__} (Scala 2.13) pass "
            f"--packages {coordinate()} (GPU: {coordinate(gpu=True)}) on a cluster that "
            "reaches Maven Central, or --jars with a downloaded spark-nlp jar; "
            "then pip install spark-nlp==" + SPARK_NLP_VERSION) from exc
    try:
        import sparknlp  # noqa: F401
    except ImportError as exc:
        raise EngineUnavailable(f"pip install spark-nlp=={SPARK_NLP_VERSION} "
                                "(the Python side of the engine)") from exc


def embed_sparknlp(spark: SparkSession, df: DataFrame, text_col: str, id_col: str,
                   model_dir: str, annotator: str = "minilm") -> DataFrame:
    require_spark_nlp(spark)
    import sparknlp.annotator as ann
    from pyspark.ml import Pipeline
    from sparknlp.base import DocumentAssembler, EmbeddingsFinisher

    cls = getattr(ann, ANNOTATORS[annotator])
    ok, bad = split_texts(df, text_col, id_col)  # the torch engine's rejects, same reasons
    pipeline = Pipeline(stages=[
        DocumentAssembler().setInputCol("text").setOutputCol("document"),
        cls.load(model_dir).setInputCols(["document"]).setOutputCol("sentence_embeddings"),
        EmbeddingsFinisher().setInputCols(["sentence_embeddings"])
        .setOutputCols(["finished"]).setOutputAsVector(False),
    ])
    out = pipeline.fit(ok).transform(ok).select(
        "id", "text", F.element_at("finished", 1).cast("array<float>").alias("embedding"),
        F.lit(None).cast("boolean").alias("truncated"),
        F.lit(None).cast("string").alias("reason"))
    return out.unionByName(bad)
