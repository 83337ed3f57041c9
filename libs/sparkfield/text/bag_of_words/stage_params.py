"""What the text area's Spark ML stages share: params checked like the bag_of_words job's keys
(their defaults and help texts taken from the job's schema); persistence is
:mod:`sparkfield.core.ml`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.ml.param import Param, TypeConverters

from sparkfield.core.errors import ConfigError
from sparkfield.core.ml import SchemaChecked, schema_param
from sparkfield.text.params import BAG_OF_WORDS


def job_default(key: str) -> Any:
    """The bag_of_words job's default of ``key``."""
    return BAG_OF_WORDS.by_key[key].default


def job_param(name: str, key: str, base: Any, doc: str | None = None) -> Param:
    """A stage param checked as the job's ``key``, with its help text unless ``doc``."""
    return schema_param(BAG_OF_WORDS, name, key, base, doc)


def optional_string(value: Any) -> str | None:
    """A type converter: a string, or None (the column is left out)."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected a column name or None, got {value!r}")


def non_negative(value: Any) -> float:
    """A type converter: a number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TypeError(f"expected a number >= 0, got {value!r}")
    return float(value)


# the vocabulary's checks, shared by PinnedCountVectorizer's params and token_vocabulary
VOCAB_SIZE = SchemaChecked(BAG_OF_WORDS, "vocab_size", TypeConverters.toInt)
MIN_DF = non_negative


def checked_arg(name: str, convert: Callable[[Any], Any], value: Any) -> Any:
    """``value`` through a stage param's type converter; a ConfigError naming the argument
    ``name`` where the param would refuse it."""
    try:
        return convert(value)
    except TypeError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def vocabulary_args(vocab_size: Any, min_df: Any) -> tuple[int, float]:
    """``vocab_size`` and ``min_df`` checked as the stage checks ``vocabSize`` and ``minDF``."""
    return (checked_arg("vocab_size", VOCAB_SIZE, vocab_size),
            checked_arg("min_df", MIN_DF, min_df))
