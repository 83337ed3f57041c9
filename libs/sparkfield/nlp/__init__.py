"""Transformer stages on Spark: sentence embeddings (torch or ONNX Runtime, or Spark NLP where
its jar is on the classpath), as a Spark ML stage (:class:`SentenceEmbeddings`) and as the embed
job (:func:`run`) with nearest neighbours, topics and attention maps. Models load from local
folders only."""

from sparkfield.nlp.job import EmbedResult, run
from sparkfield.nlp.stage import SentenceEmbeddings

__all__ = ["EmbedResult", "SentenceEmbeddings", "run"]
