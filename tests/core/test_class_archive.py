"""The driver JVM's class archive: when one is used or written, and under which name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparkfield.deploy.class_archive import fingerprint, options, why_not


@pytest.fixture
def spark_home(tmp_path) -> Path:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"core")
    return home


def _env(**extra: str) -> dict[str, str]:
    java_home = {"JAVA_HOME": os.environ["JAVA_HOME"]} if "JAVA_HOME" in os.environ else {}
    return {"PATH": os.environ["PATH"], **java_home, **extra}


def test_written_once_then_mapped(spark_home, tmp_path):
    folder = tmp_path / "jvm"
    env = _env()
    opts, partial = options(str(spark_home), folder, "123", env)
    assert partial is not None and partial.name.endswith(".jsa.123.partial")
    assert opts[0] == f"-XX:ArchiveClassesAtExit={partial}"
    assert "-Xlog:cds=off" in opts
    # the run succeeded: submit.sh renames the partial archive; the next run maps it
    archive = partial.with_name(partial.name.removesuffix(".123.partial"))
    archive.write_bytes(b"archive")
    opts, partial = options(str(spark_home), folder, "124", env)
    assert partial is None and opts[0] == f"-XX:SharedArchiveFile={archive}"
    # an empty file (a write cut short) is written again
    archive.write_bytes(b"")
    assert options(str(spark_home), folder, "125", env)[1] is not None


def test_a_new_spark_or_java_gets_its_own_archive(spark_home, tmp_path):
    folder = tmp_path / "jvm"
    env = _env()
    first = fingerprint(str(spark_home), env)
    assert fingerprint(str(spark_home), env) == first
    (spark_home / "jars" / "spark-sql.jar").write_bytes(b"sql")
    second = fingerprint(str(spark_home), env)
    assert second != first
    assert fingerprint(str(spark_home), {**env, "SPARK_CONF_DIR": str(tmp_path)}) != second
    folder.mkdir()
    (folder / f"{first}.jsa").write_bytes(b"old install")
    options(str(spark_home), folder, "9", env)
    assert not (folder / f"{first}.jsa").exists()  # replaced, not kept beside


@pytest.mark.parametrize("extra, given, reason", [
    ({"SPARKFIELD_CLASS_ARCHIVE": "0"}, False, "SPARKFIELD_CLASS_ARCHIVE=0"),
    ({}, True, "a driver class path is given"),
    ({"HADOOP_CONF_DIR": "/etc/hadoop"}, False, "HADOOP_CONF_DIR is set"),
    ({"YARN_CONF_DIR": "/etc/hadoop"}, False, "YARN_CONF_DIR is set"),
    ({"SPARK_DIST_CLASSPATH": "/opt/lib/*"}, False, "SPARK_DIST_CLASSPATH is set"),
    ({"PATH": "/nonexistent", "JAVA_HOME": ""}, False, "no java found"),
])
def test_no_archive_where_java_could_not_write_one(spark_home, tmp_path, extra, given,
                                                   reason):
    env = _env(**extra)
    assert why_not(str(spark_home), env, given) == reason
    assert options(str(spark_home), tmp_path / "jvm", "1", env, given) == ([], None)
    assert not (tmp_path / "jvm").exists()


def test_a_conf_directory_on_the_class_path_must_be_empty(spark_home, tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    assert why_not(str(spark_home), _env(SPARK_CONF_DIR=str(conf)), False) is None
    (conf / "spark-defaults.conf").write_text("spark.master local\n")
    assert "not empty" in why_not(str(spark_home), _env(SPARK_CONF_DIR=str(conf)), False)
    # without SPARK_CONF_DIR the launcher uses $SPARK_HOME/conf
    assert why_not(str(spark_home), _env(), False) is None
    (spark_home / "conf").mkdir()
    (spark_home / "conf" / "log4j2.properties.template").write_text("")
    assert "not empty" in why_not(str(spark_home), _env(), False)
