"""A module that the executors (or the driver) cannot import ends a job in one line naming the
module, the package that provides it and the extra that ships it."""

import tomllib

import pytest

from sparkfield.core.cli import (
    EXIT_BAD_INPUT,
    executors_run_this_python,
    missing_extra_error,
    run_job,
)
from sparkfield.core.conf import load_config
from sparkfield.core.failures import MODULE_PACKAGES, missing_module_error


def _import_in_executor(spark, module: str):
    def worker(batches):
        for batch in batches:
            raise ModuleNotFoundError(f"No module named '{module}'", name=module)
            yield batch

    spark.range(4).mapInPandas(worker, "id long").collect()


def test_an_executor_without_a_package_is_one_line_naming_it(spark, repo_root, capsys):
    cfg = load_config("process_mining", "local", repo_root / "conf")
    code = run_job("process_mining", cfg, None, None,
                   lambda s, c: _import_in_executor(spark, "lxml"), None)
    assert code == EXIT_BAD_INPUT
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    # the test session's executors are local and run this Python: the fix is installing here
    assert lines == ["error: Python module 'lxml' is not installed (package lxml; the local "
                     "executors run this Python): the process_mining job needs the 'process' "
                     "extra: pip install 'sparkfield[process]'"]


def test_executors_of_their_own_environment_get_the_pack_env_advice(spark):
    with pytest.raises(Exception) as info:
        _import_in_executor(spark, "lxml")
    assert executors_run_this_python(spark)  # the test session's: the case above
    # a cluster's executors: installing here would not help them
    assert missing_extra_error(info.value, "process_mining", "process") is None
    assert "make pack-env" in missing_module_error(info.value)


def test_a_session_that_cannot_say_where_its_executors_run_hides_no_failure():
    class Stopped:
        @property
        def sparkContext(self):  # noqa: N802 - pyspark's name
            raise RuntimeError("the session is stopped")

    assert executors_run_this_python(Stopped()) is False


def test_a_module_outside_the_table_is_named_too(spark):
    with pytest.raises(Exception) as info:
        _import_in_executor(spark, "shapely.geometry")
    line = missing_module_error(info.value)
    assert line is not None and "'shapely.geometry'" in line and "make pack-env" in line
    assert missing_module_error(ValueError("no module here")) is None


def test_the_advice_fits_the_module_and_where_it_was_missing(spark):
    with pytest.raises(Exception) as info:
        _import_in_executor(spark, "torch")
    assert missing_module_error(info.value) == (
        "Python module 'torch' is missing on an executor (package torch): pack it with "
        "`make pack-env EXTRAS=nlp` and pass --python-env build/sparkfield-env.tar.gz")
    with pytest.raises(Exception) as info:
        _import_in_executor(spark, "sparkfield.text")
    assert "the library travels as the --py-files zip" in missing_module_error(info.value)
    driver = ModuleNotFoundError("No module named 'trafilatura'", name="trafilatura")
    assert missing_module_error(driver).startswith(
        "Python module 'trafilatura' is missing on the driver (package trafilatura)")


def test_the_module_table_agrees_with_the_project_extras(repo_root):
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())["project"]

    def names(reqs):
        return {r.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0]
                .strip().lower() for r in reqs}

    extras = {e: names(reqs) for e, reqs in project["optional-dependencies"].items()}
    base = names(project["dependencies"])
    for module, (package, where) in MODULE_PACKAGES.items():
        if not where:
            assert package in base, module
        for extra in where:
            assert package in extras[extra], (module, extra)
        # every runtime extra that requires the package is named
        assert {e for e in ("geo", "process", "text", "nlp") if package in extras[e]} \
            == set(where), module
