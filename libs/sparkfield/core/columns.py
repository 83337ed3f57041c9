"""Columns by their exact names, for every function that takes a column name.

Spark reads a name given to ``F.col`` or ``df[...]`` as an expression: ``page.html`` is the
field ``html`` of a column ``page``, and a backtick starts a quoted part. Column names are
not expressions here, so a name with a dot, a space or a backtick names the column that has
it. :func:`column` is the one way the library refers to a column a user names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.errors import ColumnError


def quoted(name: str) -> str:
    """``name`` as Spark's parser reads one exact column name (backticks around it, each
    backtick inside doubled)."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The column named exactly ``name`` (``case:concept:name``, ``page.html``), never
    read as a field path."""
    return F.col(quoted(name))


def require_columns(df: DataFrame, names: Iterable[str | None], what: str = "") -> None:
    """:class:`ColumnError` naming the first of ``names`` (None: not asked for) that ``df``
    lacks, and the columns it has. ``what`` says whose column it is (``"stations"``)."""
    for name in names:
        if name is not None and name not in df.columns:
            where = f"{what}: " if what else ""
            raise ColumnError(f"{where}no column {name!r} (columns: {', '.join(df.columns)})")


def column_type(df: DataFrame, name: str, what: str = "") -> T.DataType:
    """The type of the column named exactly ``name``; :class:`ColumnError` when missing."""
    require_columns(df, [name], what)
    return next(f.dataType for f in df.schema.fields if f.name == name)


def require_type(df: DataFrame, name: str, allowed: Callable[[T.DataType], bool],
                 expected: str, what: str = "") -> T.DataType:
    """The column's type when ``allowed`` accepts it; else :class:`ColumnError` naming the
    column, the ``expected`` type and the type it has."""
    kind = column_type(df, name, what)
    if not allowed(kind):
        where = f"{what}: " if what else ""
        raise ColumnError(f"{where}column {name!r} must be {expected}, not "
                          f"{kind.simpleString()}")
    return kind
