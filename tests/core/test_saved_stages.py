"""Saved stages, Pipelines and models damaged on disk: each of the library's stages, a Pipeline
holding them and a PipelineModel holding Spark's CountVectorizerModel beside them, saved once
and then damaged a copy at a time (metadata bytes flipped, metadata cut short mid-JSON, data
cut short or removed, a stage's folder removed). Every load ends in SavedStageError naming the
folder and what is wrong with it, never a Java or JSON error. Metadata written by earlier
versions of the stages (the lines below, as they wrote them) still loads, param for param."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import CountVectorizerModel

from sparkfield.core.errors import InputError, SavedStageError
from sparkfield.core.io import hadoop_fs
from sparkfield.core.ml import load_saved, metadata
from sparkfield.text import HtmlToText, PinnedCountVectorizer, SentenceSplitter, WordTokenizer

STAGES = {
    "HtmlToText": HtmlToText(inputCol="page", errorCol="why", extract="selector",
                             selector="div p"),
    "SentenceSplitter": SentenceSplitter(explodeSentences=True, indexCol="i"),
    "WordTokenizer": WordTokenizer(stopwords="english"),
    "PinnedCountVectorizer": PinnedCountVectorizer(vocabSize=7, minDF=2.0),
}


@pytest.fixture(scope="module", autouse=True)
def checksums(spark, tmp_path_factory) -> None:
    """Saves write their .crc side files, as a fresh session's do (a job's output writer
    switches them off while it writes, then on again)."""
    fs, _ = hadoop_fs(spark, str(tmp_path_factory.getbasetemp()))
    fs.setWriteChecksum(True)


@pytest.fixture(scope="module")
def saved(spark, tmp_path_factory) -> Path:
    """Every stage alone, a Pipeline of them and a PipelineModel, saved once (intact)."""
    root = tmp_path_factory.mktemp("saved")
    for name, stage in STAGES.items():
        stage.save(str(root / name))
    Pipeline(stages=list(STAGES.values())).save(str(root / "pipeline"))
    PipelineModel([STAGES["HtmlToText"], STAGES["WordTokenizer"],
                   CountVectorizerModel.from_vocabulary(["cats", "dogs"], "tokens", "vector")]
                  ).save(str(root / "model"))
    return root


def _part(folder: Path, suffix: str = "") -> Path:
    """The one data file of a folder Spark wrote."""
    (found,) = [p for p in folder.iterdir() if p.name.startswith("part-")
                and p.name.endswith(suffix)]
    return found


def _crc(part: Path) -> Path:
    return part.with_name(f".{part.name}.crc")


def flip(folder: Path) -> None:
    """One byte of the metadata changed; its checksum file still holds the old sum."""
    part = _part(folder / "metadata")
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.write_bytes(bytes(data))


def flip_unchecked(folder: Path) -> None:
    """The metadata's first byte changed, without a checksum file to notice."""
    part = _part(folder / "metadata")
    _crc(part).unlink()
    part.write_bytes(b"[" + part.read_bytes()[1:])


def cut(folder: Path) -> None:
    """The metadata cut short mid-JSON (its checksum file gone with the end)."""
    part = _part(folder / "metadata")
    _crc(part).unlink()
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])


def cut_checked(folder: Path) -> None:
    """The metadata cut short mid-JSON, its checksum file left as it was."""
    part = _part(folder / "metadata")
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])


def emptied(folder: Path) -> None:
    """The metadata's data file removed (the folder and its _SUCCESS left)."""
    part = _part(folder / "metadata")
    _crc(part).unlink()
    part.unlink()


def removed(folder: Path) -> None:
    """The whole folder gone."""
    shutil.rmtree(folder)


def data_cut(folder: Path) -> None:
    """A model's Parquet data cut short (its checksum file gone with the end)."""
    part = _part(folder / "data", ".parquet")
    _crc(part).unlink()
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])


def data_removed(folder: Path) -> None:
    """A model's Parquet data file removed."""
    part = _part(folder / "data", ".parquet")
    _crc(part).unlink()
    part.unlink()


Damage = Callable[[Path], None]
WHY = {flip: "[Cc]hecksum", flip_unchecked: "not valid JSON", cut: "not valid JSON",
       cut_checked: "[Cc]hecksum", emptied: "is empty", removed: "cannot read its metadata",
       data_cut: "Parquet", data_removed: "cannot load the saved CountVectorizerModel"}


def _copy(saved: Path, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(saved / name, tmp_path / name))


def _stage_dir(pipeline: Path, index: int) -> Path:
    (found,) = (pipeline / "stages").glob(f"{index}_*")
    return found


@pytest.mark.parametrize("damage", [flip, cut, emptied], ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", STAGES)
def test_a_damaged_stage_names_its_folder(saved, tmp_path, name, damage):
    path = _copy(saved, tmp_path, name)
    assert type(STAGES[name]).load(str(path)).uid == STAGES[name].uid  # the copy loads
    damage(path)
    with pytest.raises(SavedStageError, match=WHY[damage]) as error:
        type(STAGES[name]).load(str(path))
    assert str(path) in str(error.value)
    assert isinstance(error.value, InputError)  # a job shows it as one error line


@pytest.mark.parametrize("damage", [flip_unchecked, cut_checked, removed],
                         ids=lambda d: d.__name__)
def test_load_saved_names_a_damaged_stage(saved, tmp_path, damage):
    path = _copy(saved, tmp_path, "WordTokenizer")
    assert load_saved(str(path)).getStopwords() == "english"
    damage(path)
    with pytest.raises(SavedStageError, match=WHY[damage]) as error:
        load_saved(str(path))
    assert str(path) in str(error.value)


# (saved folder, the folder damaged in it: None itself, an int its stage of that index)
PIPELINE_CASES = [
    ("pipeline", None, cut), ("pipeline", None, flip), ("pipeline", 1, flip),
    ("pipeline", 3, cut), ("pipeline", 2, removed),
    ("model", None, flip_unchecked), ("model", 0, cut), ("model", 2, cut_checked),
    ("model", 2, data_cut), ("model", 2, data_removed),
]


@pytest.mark.parametrize(("name", "stage", "damage"), PIPELINE_CASES,
                         ids=[f"{n}-{s}-{d.__name__}" for n, s, d in PIPELINE_CASES])
def test_a_damaged_pipeline_names_the_damaged_folder(saved, tmp_path, name, stage, damage):
    path = _copy(saved, tmp_path, name)
    intact = load_saved(str(path))
    assert type(intact) is (Pipeline if name == "pipeline" else PipelineModel)
    target = path if stage is None else _stage_dir(path, stage)
    damage(target)
    with pytest.raises(SavedStageError, match=WHY[damage]) as error:
        load_saved(str(path))
    assert str(target) in str(error.value)


def test_a_save_of_something_else_is_named(saved, tmp_path):
    with pytest.raises(SavedStageError, match="cannot read its metadata"):
        load_saved(str(tmp_path / "nothing"))
    meta = tmp_path / "other" / "metadata"
    meta.mkdir(parents=True)
    (meta / "part-00000").write_text('{"class": "pyspark.ml.NoSuchStage", "uid": "x", '
                                     '"paramMap": {}}\n')
    with pytest.raises(SavedStageError, match=r"other: a saved pyspark.ml.NoSuchStage, which "
                                              "cannot be loaded here"):
        load_saved(str(tmp_path / "other"))
    (meta / "part-00000").write_text('{"class": "x.Y", "uid": 3}\n')
    with pytest.raises(SavedStageError, match="not a saved stage's metadata"):
        load_saved(str(tmp_path / "other"))


# metadata lines as the stages wrote them when each setter and getter was written by hand
EARLIER = [
    '{"class":"sparkfield.text.bag_of_words.stages.HtmlToText","timestamp":1700000000000,'
    '"sparkVersion":"4.1.4","uid":"HtmlToText_0123456789ab","paramMap":{"errorCol":"why",'
    '"extract":"selector","inputCol":"page","selector":"div p","titleCol":null},'
    '"defaultParamMap":{"charsetCol":null,"errorCol":null,"extract":"main","inputCol":"html",'
    '"outputCol":"text","selector":"p","titleCol":"title"}}',
    '{"class":"sparkfield.text.bag_of_words.stages.PinnedCountVectorizer",'
    '"timestamp":1700000000000,"sparkVersion":"4.1.4","uid":"PinnedCountVectorizer_0123456789ab",'
    '"paramMap":{"minDF":2.0,"vocabSize":7},"defaultParamMap":{"binary":true,'
    '"inputCol":"tokens","minDF":1.0,"outputCol":"vector","vocabSize":200}}',
    '{"class":"sparkfield.nlp.embedding_stage.SentenceEmbeddings","timestamp":1700000000000,'
    '"sparkVersion":"4.1.4","uid":"SentenceEmbeddings_0123456789ab","paramMap":{"batchSize":8,'
    '"device":"cpu","inputCol":"body","modelPath":"/models/m"},"defaultParamMap":{'
    '"batchSize":64,"bucket":true,"device":"auto","engine":"torch","inputCol":"sentence",'
    '"maxTokens":256,"modelPath":null,"onnxDir":null,"outputCol":"embedding",'
    '"quantize":"none"}}',
    '{"class":"sparkfield.nlp.classify.TextClassifier","timestamp":1700000000000,'
    '"sparkVersion":"4.1.4","uid":"TextClassifier_0123456789ab","paramMap":{"maxTokens":64,'
    '"modelPath":"/models/c","pairCol":"b","probabilities":true},"defaultParamMap":{'
    '"batchSize":64,"bucket":true,"device":"auto","function":"auto","inputCol":"text",'
    '"maxTokens":null,"modelPath":null,"onLongText":"truncate","outputCol":"classification",'
    '"pairCol":null,"precision":"fp32","probabilities":false}}',
    '{"class":"sparkfield.nlp.classify.TokenClassifier","timestamp":1700000000000,'
    '"sparkVersion":"4.1.4","uid":"TokenClassifier_0123456789ab","paramMap":{'
    '"aggregationStrategy":"max","ignoreLabels":[],"modelPath":"/models/t"},'
    '"defaultParamMap":{"aggregationStrategy":"simple","batchSize":64,"bucket":true,'
    '"device":"auto","ignoreLabels":["O"],"inputCol":"text","maxTokens":null,"modelPath":null,'
    '"onLongText":"truncate","outputCol":"entities","precision":"fp32"}}',
]


# params a stage gained after the metadata above was written
ADDED_SINCE = {name: {"engine", "quantize", "int8Check", "int8MaxDisagreement", "int8SampleRows"}
               for name in ("TextClassifier", "TokenClassifier")} | {
    "SentenceEmbeddings": {"precision"}}


@pytest.mark.parametrize("line", EARLIER, ids=lambda line: json.loads(line)["uid"][:-13])
def test_stages_saved_by_earlier_versions_load_param_for_param(spark, tmp_path, line):
    meta = tmp_path / "stage" / "metadata"
    meta.mkdir(parents=True)
    (meta / "part-00000").write_text(line + "\n")
    saved = json.loads(line)
    stage = load_saved(str(tmp_path / "stage"))
    assert type(stage).__name__ == saved["uid"][:-13] and stage.uid == saved["uid"]
    again = metadata(stage, spark.version)  # what saving it now writes
    assert again["paramMap"] == saved["paramMap"]
    defaults = again["defaultParamMap"]
    assert {k: defaults.get(k) for k in saved["defaultParamMap"]} == saved["defaultParamMap"]
    # params added since keep their defaults, and nothing else is new
    assert set(defaults) - set(saved["defaultParamMap"]) == ADDED_SINCE.get(type(stage).__name__,
                                                                          set())
    for name, value in saved["paramMap"].items():
        assert getattr(stage, f"get{name[0].upper()}{name[1:]}")() == value, name
