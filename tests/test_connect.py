"""The library over Spark Connect: a real Connect server from the installed pyspark on
127.0.0.1, and the tests of the public functions run again with their session a Connect one
(``SPARKFIELD_TEST_REMOTE``), in a process of their own (a Python process holds either a classic
or a Connect session, not both). The same assertions pass on both, so results are equal; for
the process filters and statistics the results of both sessions are also compared directly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from sparkfield.core.conf import load_config
from sparkfield.core.connect import ConnectRetries, connect_retries
from sparkfield.core.errors import ConfigError
from tests.conftest import REMOTE, ROOT, job_module
from tests.connect_server import connect_server

# the tests of the public building blocks, run as they are over Connect
CONNECT_SUITE = [
    "tests/core/test_session_figures.py",
    "tests/core/test_practices_any_session.py",
    "tests/process/test_discover.py",
    "tests/process/test_xes_jvm.py",  # the library's jar added as an artifact
    *(f"tests/process/test_from_frames.py::{name}" for name in (
        "test_ocel_from_frames_builds_the_log_its_rejects_and_views",
        "test_event_log_from_frames_builds_the_events_rejects_and_views")),
    *(f"tests/geo/test_best_locations.py::{name}" for name in (
        "test_best_locations_equals_a_brute_force",
        "test_the_spark_ranking_is_the_pandas_one_and_columns_can_be_named")),
    "tests/text/test_stages.py",
    "tests/nlp/test_embedding_stage.py",
    *(f"tests/nlp/test_classification.py::{name}" for name in (
        "test_single_label_equals_the_hf_pipeline",
        "test_null_blank_and_long_texts_are_kept_and_counted", "test_save_load_and_a_pipeline")),
    "tests/nlp/test_token_classification.py::test_null_blank_and_long_texts_are_kept_and_counted",
    # the filters on inline frames (their pm4py comparisons on whole logs run on classic Spark)
    *(f"tests/process/test_filters.py::{name}" for name in (
        "test_equal_timestamps_follow_row_order_or_the_order_column",
        "test_case_filters_keep_whole_cases_and_their_rows",
        "test_eventually_follows_needs_the_order_and_two_occurrences_of_a_pair_of_one",
        "test_attribute_values_by_event_and_by_case_with_a_missing_value",
        "test_time_range_bounds_are_included_and_read_in_the_time_zone",
        "test_variant_ranking_and_coverage", "test_filters_chain_and_feed_the_views",
        "test_a_null_row_is_named_not_dropped", "test_bad_arguments_are_named")),
    # the statistics on inline frames (their pm4py comparisons run on classic Spark)
    *(f"tests/process/test_statistics.py::{name}" for name in (
        "test_a_null_resource_is_left_out_of_the_counts_not_the_totals",
        "test_handover_skips_a_null_resource_and_counts_self_handovers",
        "test_handover_follows_the_order_column_on_equal_times",
        "test_small_frame_over_time_with_quiet_days",
        "test_naive_times_and_periods_are_in_the_time_zone",
        "test_small_frame_durations_histogram_and_summary",
        "test_small_frame_activity_frequencies", "test_bad_arguments_are_named",
        "test_a_null_case_is_named_not_dropped")),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with connect_server(tmp_path_factory.mktemp("connect")) as url:
        yield url


@pytest.mark.slow
@pytest.mark.heavy
def test_the_public_functions_pass_their_tests_over_spark_connect(server, shared_data):
    env = {**os.environ, REMOTE: server}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-m", "not cluster and not classic", "-rs", *CONNECT_SUITE],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    tail = (res.stdout + res.stderr)[-6000:]
    assert res.returncode == 0, tail
    passed = re.search(r"(\d+) passed", res.stdout)
    assert passed and int(passed.group(1)) > 0, tail
    assert "skipped" not in res.stdout.splitlines()[-1], tail


@pytest.mark.slow
def test_filters_and_statistics_give_the_same_results_over_spark_connect(server, spark):
    from tests.process.event_frames import library_results

    classic = json.loads(json.dumps(library_results(spark)))  # tuples as lists, as JSON has
    code = ("import json, sys\n"
            "from pyspark.sql import SparkSession\n"
            "from tests.process.event_frames import library_results\n"
            "spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
            "assert type(spark).__module__.startswith('pyspark.sql.connect'), type(spark)\n"
            "print(json.dumps(library_results(spark)))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", REMOTE)}
    res = subprocess.run([sys.executable, "-c", code, server], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    remote = json.loads(res.stdout.strip().splitlines()[-1])
    assert remote.keys() == classic.keys()
    for name, rows in classic.items():
        assert remote[name] == rows, name
    # every call keeps or counts something, so equal empty results cannot pass by accident
    assert all(classic.values()), [name for name, rows in classic.items() if not rows]
    assert [f["cases_kept"] for f in classic["mapping_filters_report"]] == [2, 1]


@pytest.mark.slow
def test_the_building_blocks_notebook_runs_over_spark_connect(server, monkeypatch):
    from tests.test_notebooks import check_building_blocks, execute_notebook

    monkeypatch.setenv("SPARK_REMOTE", server)  # what a user sets before starting Jupyter
    shown = execute_notebook("building_blocks")
    assert shown["connect"]
    check_building_blocks(shown)


@pytest.mark.parametrize("job", sorted(p.stem for p in (ROOT / "jobs").glob("*.py")))
def test_a_job_asked_to_run_over_spark_connect_exits_2_saying_why(job, capsys, monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert job_module(job).main(["--remote", "sc://127.0.0.1:15002"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the jobs run on classic Spark")
    assert "--remote sc://127.0.0.1:15002" in err[0] and "library's functions" in err[0]
    monkeypatch.setenv("SPARK_REMOTE", "sc://10.0.0.1:15002")
    assert job_module(job).main([]) == 2
    assert "SPARK_REMOTE=sc://10.0.0.1:15002" in capsys.readouterr().err


def test_the_connect_section_bounds_the_retries_well_under_pyspark_s_ten_minutes(repo_root):
    cfg = load_config("connect", "local", repo_root / "conf")
    retries = connect_retries(cfg.raw.get("connect"))
    assert retries == ConnectRetries()  # the conf's values are the documented defaults
    assert retries.backoffs_ms() == [50, 200, 800, 3200, 10_000, 10_000, 10_000]
    assert 30 < retries.longest_wait_s() < 60
    policy = retries.policy()
    assert (policy.max_retries, policy.initial_backoff, policy.max_backoff,
            policy.max_server_retry_delay) == (7, 50, 10_000, 10_000)
    pyspark_default = ConnectRetries(max_retries=15, max_backoff_ms=60_000)
    assert pyspark_default.longest_wait_s() > 600
    assert connect_retries({"max_retries": 2}).longest_wait_s() == 0.25
    with pytest.raises(ConfigError, match="unknown key 'connect.retries'"):
        connect_retries({"retries": 3})
    with pytest.raises(ConfigError, match="connect.max_backoff_ms"):
        connect_retries({"max_backoff_ms": "1m"})


# a library session on a live server, its retries from a conf's connect section (a shorter
# bound than the defaults' 40 s, checked above); after a line on stdin (the server is gone by
# then) one library call, timed
DEAD_CONNECT = {"max_retries": 4, "initial_backoff_ms": 50, "backoff_multiplier": 4.0,
                "max_backoff_ms": 10_000}
DEAD_SERVER_CLIENT = """
import json, sys, time
from sparkfield.core.conf import load_config
from sparkfield.core.connect import default_parallelism
from sparkfield.core.session import connect_session
cfg = load_config("connect", "local", None, {"connect": json.loads(sys.argv[2])})
spark = connect_session(sys.argv[1], cfg)
assert spark.range(3).count() == 3
print(json.dumps([p.max_retries for p in spark.client.get_retry_policies()]), flush=True)
sys.stdin.readline()
t0 = time.monotonic()
try:
    default_parallelism(spark)
    error = None
except Exception as exc:
    error = type(exc).__name__ + ": " + str(exc).strip().splitlines()[0][:300]
print(json.dumps({"seconds": round(time.monotonic() - t0, 1), "error": error}), flush=True)
"""


@pytest.mark.slow
def test_a_call_after_the_server_died_is_an_error_within_the_bound(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", REMOTE)}
    with connect_server(tmp_path) as url:
        client = subprocess.Popen([sys.executable, "-c", DEAD_SERVER_CLIENT, url,
                                   json.dumps(DEAD_CONNECT)], cwd=ROOT,
                                  env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        ready = client.stdout.readline()
        if not ready:
            client.kill()
            pytest.fail(client.communicate(timeout=60)[1][-3000:])
        assert json.loads(ready) == [DEAD_CONNECT["max_retries"]]
    # the server is stopped: pyspark alone would retry for about 10 minutes
    out, err = client.communicate("\n", timeout=300)
    result = json.loads(out.strip().splitlines()[-1])
    print(f"a call on a dead server failed after {result['seconds']} s: {result['error']}")
    assert result["error"] and "SparkConnect" in result["error"], err[-3000:]
    bound = ConnectRetries(**DEAD_CONNECT).longest_wait_s()  # 4.25 s of waits
    assert 0.8 * bound < result["seconds"] < bound + 20, result  # it retried, then gave up
