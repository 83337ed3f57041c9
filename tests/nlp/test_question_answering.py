"""The ``QuestionAnswerer`` stage, ``answer_questions`` and their engine ``SpanExtractor``
against a brute force written here (each window tokenised and run through the model directly,
every start and end pair scored), on a tiny random-weight BertForQuestionAnswering and real
Wikipedia sentences as contexts, some read in several windows; batching and bucketing leave
answers unchanged; null, blank and long inputs are kept and counted; params, save, load and
Pipeline use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.sql import DataFrame

from sparkfield.core.errors import ColumnError, ConfigError
from sparkfield.nlp import count_outcomes
from sparkfield.nlp.model import ModelError
from sparkfield.nlp.qa_head import SpanExtractor
from sparkfield.nlp.question_answering import QuestionAnswerer, answer_questions
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text
from tests.nlp.tiny_models import build, build_qa

MAX_TOKENS, STRIDE, MAX_QUESTION, MAX_ANSWER = 80, 24, 16, 15
QUESTIONS = ("What is natural language processing?", "When was machine translation first tried?",
             "Which fields does it belong to?", "Who proposed the Turing test?",
             "What did the Georgetown experiment translate?")
LONG_QUESTION = ("Which of the statistical methods that replaced the hand-written rules of the "
                 "early systems is said to have worked best on large amounts of real text?")
OPTIONS = {"stride": STRIDE, "max_question_length": MAX_QUESTION,
           "max_answer_length": MAX_ANSWER}


@pytest.fixture(scope="module")
def qa_model(tmp_path_factory) -> Path:
    return build_qa(tmp_path_factory.mktemp("qa"))


@pytest.fixture(scope="module")
def pairs(wiki_pages) -> list[tuple[str, str, str]]:
    """(id, question, context): one-sentence contexts, long ones (3+ windows), a long
    question, a question the model finds no answer to."""
    html = (wiki_pages / "Natural_language_processing.html").read_bytes()
    found = sentences(page_text(html.decode("utf-8"))[1])
    rows = [(f"s{i:02d}", QUESTIONS[i % len(QUESTIONS)], found[i]) for i in range(24)]
    rows += [(f"l{k}", QUESTIONS[k], " ".join(found[24 + 6 * k:32 + 6 * k])) for k in range(4)]
    rows.append(("q", LONG_QUESTION, " ".join(found[:3])))
    rows.append(("n", QUESTIONS[0], found[11]))  # where the null answer wins, by 0.19 to 0.14
    return rows


@pytest.fixture(scope="module")
def engine(qa_model) -> SpanExtractor:
    return SpanExtractor(qa_model, "cpu", MAX_TOKENS)


@pytest.fixture(scope="module")
def direct(qa_model):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    return (AutoTokenizer.from_pretrained(str(qa_model)),
            AutoModelForQuestionAnswering.from_pretrained(str(qa_model)).eval())


_BRUTE: dict[tuple, tuple] = {}


def _brute_force(direct, question: str, context: str, top_k: int = 1,
                 impossible: bool = False) -> tuple[list[tuple[str, float, int, int]], int, bool]:
    """(best answers (answer, score, start, end), windows, question cut) by scoring every
    start and end pair of every window, each window run through the model alone."""
    key = (question, context, top_k, impossible)
    if key not in _BRUTE:
        _BRUTE[key] = _score_every_span(direct, question, context, top_k, impossible)
    return _BRUTE[key]


def _score_every_span(direct, question: str, context: str, top_k: int,
                      impossible: bool) -> tuple[list[tuple[str, float, int, int]], int, bool]:
    import torch

    tok, model = direct
    offsets = tok(question, add_special_tokens=False, return_offsets_mapping=True)[
        "offset_mapping"]
    cut = len(offsets) > MAX_QUESTION
    if cut:
        question = question[:offsets[MAX_QUESTION - 1][1]]
    enc = tok(question, context, truncation="only_second", max_length=MAX_TOKENS, stride=STRIDE,
              return_overflowing_tokens=True, return_offsets_mapping=True)
    best: dict[tuple[int, int], float] = {}
    null = 1e6
    for w, ids in enumerate(enc["input_ids"]):
        seq, offs = enc.sequence_ids(w), enc["offset_mapping"][w]
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]),
                        token_type_ids=torch.tensor([enc["token_type_ids"][w]]))
        probs = []
        for logits in (out.start_logits[0], out.end_logits[0]):
            x = np.array([float(v) if seq[k] == 1 or ids[k] == tok.cls_token_id else -10000.0
                          for k, v in enumerate(logits.tolist())])
            e = np.exp(x - x.max())
            probs.append(e / e.sum())
        p_start, p_end = probs
        null = min(null, p_start[0] * p_end[0])
        for a in range(1, len(ids)):
            for b in range(a, min(len(ids), a + MAX_ANSWER)):
                if seq[a] == 1 and seq[b] == 1:
                    span = (offs[a][0], offs[b][1])
                    best[span] = max(best.get(span, 0.0), p_start[a] * p_end[b])
    ranked = [(context[s:e], score, s, e) for (s, e), score in best.items()]
    if impossible:
        ranked.append(("", null, 0, 0))
    ranked.sort(key=lambda r: -r[1])
    return ranked[:top_k], len(enc["input_ids"]), cut


def _same(mine: list, theirs: list) -> None:
    assert [(a[0], a[2], a[3]) for a in mine] == [(a[0], a[2], a[3]) for a in theirs]
    for m, t in zip(mine, theirs, strict=True):
        assert m[1] == pytest.approx(t[1], abs=1e-4)


@pytest.mark.parametrize("top_k,impossible", [(1, False), (3, True)])
def test_the_engine_equals_the_brute_force(engine, direct, pairs, top_k, impossible):
    _, questions, contexts = zip(*pairs, strict=True)
    got = engine.answer(list(questions), list(contexts), 7, True, top_k=top_k,
                        handle_impossible=impossible, **OPTIONS)
    nulls = 0
    for k, (question, context) in enumerate(zip(questions, contexts, strict=True)):
        theirs, windows, cut = _brute_force(direct, question, context, top_k, impossible)
        _same([(a.answer, a.score, a.start, a.end) for a in got.answers[k]], theirs)
        assert (got.windows[k], got.truncated[k]) == (windows, cut)
        nulls += got.answers[k][0].answer == ""
    assert max(got.windows) >= 3 and got.truncated.sum() == 1
    assert len({a[0].answer for a in got.answers}) > 10  # answers a test can tell apart
    assert nulls == (1 if impossible else 0)  # the null answer wins once here


@pytest.mark.parametrize("bucket", [False, True])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_batch_size_and_bucketing_leave_answers_unchanged(engine, pairs, batch_size, bucket):
    _, questions, contexts = zip(*pairs, strict=True)
    one = engine.answer(list(questions), list(contexts), None, False, top_k=2, **OPTIONS)
    got = engine.answer(list(questions), list(contexts), batch_size, bucket, top_k=2,
                        **OPTIONS)
    assert (got.windows == one.windows).all()
    for mine, theirs in zip(got.answers, one.answers, strict=True):
        assert [(a.answer, a.start, a.end) for a in mine] == \
            [(a.answer, a.start, a.end) for a in theirs]
        np.testing.assert_allclose([a.score for a in mine], [a.score for a in theirs],
                                   atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def frame(spark, pairs) -> DataFrame:
    bad = [("nq", None, "A context."), ("bq", "  ", "A context."),
           ("nc", "A question?", None), ("bc", "A question?", "   "),
           ("tc", "A question?", " \t\u200b")]  # not blank, but no token
    return spark.createDataFrame([*pairs, *bad],
                                 "id string, question string, context string").coalesce(1)


def _by_id(df: DataFrame, col: str = "answer") -> dict[str, dict]:
    return {r["id"]: r[col].asDict(recursive=True) for r in df.select("id", col).collect()}


def test_the_stage_equals_the_brute_force_and_keeps_every_row(frame, pairs, direct, qa_model):
    answered = answer_questions(frame, str(qa_model), topK=3, handleImpossibleAnswer=True,
                                maxTokens=MAX_TOKENS, stride=STRIDE,
                                maxQuestionLength=MAX_QUESTION, batchSize=7, device="cpu")
    out = _by_id(answered)
    for key, question, context in pairs:
        theirs, windows, cut = _brute_force(direct, question, context, 3, True)
        mine = out[key]
        _same([(a["answer"], a["score"], a["start"], a["end"]) for a in mine["answers"]],
              theirs)
        assert (mine["answer"], mine["start"], mine["end"]) == \
            (theirs[0][0], theirs[0][2], theirs[0][3])
        assert mine["score"] == mine["answers"][0]["score"]
        assert (mine["windows"], mine["truncated"], mine["reason"]) == (windows, cut, None)
    assert (out["n"]["answer"], out["n"]["start"], out["n"]["end"]) == ("", 0, 0)
    empty = {"answer": None, "score": None, "start": None, "end": None, "windows": None,
             "answers": None, "truncated": None}
    assert out["nq"] == {**empty, "reason": "null question"}
    assert out["bq"]["reason"] == "empty question" and out["bq"]["answer"] is None
    assert out["nc"]["reason"] == "null context"
    assert out["bc"] == {**empty, "reason": "empty context"}
    assert out["tc"] == {**empty, "truncated": False, "reason": "empty context"}
    assert count_outcomes(answered, "answer") == {
        "classified": len(pairs), "truncated": 1, "null question": 1, "empty question": 1,
        "null context": 1, "empty context": 2}


def test_a_long_question_is_rejected_on_request(frame, pairs, qa_model):
    rejected = QuestionAnswerer(modelPath=str(qa_model), maxTokens=MAX_TOKENS, stride=STRIDE,
                                maxQuestionLength=MAX_QUESTION, onLongText="reject",
                                device="cpu").transform(frame)
    assert "answers" not in rejected.schema["answer"].dataType.fieldNames()  # topK 1
    assert count_outcomes(rejected, "answer") == {
        "classified": len(pairs) - 1, "truncated": 0, "too long": 1, "null question": 1,
        "empty question": 1, "null context": 1, "empty context": 2}


def test_params_defaults_and_checks():
    stage = QuestionAnswerer()
    assert (stage.getQuestionCol(), stage.getContextCol(), stage.getOutputCol(),
            stage.getModelPath(), stage.getStride(), stage.getMaxAnswerLength(),
            stage.getMaxQuestionLength(), stage.getTopK(), stage.getHandleImpossibleAnswer(),
            stage.getMaxTokens(), stage.getBatchSize(), stage.getBucket(),
            stage.getOnLongText(), stage.getPrecision(), stage.getDevice()) == (
        "question", "context", "answer", None, 128, 15, 64, 1, False, None, 64, True,
        "truncate", "fp32", "auto")
    with pytest.raises(TypeError, match="stride.*>= 0"):
        stage.setStride(-1)
    with pytest.raises(TypeError, match="topK.*>= 1"):
        QuestionAnswerer(topK=0)
    with pytest.raises(TypeError, match="maxAnswerLength.*>= 1"):
        stage.setMaxAnswerLength(0)
    with pytest.raises(TypeError, match="onLongText.*truncate, reject"):
        stage.setOnLongText("drop")


def test_bad_settings_say_what_is_wrong(frame, qa_model, tmp_path, engine):
    with pytest.raises(ConfigError, match="needs modelPath"):
        QuestionAnswerer().transform(frame)
    with pytest.raises(ConfigError, match="stride 64 must be less than maxTokens 64"):
        QuestionAnswerer(modelPath=str(qa_model), maxTokens=64, stride=64).transform(frame)
    with pytest.raises(ConfigError, match="leaves 8 context tokens"):
        QuestionAnswerer(modelPath=str(qa_model), maxTokens=72, stride=32).transform(frame)
    with pytest.raises(ConfigError, match="leaves 5 context tokens"):  # and 3 special tokens
        engine.answer(["Why?"], ["Because."], stride=5, max_question_length=72)
    with pytest.raises(ColumnError, match="no column 'query'"):
        QuestionAnswerer(questionCol="query", modelPath=str(qa_model)).transform(frame)
    with pytest.raises(ColumnError, match="no column 'passage'"):
        answer_questions(frame, str(qa_model), context_col="passage")
    with pytest.raises(ConfigError, match="'id' already exists"):
        answer_questions(frame, str(qa_model), output_col="id")
    classifier = build(tmp_path / "classifier", "ForSequenceClassification", ("a", "b"))
    with pytest.raises(ModelError, match="not a \\*ForQuestionAnswering model"):
        answer_questions(frame, str(classifier))
    with pytest.raises(ModelError, match="max tokens 600 is over the 512 positions"):
        answer_questions(frame, str(qa_model), maxTokens=600)


def test_transform_runs_no_spark_job(spark, frame, qa_model):
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        pytest.skip("no job tracker over Spark Connect")
    context, group = spark.sparkContext, "question answering transform"
    context.setJobGroup(group, group)
    try:
        answer_questions(frame, str(qa_model), topK=2)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert list(context.statusTracker().getJobIdsForGroup(group)) == []


def test_save_load_and_a_pipeline(frame, pairs, qa_model, tmp_path):
    stage = QuestionAnswerer(modelPath=str(qa_model), outputCol="a", topK=2, device="cpu",
                             maxTokens=MAX_TOKENS, stride=STRIDE, maxQuestionLength=MAX_QUESTION,
                             handleImpossibleAnswer=True, batchSize=5)
    path = str(tmp_path / "stage")
    stage.save(path)
    loaded = QuestionAnswerer.load(path)
    assert loaded.uid == stage.uid and loaded.extractParamMap() == stage.extractParamMap()
    model = Pipeline(stages=[stage]).fit(frame)
    model.write().overwrite().save(str(tmp_path / "pipe"))
    again = PipelineModel.load(str(tmp_path / "pipe"))
    both = again.transform(frame).withColumnRenamed("a", "b")
    rows = both.transform(loaded.transform).select("id", "a", "b").collect()
    assert len(rows) == len(pairs) + 5 and all(r["a"] == r["b"] for r in rows)
    assert sum(r["a"]["answer"] is not None for r in rows) == len(pairs)


def test_every_param_is_in_the_manual(repo_root):
    manual = (repo_root / "docs" / "question_answering.md").read_text()
    for param in QuestionAnswerer().params:
        assert f"`{param.name}`" in manual, param.name


def test_the_engine_imports_without_pyspark(repo_root):
    code = ("import sys; import sparkfield.nlp.qa_head; "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True,
                          text=True, env={"PYTHONPATH": str(repo_root / "libs")})
    assert done.returncode == 0, done.stderr
