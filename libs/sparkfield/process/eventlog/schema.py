"""The canonical event-log schema every reader produces and every view consumes."""

from __future__ import annotations

from pyspark.sql import types as T

CASE, ACTIVITY, TIMESTAMP = "case_id", "activity", "timestamp"
RESOURCE, LIFECYCLE, ATTRIBUTES = "resource", "lifecycle", "attributes"
# tie-break of equal timestamps: the mapping's activity order, then the source row order
# (for a log file: 0, then the file order)
SRC_ORDER, ROW_ORDER = "src_order", "row_order"

EVENT_SCHEMA = T.StructType(
    [
        T.StructField(CASE, T.StringType(), False),
        T.StructField(ACTIVITY, T.StringType(), False),
        T.StructField(TIMESTAMP, T.TimestampType(), False),
        T.StructField(RESOURCE, T.StringType(), True),
        T.StructField(LIFECYCLE, T.StringType(), True),
        T.StructField(ATTRIBUTES, T.MapType(T.StringType(), T.StringType()), True),
        T.StructField(SRC_ORDER, T.IntegerType(), False),
        T.StructField(ROW_ORDER, T.LongType(), False),
    ]
)
EVENT_COLUMNS = [f.name for f in EVENT_SCHEMA.fields]
# a SQL view has no row order (row_order is 0 for its rows): its ties fall back to the name
ORDER = [TIMESTAMP, SRC_ORDER, ROW_ORDER, ACTIVITY]
