"""The bag_of_words steps as Spark ML stages, for a ``pyspark.ml.Pipeline`` beside Spark's own
``CountVectorizer``, ``IDF`` or ``MinHashLSH``:

* :class:`HtmlToText`: HTML (text or bytes) -> document text and title;
* :class:`SentenceSplitter`: text -> an array of Punkt sentences (or one row per sentence);
* :class:`WordTokenizer`: text -> tokens by the pinned rule, stopwords optionally left out;
* :class:`PinnedCountVectorizer`: token arrays -> Spark's own ``CountVectorizerModel`` with the
  job's vocabulary (ties broken by word, so the same vocabulary every run).

Each stage calls the function of :mod:`sparkfield.text.bag_of_words.functions` the job calls,
takes its defaults from the job's schema, uses the DataFrame API only (classic Spark and Spark
Connect) and saves and loads itself (:mod:`sparkfield.core.ml`).
"""

from __future__ import annotations

from pyspark import keyword_only
from pyspark.ml import Estimator, Transformer
from pyspark.ml.feature import CountVectorizerModel
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasInputCol, HasOutputCol
from pyspark.sql import DataFrame

from sparkfield.core.errors import InputError
from sparkfield.core.ml import Persistent, StageParams, given
from sparkfield.text.bag_of_words.functions import (
    html_to_text,
    split_sentences,
    token_vocabulary,
    tokenize,
)
from sparkfield.text.bag_of_words.stage_params import (
    MIN_DF,
    VOCAB_SIZE,
    job_default,
    job_param,
    optional_string,
)
from sparkfield.text.params import BAG_OF_WORDS


def _column_param(name: str, doc: str) -> Param:
    return Param(Params._dummy(), name, doc, typeConverter=optional_string)


class _HtmlToTextParams(HasInputCol, HasOutputCol, StageParams):
    """HtmlToText's params and defaults (setters and getters: :class:`StageParams`)."""

    titleCol = _column_param("titleCol", "column of the page's <title> (None: left out)")
    errorCol = _column_param("errorCol", "column of why a page has no text (None: left out)")
    charsetCol = _column_param("charsetCol", "column of the Content-Type header or charset "
                               "label of binary HTML (None: none)")
    extract = job_param("extract", "extract", TypeConverters.toString)
    selector = job_param("selector", "selector", TypeConverters.toString)
    NULLABLE = frozenset({"titleCol", "errorCol", "charsetCol"})

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(inputCol="html", outputCol="text", titleCol="title", errorCol=None,
                         charsetCol=None, extract=job_default("extract"),
                         selector=job_default("selector"))


class HtmlToText(Transformer, _HtmlToTextParams, Persistent):
    """HTML -> document text (``outputCol``) and title (``titleCol``), every row kept.

    ``inputCol`` holds the HTML as a string, or as bytes decoded by the job's charset rules
    (byte-order mark, then the charset of ``charsetCol``, a Content-Type header such as
    ``text/html; charset=ISO-8859-1`` or a bare label, then the page's ``<meta>``, then
    detection). ``extract``: ``main`` (trafilatura's main content) or ``selector`` (the text
    of the ``selector`` elements). A null page, a page without text and one the parser cannot
    read get a null text; ``errorCol``, when set, says why. ``titleCol=None`` leaves the title
    out. ``transform`` runs no Spark job: the pages are parsed when the result is computed."""

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 titleCol: str | None = None, errorCol: str | None = None,
                 charsetCol: str | None = None, extract: str | None = None,
                 selector: str | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, inputCol: str | None = None, outputCol: str | None = None,
                  titleCol: str | None = None, errorCol: str | None = None,
                  charsetCol: str | None = None, extract: str | None = None,
                  selector: str | None = None) -> HtmlToText:
        """Sets the params given; ``None`` leaves a param as it is, except the optional
        columns (``titleCol``, ``errorCol``, ``charsetCol``), which it leaves out."""
        return self._set(**given(self._input_kwargs, self.NULLABLE))

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return html_to_text(dataset, self.getInputCol(), self.getOutputCol(),
                            self.getTitleCol(), self.getErrorCol(), self.getExtract(),
                            self.getSelector(), self.getCharsetCol())


class _SentenceSplitterParams(HasInputCol, HasOutputCol, StageParams):
    """SentenceSplitter's params and defaults."""

    explodeSentences = Param(Params._dummy(), "explodeSentences",
                             "one row per sentence instead of an array per row",
                             typeConverter=TypeConverters.toBoolean)
    indexCol = Param(Params._dummy(), "indexCol", "column of the sentence's position (0, 1, "
                     "...) in its document, with explodeSentences",
                     typeConverter=TypeConverters.toString)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(inputCol="text", outputCol="sentences", explodeSentences=False,
                         indexCol="sentence_idx")


class SentenceSplitter(Transformer, _SentenceSplitterParams, Persistent):
    """Text -> its Punkt sentences (NLTK's English parameters; each line split on its own) as
    an array column, one row per document, as Spark NLP's ``SentenceDetector`` gives them; a
    null text has none. ``explodeSentences=True``: one row per sentence instead (the sentence
    in ``outputCol``, its position in ``indexCol``; documents without a sentence dropped), the
    layout of the job's ``sentences/``. Keep the array in a Pipeline that fits on documents:
    an estimator after an exploding stage counts sentences as documents (``minDF``, IDF).
    ``transform`` runs no Spark job."""

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 explodeSentences: bool | None = None, indexCol: str | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, inputCol: str | None = None, outputCol: str | None = None,
                  explodeSentences: bool | None = None, indexCol: str | None = None
                  ) -> SentenceSplitter:
        """Sets the params given; ``None`` leaves a param as it is."""
        return self._set(**given(self._input_kwargs, frozenset()))

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return split_sentences(dataset, self.getInputCol(), self.getOutputCol(),
                               self.getExplodeSentences(), self.getIndexCol())


class _WordTokenizerParams(HasInputCol, HasOutputCol, StageParams):
    """WordTokenizer's params and defaults."""

    stopwords = job_param("stopwords", "stopwords", TypeConverters.toString)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(inputCol="text", outputCol="tokens",
                         stopwords=job_default("stopwords"))


class WordTokenizer(Transformer, _WordTokenizerParams, Persistent):
    """Text -> tokens by the job's pinned rule: the text lower-cased, then its runs of
    Python-regex ``\\w`` characters (Unicode letters, digits, underscore), in order. Unlike
    Spark's ``Tokenizer`` (split on whitespace) and ``RegexTokenizer`` (Java's regex classes),
    it counts exactly as the job does. ``stopwords="english"`` leaves NLTK's English stopwords
    out, which leaves them out of a vocabulary fitted downstream as the job's ``stopwords``
    does. A null text gives an empty array. ``transform`` runs no Spark job."""

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 stopwords: str | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, inputCol: str | None = None, outputCol: str | None = None,
                  stopwords: str | None = None) -> WordTokenizer:
        """Sets the params given; ``None`` leaves a param as it is."""
        return self._set(**given(self._input_kwargs, frozenset()))

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return tokenize(dataset, self.getInputCol(), self.getOutputCol(), self.getStopwords())


class _PinnedCountVectorizerParams(HasInputCol, HasOutputCol, StageParams):
    """PinnedCountVectorizer's params and defaults (the job's)."""

    vocabSize = Param(Params._dummy(), "vocabSize", BAG_OF_WORDS.by_key["vocab_size"].help,
                      typeConverter=VOCAB_SIZE)
    minDF = Param(Params._dummy(), "minDF", "rows a token must occur in (below 1: a fraction "
                  "of the rows)", typeConverter=MIN_DF)
    binary = Param(Params._dummy(), "binary", "1.0 for every present token instead of its "
                   "count", typeConverter=TypeConverters.toBoolean)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(inputCol="tokens", outputCol="vector",
                         vocabSize=job_default("vocab_size"),
                         minDF=float(job_default("min_df")),
                         binary=job_default("vector") == "binary")


class PinnedCountVectorizer(Estimator, _PinnedCountVectorizerParams, Persistent):
    """Spark's ``CountVectorizer`` with the job's vocabulary rule: the ``vocabSize`` most
    frequent tokens of at least ``minDF`` rows (below 1: a fraction of the rows), ties broken
    by word. Spark's own ``CountVectorizer.fit`` orders by count only, so tied words come in
    an order (and, at the cut, a choice) that depends on the partitioning; this one gives the
    same vocabulary every run. ``fit`` returns Spark's own ``CountVectorizerModel`` (so a
    fitted Pipeline transforms, saves and loads as with ``CountVectorizer``); ``binary`` is
    the model's. InputError when no word passes ``minDF``.

    Runs a Spark job: ``fit`` collects the vocabulary (after a second job counting the rows
    where ``minDF`` is a fraction). The model's ``transform`` runs none."""

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 vocabSize: int | None = None, minDF: float | None = None,
                 binary: bool | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, inputCol: str | None = None, outputCol: str | None = None,
                  vocabSize: int | None = None, minDF: float | None = None,
                  binary: bool | None = None) -> PinnedCountVectorizer:
        """Sets the params given; ``None`` leaves a param as it is."""
        return self._set(**given(self._input_kwargs, frozenset()))

    def _fit(self, dataset: DataFrame) -> CountVectorizerModel:
        vocab = token_vocabulary(dataset, self.getInputCol(), self.getVocabSize(),
                                 self.getMinDF())
        words = [r["word"] for r in vocab.orderBy("rank").collect()]
        if not words:
            raise InputError(f"the vocabulary is empty: no token of {self.getInputCol()!r} "
                             f"passes minDF={self.getMinDF():g}")
        return CountVectorizerModel.from_vocabulary(
            words, self.getInputCol(), self.getOutputCol(), binary=self.getBinary())
