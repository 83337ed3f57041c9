"""Topics: KMeans over embeddings, each cluster described by its most frequent vocabulary words
(from the bag-of-words sentences) and the sentences nearest its centre."""

from __future__ import annotations

from pyspark.ml.clustering import KMeans
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window


def topics(embedded: DataFrame, k: int, words: DataFrame | None = None, top_words: int = 10,
           examples: int = 3, seed: int = 42) -> tuple[DataFrame, DataFrame]:
    """Returns (assignments: id, text, topic, distance; summary: topic, size, words,
    examples). ``words``: id, tokens (e.g. bag_of_words sentences joined on the same id) and
    optionally the vocabulary restricted by the caller."""
    data = embedded.where(F.col("embedding").isNotNull()).withColumn(
        "features", array_to_vector("embedding"))
    model = KMeans(k=k, seed=seed, featuresCol="features", predictionCol="topic").fit(data)
    centres = [c.tolist() for c in model.clusterCenters()]
    centre_col = F.array(*[F.array(*[F.lit(float(x)) for x in c]) for c in centres])
    assigned = model.transform(data).select(
        "id", "text", "topic", vector_to_array("features").alias("e"))
    dist = F.sqrt(F.aggregate(
        F.zip_with("e", F.element_at(centre_col, F.col("topic") + 1),
                   lambda a, b: (a - b) * (a - b)), F.lit(0.0), lambda acc, x: acc + x))
    assignments = assigned.select("id", "text", "topic", dist.alias("distance"))
    w = Window.partitionBy("topic").orderBy("distance", "id")
    ex = (assignments.withColumn("r", F.row_number().over(w)).where(F.col("r") <= examples)
          .groupBy("topic").agg(F.sort_array(F.collect_list(F.struct("r", "text")))
                                .alias("ex"))
          .select("topic", F.col("ex.text").alias("examples")))
    size = assignments.groupBy("topic").agg(F.count(F.lit(1)).alias("size"))
    summary = size.join(ex, "topic", "left")
    if words is not None:
        counts = (assignments.select("id", "topic").join(words.select("id", "tokens"), "id")
                  .select("topic", F.explode("tokens").alias("word"))
                  .groupBy("topic", "word").count())
        wr = Window.partitionBy("topic").orderBy(F.desc("count"), "word")
        top = (counts.withColumn("r", F.row_number().over(wr)).where(F.col("r") <= top_words)
               .groupBy("topic").agg(F.sort_array(F.collect_list(F.struct("r", "word")))
                                     .alias("w"))
               .select("topic", F.col("w.word").alias("words")))
        summary = summary.join(top, "topic", "left")
    return assignments, summary.orderBy("topic")
