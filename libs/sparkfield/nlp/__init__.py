"""Transformer stages on Spark: sentence embeddings (torch, or Spark NLP where its jar is on the
classpath), nearest neighbours, topics and attention maps. Models load from local folders only."""

from sparkfield.nlp.job import EmbedResult, run

__all__ = ["EmbedResult", "run"]
