"""What the text area's Spark ML stages share: params checked like the bag_of_words job's keys
(their defaults and help texts taken from the job's schema); persistence is
:mod:`sparkfield.core.ml`'s."""

from __future__ import annotations

from typing import Any

from pyspark.ml.param import Param

from sparkfield.core.ml import schema_param
from sparkfield.text.params import SCHEMA


def job_default(key: str) -> Any:
    """The bag_of_words job's default of ``key``."""
    return SCHEMA.by_key[key].default


def job_param(name: str, key: str, base: Any, doc: str | None = None) -> Param:
    """A stage param checked as the job's ``key``, with its help text unless ``doc``."""
    return schema_param(SCHEMA, name, key, base, doc)


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
