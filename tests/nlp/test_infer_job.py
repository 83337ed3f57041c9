"""The infer job end to end on real sentences with small models built here: every input row
is a result or a reject with its reason, the results equal the stage run directly (itself
checked against Hugging Face in its own tests), the run report counts and times the work, and
what a task lacks is one clear error before any Spark work."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sparkfield.core.conf import load_config
from sparkfield.nlp import run_infer
from tests.conftest import job_module
from tests.nlp.tiny_models import build, build_qa

LABELS = ("negative", "neutral", "positive")
NLI = ("entailment", "neutral", "contradiction")


@pytest.fixture(scope="module")
def real_sentences(wiki_pages) -> list[str]:
    from sparkfield.text.bag_of_words.normalise import sentences
    from sparkfield.text.bag_of_words.parse import page_text

    html = (wiki_pages / "Machine_translation.html").read_bytes()
    return sentences(page_text(html.decode("utf-8"))[1])[:20]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("sentiment"), "ForSequenceClassification", LABELS)


def _csv(path: Path, texts: list[str | None]) -> Path:
    """ids and texts as a CSV with a header, quoted line breaks and empty cells (null)."""
    pd.DataFrame({"sid": [f"s{i:02d}" for i in range(len(texts))], "body": texts}).to_csv(
        path, index=False)
    return path


def _run(spark, repo_root: Path, job: dict):
    cfg = load_config("infer", "local", repo_root / "conf", {"job": job})
    return run_infer(spark, cfg)


def test_classify_keeps_every_row_as_a_result_or_a_reject(spark, repo_root, tmp_path,
                                                           real_sentences, classifier):
    from sparkfield.nlp import classify_texts

    texts = [*real_sentences[:12], None, "   ", "two\nlines, one text"]
    src = _csv(tmp_path / "in.csv", texts)
    out = tmp_path / "out"
    res = _run(spark, repo_root, {"input": str(src), "task": "classify",
                                  "model": str(classifier), "text_col": "body",
                                  "id_col": "sid", "output": str(out),
                                  "classify": {"probabilities": True}, "batch_size": 4})
    results = pd.read_parquet(out / "results").sort_values("sid")
    rejects = pd.read_parquet(out / "rejects").sort_values("sid")
    assert len(results) + len(rejects) == len(texts)
    assert dict(zip(rejects["sid"], rejects["reason"], strict=True)) == {
        "s12": "null text", "s13": "empty text"}
    assert set(results.columns) == {"sid", "body", "label", "score", "probabilities",
                                    "truncated"}
    assert "two\nlines, one text" in set(results["body"])
    direct = classify_texts(spark.createDataFrame(
        [(f"s{i:02d}", t) for i, t in enumerate(texts) if t and t.strip()],
        "sid string, body string"), str(classifier), input_col="body").toPandas()
    want = dict(zip(direct["sid"], direct["classification"].map(lambda r: r["label"]),
                    strict=True))
    assert dict(zip(results["sid"], results["label"], strict=True)) == want
    report = json.loads((out / "run_report.json").read_text())
    assert report["inputs"]["rows"] == len(texts) and report["outputs"]["results"] == 13
    assert report["rejects"]["rows"] == {"null text": 1, "empty text": 1}
    split = report["counts"]["infer_task_seconds"]
    assert split["model"] > 0 and set(split) >= {"load", "tokenise", "model", "arrow_in"}
    line = job_module("infer").describe(res)
    assert line.startswith("classify: 13 results of 15 rows (0 truncated, 2 rejected: ")


def test_zero_shot_labels_from_the_flag(spark, repo_root, tmp_path, real_sentences):
    from sparkfield.nlp import classify_zero_shot

    nli = build(tmp_path / "nli", "ForSequenceClassification", NLI, seed=3)
    src = _csv(tmp_path / "in.csv", real_sentences[:6])
    args = job_module("infer").parser().parse_args(
        ["--task", "zero-shot", "--labels", "sports, politics,science", "--input", str(src),
         "--model", str(nli), "--text-col", "body", "--id-col", "sid"])
    assert args.zero_shot__labels == ["sports", "politics", "science"]
    res = _run(spark, repo_root, {"input": str(src), "task": "zero-shot", "model": str(nli),
                                  "text_col": "body", "id_col": "sid", "output": None,
                                  "zero_shot": {"labels": ["sports", "politics", "science"]}})
    got = res.results.toPandas().sort_values("sid")
    direct = classify_zero_shot(
        spark.createDataFrame([(f"s{i:02d}", t) for i, t in enumerate(real_sentences[:6])],
                              "sid string, body string"),
        str(nli), ["sports", "politics", "science"], input_col="body").toPandas()
    assert list(got["label"]) == list(direct.sort_values("sid")["zero_shot"].map(
        lambda r: r["label"]))


def test_generate_writes_texts_and_cross_attention_maps(spark, repo_root, tmp_path,
                                                       real_sentences):
    from PIL import Image

    from sparkfield.nlp import generate_texts
    from tests.nlp.tiny_seq2seq import build as build_seq2seq

    model = build_seq2seq(tmp_path / "marian", "marian", real_sentences)
    src = tmp_path / "in.parquet"
    pd.DataFrame({"sid": [f"s{i:02d}" for i in range(8)],  # the default text column: text
                  "text": [*real_sentences[:7], None]}).to_parquet(src)
    out = tmp_path / "out"
    res = _run(spark, repo_root, {"input": str(src), "task": "generate", "model": str(model),
                                  "id_col": "sid", "output": str(out),
                                  "generate": {"num_beams": 2, "max_new_tokens": 12,
                                               "attention_maps": 2}})
    results = pd.read_parquet(out / "results").sort_values("sid")
    assert set(results.columns) == {"sid", "text", "generated", "tokens", "stopped",
                                    "truncated"}
    direct = generate_texts(spark.createDataFrame(
        [(f"s{i:02d}", t) for i, t in enumerate(real_sentences[:7])], "sid string, text string"),
        str(model), numBeams=2, maxNewTokens=12).toPandas().sort_values("sid")
    assert list(results["generated"]) == list(direct["generated"].map(lambda r: r["text"]))
    assert list(results["text"]) == real_sentences[:7]
    assert list(pd.read_parquet(out / "rejects")["reason"]) == ["null text"]
    maps = sorted((out / "attention").iterdir())
    assert [m.name for m in maps] == ["row_1.png", "row_2.png"] and len(res.maps) == 2
    with Image.open(maps[0]) as image:
        assert image.size[0] > 100


def test_answer_reads_question_and_context_columns(spark, repo_root, tmp_path,
                                                   real_sentences):
    from sparkfield.nlp import answer_questions

    qa = build_qa(tmp_path / "qa")
    rows = [(f"q{i}", "What does it describe?", c) for i, c in enumerate(real_sentences[:5])]
    rows.append(("q9", "Who?", ""))
    src = tmp_path / "in.parquet"
    pd.DataFrame(rows, columns=["qid", "q", "passage"]).to_parquet(src)
    res = _run(spark, repo_root, {"input": str(src), "task": "answer", "model": str(qa),
                                  "question_col": "q", "context_col": "passage",
                                  "id_col": "qid", "output": None})
    got = res.results.toPandas().sort_values("qid")
    assert {"qid", "q", "passage", "answer", "score", "start", "end", "windows"} <= set(
        got.columns)
    direct = answer_questions(spark.createDataFrame(rows[:5], "qid string, q string, "
                                                    "passage string"), str(qa),
                              question_col="q", context_col="passage").toPandas()
    assert list(got["answer"]) == list(direct.sort_values("qid")["answer"].map(
        lambda r: r["answer"]))
    assert [r["reason"] for r in res.rejects.collect()] == ["empty context"]


def test_an_input_column_named_like_a_result_field_is_one_clear_error(spark, repo_root,
                                                                      tmp_path, classifier):
    from sparkfield.core.errors import ConfigError

    src = tmp_path / "in.parquet"
    pd.DataFrame({"text": ["A text."], "label": ["gold"]}).to_parquet(src)
    with pytest.raises(ConfigError, match="'label' would share a name with the classify "
                                          "result"):
        _run(spark, repo_root, {"input": str(src), "task": "classify",
                                "model": str(classifier), "keep_cols": ["label"],
                                "output": None})
    # without an id column the job's own id is written as "id"
    res = _run(spark, repo_root, {"input": str(src), "task": "classify",
                                  "model": str(classifier), "output": None})
    assert res.results.columns == ["id", "text", "label", "score", "truncated"]


@pytest.mark.parametrize("argv,message", [
    (["--task", "zero-shot", "--input", "x.csv", "--model", "m"],
     "--task zero-shot needs candidate labels"),
    (["--task", "classify", "--input", "x.csv"], "infer needs --model"),
    (["--task", "answer", "--input", "x.csv", "--model", "m", "--engine", "onnx"],
     "--task answer runs on torch"),
    (["--input", "x.csv", "--model", "m", "--quantize", "int8"],
     "--quantize int8 needs --engine onnx"),
])
def test_what_a_task_lacks_is_one_line_before_spark(argv, message, capsys, tmp_path):
    code = job_module("infer").main([*argv, "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and err.startswith("error: ") and err.count("\n") == 1
