"""What the library's Spark ML stages share: params checked as a job schema checks its keys,
their plain setters and getters, and persistence through the DataFrame API.

:class:`StageParams` gives every Param of a stage a ``setXxx(value)`` returning the stage and a
``getXxx()``, in pyspark.ml's naming, unless the class (or a base) already has one: a stage's
Params mixin declares its Params and their defaults only.

:class:`StageWriter` writes what pyspark's ``DefaultParamsWriter`` writes (one JSON line in
``<path>/metadata``: class, uid, params, defaults) but with the DataFrame writer only, and
overwrites with the writer's own mode where ``MLWriter.save`` deletes through the JVM. So a
stage saves and loads on classic Spark and over Spark Connect, and pyspark's ``Pipeline`` and
``PipelineModel`` readers, which load each stage with its class's own reader, read it too.

:func:`load_saved` loads any saved stage, Pipeline or model (the library's, pyspark's, Spark's)
and turns a missing or damaged save into one :class:`~sparkfield.core.errors.SavedStageError`
that names the folder (in a Pipeline, the damaged stage's folder) and what is wrong with it.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.param import Param, Params
from pyspark.ml.pipeline import PipelineSharedReadWrite
from pyspark.ml.util import MLReadable, MLReader, MLWritable, MLWriter
from pyspark.sql import SparkSession

from sparkfield.core.errors import SavedStageError
from sparkfield.core.failures import _java_chain, spark_input_error
from sparkfield.core.params import JobSchema

S = TypeVar("S", bound=Params)


class SchemaChecked:
    """A type converter: ``base``, then ``schema``'s checks of ``key`` (range, choices,
    pattern), then ``allowed`` where a stage takes fewer values than the job. Params._set
    names the param in the TypeError."""

    def __init__(self, schema: JobSchema, key: str, base: Any,
                 allowed: tuple[str, ...] | None = None) -> None:
        self.schema, self.key, self.base, self.allowed = schema, key, base, allowed

    def __call__(self, value: Any) -> Any:
        value = self.base(value)
        _, problem = self.schema.by_key[self.key].check(value)
        if problem is None and self.allowed is not None and value not in self.allowed:
            problem = f"must be one of {', '.join(self.allowed)}, got {value!r}"
        if problem is not None:
            raise TypeError(problem)
        return value


def schema_param(schema: JobSchema, name: str, key: str, base: Any, doc: str | None = None,
                 allowed: tuple[str, ...] | None = None) -> Param:
    """A stage param checked as ``schema``'s ``key``, with its help text unless ``doc``."""
    return Param(Params._dummy(), name, doc or schema.by_key[key].help,
                 typeConverter=SchemaChecked(schema, key, base, allowed))


def _accessor(prefix: str, name: str) -> str:
    """``setInputCol`` for ``("set", "inputCol")``: pyspark.ml's accessor names."""
    return prefix + name[:1].upper() + name[1:]


def _setter(name: str) -> Callable[[Any, Any], Any]:
    def set_param(self: Params, value: Any) -> Params:
        return self._set(**{name: value})

    set_param.__doc__ = f"Sets ``{name}`` (checked as the param checks it); returns the stage."
    return set_param


def _getter(name: str) -> Callable[[Any], Any]:
    def get_param(self: Params) -> Any:
        return self.getOrDefault(name)

    get_param.__doc__ = f"The value of ``{name}``, or its default."
    return get_param


class StageParams(Params):
    """Base of a stage's Params mixins: each subclass gets ``setXxx(value)`` (returns the
    stage) and ``getXxx()`` for each Param ``xxx`` it has, where neither it nor a base defines
    that method already; a stage writes only the accessors that do more than set or get."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in dir(cls):
            param = getattr(cls, name, None)
            if not isinstance(param, Param) or param.name != name:
                continue
            for prefix, make in (("set", _setter), ("get", _getter)):
                method = _accessor(prefix, name)
                if not hasattr(cls, method):
                    accessor = make(name)
                    accessor.__name__ = method
                    accessor.__qualname__ = f"{cls.__qualname__}.{method}"
                    setattr(cls, method, accessor)


def given(kwargs: dict[str, Any], nullable: frozenset[str] | set[str]) -> dict[str, Any]:
    """The keyword arguments a caller gave: ``None`` means "leave as it is" except for the
    ``nullable`` params, where it is the value."""
    return {k: v for k, v in kwargs.items() if v is not None or k in nullable}


def metadata(stage: Params, spark_version: str) -> dict[str, Any]:
    """What pyspark's ``DefaultParamsWriter`` saves, so that its readers read it too."""
    cls = type(stage)
    return {
        "class": f"{cls.__module__}.{cls.__name__}",
        "timestamp": int(round(time.time() * 1000)),
        "sparkVersion": spark_version,
        "uid": stage.uid,
        "paramMap": {p.name: v for p, v in stage._paramMap.items()},
        "defaultParamMap": {p.name: v for p, v in stage._defaultParamMap.items()},
    }


class StageWriter(MLWriter):
    """Saves a stage's params as one JSON line in ``<path>/metadata`` with the DataFrame API."""

    def __init__(self, instance: Params) -> None:
        super().__init__()
        self.instance = instance

    def save(self, path: str) -> None:
        spark = self.sparkSession
        text = json.dumps(metadata(self.instance, spark.version), separators=(",", ":"))
        mode = "overwrite" if self.shouldOverwrite else "error"  # both kinds of session know it
        spark.createDataFrame([(text,)], "value string").coalesce(1).write.mode(mode).text(
            f"{path.rstrip('/')}/metadata")


class StageReader(MLReader[S], Generic[S]):
    """Loads what :class:`StageWriter` (or ``DefaultParamsWriter``) saved. Defaults come back
    as saved, as pyspark restores them: a loaded stage works as the saved one did."""

    def __init__(self, cls: type[S]) -> None:
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> S:
        meta = read_metadata(self.sparkSession, path)
        if meta["class"].rsplit(".", 1)[-1] != self.cls.__name__:
            raise SavedStageError(f"{path}: a saved {meta['class']}, not a "
                                  f"{self.cls.__name__}")
        stage = self.cls()
        stage._resetUid(meta["uid"])
        known = {p.name for p in stage.params}
        unknown = sorted(set(meta["paramMap"]) - known)
        if unknown:
            raise SavedStageError(f"{path}: unknown params {', '.join(unknown)}")
        try:
            stage._setDefault(**{k: v for k, v in meta.get("defaultParamMap", {}).items()
                                 if k in known})
            return stage._set(**meta["paramMap"])
        except (TypeError, ValueError) as exc:
            raise SavedStageError(f"{path}: a saved param is not valid: {exc}") from None


class Persistent(MLReadable, MLWritable):
    """``save``/``load`` (and ``write``/``read``) through :class:`StageWriter`."""

    def write(self) -> MLWriter:
        return StageWriter(self)  # type: ignore[arg-type]

    @classmethod
    def read(cls) -> MLReader:
        return StageReader(cls)  # type: ignore[arg-type]


# -- loading saved stages -------------------------------------------------------------------

_FIELDS = {"class": str, "uid": str, "paramMap": dict}


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "(no message)"


def _why(exc: BaseException) -> str:
    """What a failed read says, in one line: the innermost Java error (a checksum that does
    not match, a Parquet file cut short, naming the file), else the file Spark could not read,
    else the Python error."""
    chain = _java_chain(exc)
    if chain:
        name, _, message = chain[-1].partition(": ")
        return f"{name.rsplit('.', 1)[-1]}: {_first_line(message)}"
    return spark_input_error(exc) or f"{type(exc).__name__}: {_first_line(str(exc))}"


def read_metadata(spark: SparkSession, path: str) -> dict[str, Any]:
    """The JSON line of ``<path>/metadata`` (as ``DefaultParamsWriter`` writes it), checked:
    SavedStageError naming ``path`` where it is missing, unreadable or not a stage's."""
    where = f"{path.rstrip('/')}/metadata"
    try:
        rows = spark.read.text(where).limit(2).collect()
    except Exception as exc:  # whatever the reader raises, the save cannot be read
        raise SavedStageError(f"{path}: cannot read its metadata: {_why(exc)}") from None
    if len(rows) != 1:
        what = "is empty" if not rows else "holds more than one line"
        raise SavedStageError(f"{path}: no saved stage ({where} {what})")
    try:
        meta = json.loads(rows[0][0])
    except ValueError as exc:
        raise SavedStageError(f"{path}: {where} is not valid JSON (cut short or damaged: "
                              f"{exc})") from None
    bad = [k for k, kind in _FIELDS.items()
           if not isinstance(meta, dict) or not isinstance(meta.get(k), kind)]
    if bad or not isinstance(meta.get("defaultParamMap", {}), dict):
        raise SavedStageError(f"{path}: {where} is not a saved stage's metadata (no valid "
                              f"{', '.join(bad) or 'defaultParamMap'})")
    return meta


def _saved_class(path: str, name: str) -> type:
    """The Python class of a saved ``name`` (Spark's own classes are pyspark's)."""
    if name.startswith("org.apache.spark."):
        name = "pyspark." + name.removeprefix("org.apache.spark.")
    module, _, cls = name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), cls, None) if module else None
    except ImportError:
        found = None
    if not isinstance(found, type) or not hasattr(found, "load"):
        raise SavedStageError(f"{path}: a saved {name}, which cannot be loaded here")
    return found


def _stage_paths(path: str, meta: dict[str, Any]) -> list[str] | None:
    """The stage folders of a saved Pipeline or PipelineModel, in order (None for a stage)."""
    uids = meta["paramMap"].get("stageUids", meta.get("stageUids"))
    if uids is None:
        return None
    if not isinstance(uids, list) or not all(isinstance(u, str) for u in uids):
        raise SavedStageError(f"{path}: its metadata lists no valid stage uids")
    stages = f"{path.rstrip('/')}/stages"
    return [PipelineSharedReadWrite.getStagePath(u, i, len(uids), stages)
            for i, u in enumerate(uids)]


def load_saved(path: str, spark: SparkSession | None = None) -> Any:
    """The stage, Pipeline or PipelineModel saved at ``path``, as its class's own reader loads
    it. SavedStageError, naming the folder that is damaged and what is wrong with it, where a
    save is missing or damaged: metadata unreadable (a checksum that no longer matches), cut
    short or not a stage's, a Pipeline's stage folder missing, a model's data cut short or
    removed. A Pipeline's stages are loaded one by one, so the error names the stage's
    folder."""
    spark = spark or SparkSession.active()
    meta = read_metadata(spark, path)
    cls = _saved_class(path, meta["class"])
    stage_paths = _stage_paths(path, meta)
    if stage_paths is not None and cls in (Pipeline, PipelineModel):
        stages = [load_saved(p, spark) for p in stage_paths]
        whole = Pipeline(stages=stages) if cls is Pipeline else PipelineModel(stages)
        return whole._resetUid(meta["uid"])
    try:
        return cls.load(path)
    except SavedStageError:
        raise
    except Exception as exc:  # the class's reader reads the data files: any failure is theirs
        raise SavedStageError(f"{path}: cannot load the saved {cls.__name__}: "
                              f"{_why(exc)}") from None
