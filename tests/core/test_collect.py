"""Small results collected side by side."""

from __future__ import annotations

import pandas as pd
from pyspark.sql import types as T

from sparkfield.core.collect import collect_small


def test_every_frame_is_collected_in_the_order_given_and_pandas_kept(spark):
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("n", T.LongType())])
    rows = spark.createDataFrame([("a", 1), ("b", 2), (None, 3)], schema)
    given = pd.DataFrame({"x": [1]})
    got = collect_small({"sums": rows.groupBy("k").sum("n").orderBy("k"), "given": given,
                         "empty": rows.where("n > 9"), "all": rows.orderBy("n")})
    assert list(got) == ["sums", "given", "empty", "all"]
    assert got["given"] is given
    assert got["sums"]["sum(n)"].tolist() == [3, 1, 2]  # the null key sorts first
    assert got["empty"].empty and list(got["empty"].columns) == ["k", "n"]
    assert got["all"]["n"].tolist() == [1, 2, 3]
    one = collect_small({"all": rows.orderBy("n")})  # a single action: on this thread
    assert one["all"]["k"].tolist() == ["a", "b", None]
