"""What every inference stage does alike (:class:`HeadStage`): the engine made ready (the
model folder checked and shipped, the ONNX export made, the int8 check run), the columns
checked, and ``transform`` as the result column without its timings."""

from __future__ import annotations

from typing import Any

from pyspark.ml import Transformer
from pyspark.sql import Column, DataFrame

from sparkfield.core.columns import require_columns
from sparkfield.core.connect import is_connect
from sparkfield.core.errors import ConfigError
from sparkfield.core.ml import Persistent, given
from sparkfield.nlp.embed import SPLIT, EngineSpec, ready, worker_threads
from sparkfield.nlp.head_params import NULLABLE, HeadParams
from sparkfield.nlp.heads import read_head
from sparkfield.nlp.model import check_max_tokens, check_model_dir


class HeadStage(Transformer, HeadParams, Persistent):
    """What every inference stage does alike: the engine made ready, the columns checked."""

    task = ""  # EngineSpec.task
    kind = ""  # what the folder's architectures must name

    def _set_params(self, kwargs: dict[str, Any]) -> HeadStage:
        return self._set(**given(kwargs, NULLABLE))

    # --- transform -------------------------------------------------------------------------

    def engine_spec(self, dataset: DataFrame, **extra: Any) -> EngineSpec:
        """What each worker builds, made ready for this session (checked and shipped on
        classic Spark, the ONNX export made here; over Connect the executors check the
        folder and export). With quantize int8 and int8Check not off, runs a Spark job: int8
        against fp32 on a sample of ``dataset`` (:func:`~sparkfield.nlp.int8_check.check_int8`).
        """
        folder = self.getModelPath()
        if not folder:
            raise ConfigError(f"{type(self).__name__} needs modelPath (a local model folder)")
        engine, quantize = self.getEngine(), self.getQuantize()
        if quantize != "none" and engine != "onnx":
            raise ConfigError(f"{type(self).__name__}: quantize {quantize} needs engine onnx "
                              f"(engine is {engine})")
        spark = dataset.sparkSession
        if not is_connect(spark):  # the folder is the driver's: fail before shipping it
            here = check_model_dir(folder)
            read_head(here, self.kind)
            check_max_tokens(here, self.getMaxTokens())
        spec = ready(spark, EngineSpec(
            folder, engine, self.getDevice(), self.getMaxTokens(), quantize=quantize,
            threads=worker_threads(spark), task=self.task, precision=self.getPrecision(),
            **extra))
        if quantize == "int8" and self.getInt8Check() != "off":
            from sparkfield.nlp.int8_check import check_int8

            check_int8(dataset, self, spec)
        return spec

    def _inputs(self, dataset: DataFrame) -> list[str]:
        return [self.getInputCol()]

    def _check_columns(self, dataset: DataFrame) -> None:
        require_columns(dataset, self._inputs(dataset))
        if self.getOutputCol() in dataset.columns:
            raise ConfigError(f"output column {self.getOutputCol()!r} already exists")

    def timed_result(self, dataset: DataFrame) -> Column:
        """The result column of ``dataset``'s rows with a last field :data:`SPLIT`: where
        each Arrow batch's time went (on its first row), which the infer job sums."""
        raise NotImplementedError

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return dataset.withColumn(self.getOutputCol(),
                                  self.timed_result(dataset).dropFields(SPLIT))


