"""Scraped corpora to bag-of-words: polite fetching, HTML parsing, Punkt sentences, a pinned
token rule and Spark ML vectors; as the bag_of_words job (:func:`run`), as Spark ML stages
(:class:`HtmlToText`, :class:`SentenceSplitter`, :class:`WordTokenizer`,
:class:`PinnedCountVectorizer`) and as DataFrame functions (:func:`html_to_text`,
:func:`split_sentences`, :func:`tokenize`, :func:`token_vocabulary`)."""

from sparkfield.text.bag_of_words.functions import (
    html_to_text,
    split_sentences,
    token_vocabulary,
    tokenize,
)
from sparkfield.text.bag_of_words.stages import (
    HtmlToText,
    PinnedCountVectorizer,
    SentenceSplitter,
    WordTokenizer,
)
from sparkfield.text.job import BagOfWordsResult, run

__all__ = ["BagOfWordsResult", "HtmlToText", "PinnedCountVectorizer", "SentenceSplitter",
           "WordTokenizer", "html_to_text", "run", "split_sentences", "token_vocabulary",
           "tokenize"]
