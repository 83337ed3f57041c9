"""Sparkfield: PySpark jobs for text, geo and process analytics.

Every job has one ``run(spark, cfg)`` in its job module, and its area package (``geo``,
``nlp``, ``process``, ``text``) re-exports it; ``core`` holds what they share. The public
names of each area and the rules they follow: docs/api.md.
Nothing here creates a SparkSession or reads configuration at import time.
"""

__version__ = "0.1.0"
