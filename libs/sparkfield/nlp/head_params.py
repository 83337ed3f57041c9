"""The params every inference stage shares (:class:`HeadParams`: the model params of every
engine stage, the text's length limit and what a longer text gets, the precision, the engine
and the int8 check) and the checked type converters the stages declare their own params with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasInputCol, HasOutputCol

from sparkfield.nlp.embedding_stage import ModelParams
from sparkfield.nlp.encoder import PRECISIONS
from sparkfield.nlp.engine import ENGINES
from sparkfield.nlp.onnx_engine import QUANTIZE

LONG_TEXT = ("truncate", "reject")


def checked(base: Callable[[Any], Any], problem: Callable[[Any], str | None]) -> Callable:
    """A type converter: ``base``, then ``problem`` (None: fine); Params._set names the
    param in the TypeError."""

    def convert(value: Any) -> Any:
        value = base(value)
        found = problem(value)
        if found:
            raise TypeError(found)
        return value

    return convert


def one_of(*allowed: str) -> Callable:
    return checked(TypeConverters.toString, lambda v: None if v in allowed else
                    f"must be one of {', '.join(allowed)}, got {v!r}")


def at_least(low: int, nullable: bool = False) -> Callable:
    def problem(v: int | None) -> str | None:
        return None if (v is None and nullable) or (v is not None and v >= low) else \
            f"must be >= {low}, got {v!r}"

    def base(v: Any) -> int | None:
        return None if v is None and nullable else TypeConverters.toInt(v)

    return checked(base, problem)


def _share(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else f"must be a share from 0 to 1, got {v!r}"


def optional_string(v: Any) -> str | None:
    return None if v is None else TypeConverters.toString(v)


def stage_param(name: str, doc: str, converter: Callable) -> Param:
    return Param(Params._dummy(), name, doc, typeConverter=converter)


NULLABLE = frozenset({"modelPath", "maxTokens", "pairCol"})


INT8_CHECKS = ("warn", "refuse", "off")


class HeadParams(HasInputCol, HasOutputCol, ModelParams):
    """The params both classifiers share: the model params of every engine stage (folder,
    device, batching), then the text's length limit, what a longer text gets, the precision,
    the engine (torch, or ONNX Runtime with optional int8) and the int8 accuracy check
    (:mod:`sparkfield.nlp.int8_check`).
    """

    maxTokens = stage_param("maxTokens", "tokens per text (>= 8); None: the model's window",
                       at_least(8, nullable=True))
    onLongText = stage_param("onLongText", "a text over maxTokens: truncate (and flag it), or "
                        "reject (null result, reason 'too long')", one_of(*LONG_TEXT))
    precision = stage_param("precision", "fp32, fp16 or bf16 on a GPU; a CPU runs bf16 where "
                       "it multiplies it natively (AVX-512 BF16, AMX), fp32 otherwise",
                       one_of(*PRECISIONS))
    engine = stage_param("engine", "torch, or onnx: ONNX Runtime on an export of the model's "
                    "logits (made once, cached in the model folder)", one_of(*ENGINES))
    quantize = stage_param("quantize", "none, or int8: dynamic int8 of the ONNX export (needs "
                      "engine onnx)", one_of(*QUANTIZE))
    int8Check = stage_param("int8Check", "with quantize int8, compare int8 against fp32 on a "
                       "sample of the input: warn or refuse past int8MaxDisagreement, or off",
                       one_of(*INT8_CHECKS))
    int8MaxDisagreement = stage_param("int8MaxDisagreement", "the largest share of sampled rows "
                                 "(token classification: of tokens) whose int8 label may differ "
                                 "from fp32's", checked(TypeConverters.toFloat, _share))
    int8SampleRows = stage_param("int8SampleRows", "non-blank input rows the int8 check compares "
                            "(>= 1)", at_least(1))

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(inputCol="text", maxTokens=None, onLongText="truncate",
                         precision="fp32", engine="torch", quantize="none", int8Check="warn",
                         int8MaxDisagreement=0.02, int8SampleRows=256)


