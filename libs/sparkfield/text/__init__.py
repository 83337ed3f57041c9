"""Scraped corpora to bag-of-words: polite fetching, HTML parsing, Punkt sentences, a pinned
token rule and Spark ML vectors."""

from sparkfield.text.job import BagOfWordsResult, run

__all__ = ["BagOfWordsResult", "run"]
