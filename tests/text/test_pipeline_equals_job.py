"""A Pipeline of the text stages and Spark's own IDF, fitted on saved pages read with Spark's
binaryFile source, gives exactly the bag_of_words job's vocabulary and document vectors on
the same pages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.ml import Pipeline
from pyspark.ml.feature import IDF
from pyspark.sql import functions as F

from sparkfield.core.conf import load_config
from sparkfield.text import HtmlToText, PinnedCountVectorizer, WordTokenizer, run


@pytest.mark.parametrize("extract", ["main", "selector"])
def test_the_pipeline_gives_the_jobs_vocabulary_and_tfidf_vectors(spark, repo_root, tmp_path,
                                                                 wiki_pages, extract):
    out = tmp_path / "out"
    cfg = load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"html_dir": str(wiki_pages)}, "output": str(out), "vector": "tfidf",
        "stopwords": "english", "vocab_size": 150, "extract": extract}})
    run(spark, cfg)
    job_vocab = pd.read_csv(out / "vocabulary.csv", keep_default_na=False)["word"].tolist()
    job_docs = pd.read_parquet(out / "documents")

    pages = (spark.read.format("binaryFile").load(str(wiki_pages))
             .select(F.element_at(F.split("path", "/"), -1).alias("name"), "content"))
    pipeline = Pipeline(stages=[
        HtmlToText(inputCol="content", extract=extract),
        WordTokenizer(stopwords="english"),
        PinnedCountVectorizer(vocabSize=150, minDF=1, binary=False, outputCol="tf"),
        IDF(inputCol="tf", outputCol="tfidf")])
    model = pipeline.fit(pages)
    assert model.stages[2].vocabulary == job_vocab and len(job_vocab) == 150

    ours = {r["name"]: r["tfidf"] for r in model.transform(pages).collect()}
    theirs = {url.rsplit("/", 1)[-1]: v for url, v in zip(job_docs["url"], job_docs["vector"],
                                                          strict=True)}
    assert sorted(ours) == sorted(theirs) and len(ours) == 6
    for name, vec in ours.items():
        job_vec = theirs[name]
        assert vec.indices.tolist() == list(job_vec["indices"]), name
        np.testing.assert_allclose(vec.values, job_vec["values"], rtol=1e-12, err_msg=name)
