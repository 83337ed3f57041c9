"""Sparkfield: PySpark jobs for text, geo and process analytics.

Each area (``geo``, ...) exposes ``run(spark, cfg)``; ``core`` holds what they share.
Nothing here creates a SparkSession or reads configuration at import time.
"""

__version__ = "0.1.0"
