"""The session figures building blocks use, equal on classic Spark and over Spark Connect
(this file also runs over Connect: tests/test_connect.py)."""

from __future__ import annotations

import pytest

from sparkfield.core.connect import default_parallelism, is_connect, require_classic
from sparkfield.core.errors import ConfigError


def test_default_parallelism_is_the_task_slots(spark):
    # the tests' classic session and the Connect server both run local[2]
    assert default_parallelism(spark) == 2
    if not is_connect(spark):
        assert default_parallelism(spark) == spark.sparkContext.defaultParallelism


def test_what_needs_classic_spark_says_so_over_connect(spark):
    if is_connect(spark):
        with pytest.raises(ConfigError, match="stage metrics needs classic Spark"):
            require_classic(spark, "stage metrics")
    else:
        require_classic(spark, "stage metrics")  # nothing to say
