"""Columns by their exact names, for every function that takes a column name.

Spark reads a name given to ``F.col`` or ``df[...]`` as an expression: ``page.html`` is the
field ``html`` of a column ``page``, and a backtick starts a quoted part. Column names are
not expressions here, so a name with a dot, a space or a backtick names the column that has
it. :func:`column` is the one way the library refers to a column a user names.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def quoted(name: str) -> str:
    """``name`` as Spark's parser reads one exact column name (backticks around it, each
    backtick inside doubled)."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The column named exactly ``name`` (``case:concept:name``, ``page.html``), never
    read as a field path."""
    return F.col(quoted(name))
