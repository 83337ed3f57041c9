"""Conf profiles -> spark-submit arguments: standalone, YARN and Kubernetes, with and without a
packed Python environment."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sparkfield.core.errors import ConfigError
from sparkfield.deploy.submit import ENV_PYTHON, submit_spec

CONF = Path(__file__).resolve().parents[2] / "conf"
ENV_URI = "hdfs:///apps/sparkfield/sparkfield-env.tar.gz"


def test_local_profile_is_client_mode_without_archives():
    spec = submit_spec("coffee_shops", "local", CONF)
    assert spec.master == "local[*]" and spec.deploy_mode == "client" and not spec.archives
    assert "spark.submit.deployMode" not in spec.conf
    args = spec.args()
    assert args[:2] == ["--master", "local[*]"] and "--archives" not in args
    assert args[args.index("--files") + 1].split(",") == [
        str(CONF / "base.yaml"), str(CONF / "local.yaml"), str(CONF / "jobs/coffee_shops.yaml")]


def test_yarn_profile_runs_the_driver_in_the_cluster_on_the_packed_environment():
    spec = submit_spec("event_log", "yarn", CONF, python_env=ENV_URI, driver_python="/x/python")
    assert spec.master == "yarn" and spec.deploy_mode == "cluster"
    assert spec.archives == [f"{ENV_URI}#environment"]
    assert spec.conf["spark.pyspark.python"] == ENV_PYTHON
    # cluster mode: the driver runs in YARN too, so it must not get the local interpreter
    assert "spark.pyspark.driver.python" not in spec.conf
    assert spec.conf["spark.yarn.maxAppAttempts"] == "1"
    assert spec.conf["spark.executor.memoryOverhead"] == "2g"


def test_k8s_profile_names_image_namespace_and_upload_path():
    spec = submit_spec("bag_of_words", "k8s", CONF, python_env=ENV_URI)
    assert spec.master.startswith("k8s://https://") and spec.deploy_mode == "cluster"
    for key in ("spark.kubernetes.container.image", "spark.kubernetes.namespace",
                "spark.kubernetes.file.upload.path",
                "spark.kubernetes.authenticate.driver.serviceAccountName"):
        assert spec.conf[key], key
    assert spec.archives == [f"{ENV_URI}#environment"]


def test_client_mode_keeps_the_local_driver_python(tmp_path):
    env = tmp_path / "env.tar.gz"
    env.write_bytes(b"")
    spec = submit_spec("coffee_shops", "cluster", CONF, master="spark://h:7077",
                       python_env=str(env), driver_python="/opt/venv/bin/python")
    assert spec.master == "spark://h:7077" and spec.deploy_mode == "client"
    assert spec.conf["spark.pyspark.driver.python"] == "/opt/venv/bin/python"
    assert spec.conf["spark.pyspark.python"] == ENV_PYTHON
    assert spec.archives == [f"{env}#environment"]


@pytest.mark.parametrize("profile", ["yarn", "k8s"])
def test_profile_env_archive_must_exist_when_local(tmp_path, profile):
    # both profiles name build/sparkfield-env.tar.gz (relative to the project: the conf dir's
    # parent), which `make pack-env` builds; a copy of conf/ in an empty project has none
    shutil.copytree(CONF, tmp_path / "conf")
    with pytest.raises(ConfigError, match="make pack-env") as err:
        submit_spec("coffee_shops", profile, tmp_path / "conf")
    assert str(tmp_path / "build" / "sparkfield-env.tar.gz") in str(err.value)
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "sparkfield-env.tar.gz").write_bytes(b"")
    spec = submit_spec("coffee_shops", profile, tmp_path / "conf")
    assert spec.archives == [f"{tmp_path / 'build' / 'sparkfield-env.tar.gz'}#environment"]


def _with_odd_profile(conf: Path, odd: str) -> Path:
    """``conf`` holding the base and local profiles and ``odd.yaml`` with the text ``odd``."""
    for name in ("base.yaml", "local.yaml"):
        (conf / name).write_text((CONF / name).read_text())
    (conf / "odd.yaml").write_text(odd)
    return conf


def test_bad_deploy_mode_is_rejected(tmp_path):
    _with_odd_profile(tmp_path, "spark:\n  conf:\n    spark.submit.deployMode: both\n")
    with pytest.raises(ConfigError, match="client or cluster"):
        submit_spec("coffee_shops", "odd", tmp_path)


# -- the JVMs' collectors -------------------------------------------------------------------

REGIONS = "-XX:G1HeapRegionSize=32m"
PARALLEL = "-XX:+UseParallelGC"


@pytest.mark.parametrize("profile", ["local", "cluster", "yarn", "k8s", "local,quick"])
def test_every_profile_gives_its_jvms_their_collector(profile, tmp_path, monkeypatch):
    """A cluster's driver and executors run G1 with large regions (conf/base.yaml says why);
    the local profile's one JVM, driver and executors at once, runs the parallel collector
    (conf/local.yaml). The C1 flag of a small input or the quick profile goes beside them,
    not instead of them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log.xes").write_bytes(b"x" * 1000)
    spec = submit_spec("process_mining", profile, CONF, python_env=ENV_URI,
                       job_args=["--log", "log.xes"])
    local = profile.startswith("local")
    assert spec.conf["spark.driver.defaultJavaOptions"] == (PARALLEL if local else REGIONS)
    assert spec.conf["spark.executor.defaultJavaOptions"] == REGIONS
    if local:
        assert spec.conf["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"


def test_the_sessions_jvm_runs_the_local_collector(spark):
    """The conf reaches the JVM that a session of the library starts (the tests' own, on the
    local profile)."""
    jvm = spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert PARALLEL in args, args
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = [b.getName() for b in beans]
    assert "PS Scavenge" in names and not any("G1" in n for n in names), names


# -- a small input: C1 only, no adaptive execution, kept frames as local checkpoints --------

SMALL = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
         "spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "2",
         "spark.sparkfield.keep": "local_checkpoint",
         "spark.python.sql.dataFrameDebugging.enabled": "false"}


def _small_part(conf: dict[str, str]) -> dict[str, str | None]:
    return {k: conf.get(k) for k in SMALL}


def test_a_small_input_gets_c1_only_and_no_adaptive_execution(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log.xes").write_bytes(b"x" * 1000)
    spec = submit_spec("process_mining", "local", CONF,
                       job_args=["--log", "log.xes", "--output", "out"])
    assert _small_part(spec.conf) == SMALL
    # no job arguments known (the Airflow DAG) or a cluster: the profile's own settings
    for other in (submit_spec("process_mining", "local", CONF),
                  submit_spec("process_mining", "cluster", CONF, job_args=["--log", "log.xes"])):
        assert "spark.driver.extraJavaOptions" not in other.conf
        assert other.conf["spark.sql.adaptive.enabled"] == "true"
        assert "spark.sparkfield.keep" not in other.conf  # cached: recomputed if lost
    # the quick profile's own C1 flag is not given twice
    quick = submit_spec("process_mining", "local,quick", CONF, job_args=["--log", "log.xes"])
    assert _small_part(quick.conf) == SMALL
    # the command line's driver Java options replace the small input's, the rest stays
    own = submit_spec("process_mining", "local", CONF, job_args=["--log", "log.xes"],
                      own_driver_java=True)
    assert "spark.driver.extraJavaOptions" not in own.conf
    assert own.conf["spark.sql.adaptive.enabled"] == "false"


TINY = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
# what the local profile sets itself for the keys the tiers set (None: Spark's default)
PROFILE_DEFAULTS = {"spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": "8"}


@pytest.mark.parametrize("mib, tiers", [(0.001, (SMALL, TINY)), (3.9, (SMALL, TINY)),
                                        (4.0, (SMALL,)), (63.9, (SMALL,)), (64.0, ())])
def test_a_tiny_input_gets_both_tiers_and_a_small_one_only_the_first(tmp_path, monkeypatch,
                                                                      mib, tiers):
    """conf/local.yaml's limits: under 4 MiB interpreted expressions over the small input's
    settings; under 64 MiB the small input's alone; from 64 MiB the profile's."""
    monkeypatch.chdir(tmp_path)
    with (tmp_path / "log.xes").open("wb") as f:
        f.truncate(int(mib * 2**20))
    spec = submit_spec("process_mining", "local", CONF, job_args=["--log", "log.xes"])
    want = {k: v for tier in tiers for k, v in tier.items()}
    assert {k: spec.conf.get(k) for k in {**SMALL, **TINY}} == {
        k: want.get(k, PROFILE_DEFAULTS.get(k)) for k in {**SMALL, **TINY}}


def _small_input_under_odd(tmp_path: Path, monkeypatch, odd: str):
    """The spec of process_mining on a 1,000-byte log under the local profile and ``odd``."""
    conf = _with_odd_profile(tmp_path, odd)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log.xes").write_bytes(b"x" * 1000)
    return submit_spec("process_mining", "local,odd", conf, job_args=["--log", "log.xes"])


def test_a_tiers_settings_alone_apply_without_the_other_tier(tmp_path, monkeypatch):
    """Each tier stands on its own limit: a profile with only the tiny tier gives it alone."""
    spec = _small_input_under_odd(tmp_path, monkeypatch, "submit:\n  small_input_below_mb: "
                                  "null\n  tiny_input_conf: {spark.x: 1}\n")
    assert spec.conf["spark.x"] == "1"
    assert spec.conf["spark.sql.adaptive.enabled"] == "true"
    assert "spark.driver.extraJavaOptions" not in spec.conf


def test_a_profiles_java_options_are_kept_beside_the_small_inputs(tmp_path, monkeypatch):
    spec = _small_input_under_odd(tmp_path, monkeypatch, "spark:\n  conf:\n    "
                                  "spark.driver.extraJavaOptions: -Dmine=1 "
                                  "-XX:TieredStopAtLevel=1\n")
    assert spec.conf["spark.driver.extraJavaOptions"] == "-Dmine=1 -XX:TieredStopAtLevel=1"


def test_a_large_or_unknown_input_keeps_the_profiles_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    big = tmp_path / "log.xes.gz"
    with big.open("wb") as f:  # 7 MiB compressed counts as 70 MiB: over the local 64
        f.truncate(7 * 2**20)
    for args in (["--log", str(big)], ["--log=hdfs:///logs/a.xes"],
                 ["--urls", "urls.txt"]):
        spec = submit_spec("process_mining", "local", CONF, job_args=args)
        assert "spark.driver.extraJavaOptions" not in spec.conf, args
        assert spec.conf["spark.sql.adaptive.enabled"] == "true", args
        assert spec.conf["spark.sql.shuffle.partitions"] == "8", args


@pytest.mark.parametrize("section, message", [
    ("small_input_below: 10", "unknown key 'submit.small_input_below'"),
    ("quick_jit_below_mb: 10", "is now submit.small_input_below_mb"),
    ("small_input_below_mb: lots", "expected a number of MiB"),
    ("small_input_conf: [a, b]", "small_input_conf: expected Spark settings"),
    ("small_input_conf:\n    a.b: {c: 1}", "small_input_conf: expected Spark settings"),
    ("tiny_input_below_mb: -1", "tiny_input_below_mb: expected a number of MiB"),
    ("tiny_input_conf: on", "tiny_input_conf: expected Spark settings"),
])
def test_the_submit_section_rejects_unknown_keys_and_bad_values(tmp_path, section, message):
    _with_odd_profile(tmp_path, f"submit:\n  {section}\n")
    with pytest.raises(ConfigError, match=message):
        submit_spec("coffee_shops", "local,odd", tmp_path)


def test_a_null_limit_turns_the_small_input_settings_off(tmp_path):
    _with_odd_profile(tmp_path, "submit:\n  small_input_below_mb: null\n")
    spec = submit_spec("coffee_shops", "local,odd", tmp_path, job_args=[])
    assert "spark.driver.extraJavaOptions" not in spec.conf
    assert spec.conf["spark.sql.adaptive.enabled"] == "true"
