"""What the library's Spark ML stages share: params checked as a job schema checks its keys,
and persistence through the DataFrame API.

:class:`StageWriter` writes what pyspark's ``DefaultParamsWriter`` writes (one JSON line in
``<path>/metadata``: class, uid, params, defaults) but with the DataFrame writer only, and
overwrites with the writer's own mode where ``MLWriter.save`` deletes through the JVM. So a
stage saves and loads on classic Spark and over Spark Connect, and pyspark's ``Pipeline`` and
``PipelineModel`` readers, which load each stage with its class's own reader, read it too.
"""

from __future__ import annotations

import json
import time
from typing import Any, Generic, TypeVar

from pyspark.ml.param import Param, Params
from pyspark.ml.util import MLReadable, MLReader, MLWritable, MLWriter

from sparkfield.core.errors import InputError
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
        row = self.sparkSession.read.text(f"{path.rstrip('/')}/metadata").first()
        if row is None:
            raise InputError(f"{path}: no saved stage (empty metadata)")
        meta = json.loads(row[0])
        if meta.get("class", "").rsplit(".", 1)[-1] != self.cls.__name__:
            raise InputError(f"{path}: a saved {meta.get('class')}, not a {self.cls.__name__}")
        stage = self.cls()
        stage._resetUid(meta["uid"])
        known = {p.name for p in stage.params}
        unknown = sorted(set(meta["paramMap"]) - known)
        if unknown:
            raise InputError(f"{path}: unknown params {', '.join(unknown)}")
        stage._setDefault(**{k: v for k, v in meta.get("defaultParamMap", {}).items()
                             if k in known})
        return stage._set(**meta["paramMap"])


class Persistent(MLReadable, MLWritable):
    """``save``/``load`` (and ``write``/``read``) through :class:`StageWriter`."""

    def write(self) -> MLWriter:
        return StageWriter(self)  # type: ignore[arg-type]

    @classmethod
    def read(cls) -> MLReader:
        return StageReader(cls)  # type: ignore[arg-type]
