"""The embed job's pure step on five inline texts (the bundled model, on the CPU): no files, no
run report, no output, every count checked against a count made by hand."""

from contextlib import ExitStack

from pyspark.sql import types as T

from sparkfield.nlp.embed import worker_threads
from sparkfield.nlp.job import compute, derive, prepare
from sparkfield.nlp.model import check_model_dir
from sparkfield.nlp.params import EMBED

TEXTS = T.StructType([
    T.StructField("id", T.StringType(), True),
    T.StructField("sentence", T.StringType(), True),
])


def test_compute_counts_embeddings_rejects_and_neighbours_without_a_report(spark):
    texts = spark.createDataFrame([
        ("a", "Cats chase mice in the garden."),
        ("b", "Dogs chase cats around the house."),
        ("c", "Stock markets fell sharply on Monday."),
        ("d", None),  # the null row
        ("e", "   "),  # blank
    ], TEXTS)
    p = EMBED.parse({"input": "inline", "output": None, "id_col": "id", "device": "cpu",
                      "batch_size": 2, "neighbors": {"k": 2}, "topics": {"enabled": False},
                      "attention": {"sentences": 1}})
    d = derive(p, seed=42, task_cpus=worker_threads(spark))
    inputs = prepare(spark, p, d, check_model_dir(None))

    with ExitStack() as stack:
        c = compute(spark, p, d, texts, inputs, stack)
        embedded = c.embeddings.where("embedding IS NOT NULL").count()

    s = c.stats
    assert s.inputs == {"texts": 5}
    assert s.outputs == {"embeddings": 3} and embedded == 3
    assert s.rejects == {"texts": {"null text": 1, "empty text": 1}}
    assert s.counts["embedded_now"] == 3 and s.counts["truncated"] == 0
    assert s.counts["dimensions"] == 384
    # where the workers' time went: in the counts, not in the rows
    split = s.counts["embed_task_seconds"]
    assert list(split) == ["load", "arrow_in", "tokenise", "model", "pool", "arrow_out"]
    assert split["model"] > 0 and split["tokenise"] > 0 and min(split.values()) >= 0
    assert c.embeddings.columns == c.embedded.columns == [
        "id", "text", "embedding", "truncated", "reason"]
    assert [(x["name"], x["rows"]) for x in s.cached] == [("embeddings", 5)]
    # every embedded text's two nearest others: 3 queries x 2
    table = c.extras["neighbors"]
    assert len(table) == 6 and set(table["query_id"]) == {"a", "b", "c"}
    assert "topics" not in c.extras  # disabled
    assert [m[0] for m in c.extras["attention"]] == ["a"] and c.attention_texts == [
        "Cats chase mice in the garden."]
    assert [(x["step"], x.get("within")) for x in s.steps] == [
        ("cache embeddings", "embed"), ("embed", None), ("neighbors", None), ("attention", None)]
