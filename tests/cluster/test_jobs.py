"""Every job on the shared-nothing cluster (see conftest.py) equals the same job run locally.

Inputs, outputs and the checkpoint directory live in the shared directory (or in the shared
data folder beside the checkout); the driver runs on this machine, the executors in the
workers' private mount namespaces with the packed environment. The local reference runs are
made in this process, through the job's own ``main``, on the test session's local Spark."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.conftest import job_module

from .conftest import BASE_EXTRAS, ROOT, Cluster, packed_env, run_submit


def _ok(res) -> None:
    log = res.stdout + res.stderr
    # the first error line and the end of the log (a JVM stack trace can bury the cause)
    first = next((line for line in log.splitlines()
                  if "Exception:" in line or line.startswith("error")), "")
    assert res.returncode == 0, f"{first[:2000]}\n...\n{log[-5000:]}"


def _local(spark, job: str, *args: str) -> None:
    """``job`` run locally with ``args``, in this process (the ``spark`` fixture's session)."""
    assert spark is not None
    assert job_module(job).main(["--profile", "local", *args]) == 0


def _ran_on_workers(cluster: Cluster, before: set[str]) -> None:
    """The new application unpacked the packed environment on the workers."""
    new = [a for a in cluster.apps() if a["id"] not in before]
    assert len(new) == 1, new
    assert cluster.worker_files(f"/tmp/work/{new[0]['id']}/*/environment/bin/python"), \
        "the packed environment was not unpacked on the workers"


def _ids(cluster: Cluster) -> set[str]:
    return {a["id"] for a in cluster.apps()}


def test_packed_environment_holds_the_packages_not_spark_or_sparkfield():
    """`make pack-env`'s venv-pack archive: the geo, process and text extras, native code
    (lxml) included; pyspark comes from the cluster and Sparkfield from the --py-files zip."""
    import tarfile

    with tarfile.open(packed_env(BASE_EXTRAS)) as tar:
        names = set(tar.getnames())
    assert "bin/python" in names
    site = "lib/python3.11/site-packages"
    for module in ("lxml", "requests", "bs4", "nltk", "trafilatura", "matplotlib", "yaml",
                   "pyarrow"):  # every job's packages but embed's, from `make pack-env`
        assert any(n.startswith(f"{site}/{module}/") for n in names), module
    assert not any("/pyspark/" in n or "/sparkfield/" in n for n in names)


COFFEE = ["--grid-step-m", "50"]


@pytest.fixture(scope="module")
def coffee_local(spark, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("coffee") / "local"
    _local(spark, "coffee_shops", "--output", str(out), *COFFEE)
    return out


def test_coffee_shops_on_bundled_defaults(cluster: Cluster, coffee_local):
    """The bundled demo data is read on the driver and reaches the executors as data."""
    out = cluster.shared / "coffee_bundled"
    before = _ids(cluster)
    _ok(cluster.submit("coffee_shops", "--output", str(out), *COFFEE))
    _ran_on_workers(cluster, before)
    cl = pd.read_csv(out / "top_locations.csv")
    assert len(cl) == 10
    pd.testing.assert_frame_equal(cl, pd.read_csv(coffee_local / "top_locations.csv"))
    # the checkpoints went beside the output on shared storage and were cleaned up
    assert not list(cluster.shared.glob(".coffee_bundled.checkpoints*"))


def test_a_driver_local_checkpoint_dir_is_refused_before_any_work(cluster: Cluster):
    out = cluster.shared / "coffee_tmp_ckpt"
    res = run_submit("coffee_shops", "--profile", "cluster", "--master", cluster.master,
                     "--python-env", str(cluster.env), "--output", str(out),
                     "--conf-dir", str(_conf_with(cluster, "/tmp/sparkfield/checkpoints")))
    assert res.returncode == 2, (res.stdout + res.stderr)[-3000:]
    assert "checkpoint_dir /tmp/sparkfield/checkpoints is on the driver's local disk" \
        in res.stderr
    assert not out.exists()


def test_an_output_on_the_drivers_own_disk_is_refused_before_any_work(cluster: Cluster):
    """Each executor would commit its files on its own /tmp and Spark's job commit would
    pass with none of them: an empty output with a run report of full counts."""
    out = Path(tempfile.gettempdir()) / f"coffee-driver-only-{uuid.uuid4().hex[:8]}"
    res = run_submit("coffee_shops", "--profile", "cluster", "--master", cluster.master,
                     "--python-env", str(cluster.env), "--output", str(out))
    assert res.returncode == 2, (res.stdout + res.stderr)[-3000:]
    assert f"--output {out} is on the driver's local disk" in res.stderr
    assert not out.exists()
    assert not list(out.parent.glob(f".{out.name}.__staging-*"))


def _conf_with(cluster: Cluster, checkpoint_dir: str) -> Path:
    conf = cluster.shared / "conf-tmp-ckpt"
    if not conf.exists():
        shutil.copytree(ROOT / "conf", conf)
        text = (conf / "cluster.yaml").read_text()
        (conf / "cluster.yaml").write_text(text.replace(
            "  checkpoint_dir: null", f"  checkpoint_dir: {checkpoint_dir}"))
    return conf


@pytest.fixture(scope="module")
def wiki_shared(cluster: Cluster, wiki_pages) -> Path:
    """The test pages copied to shared storage (the driver's /tmp is not the workers')."""
    dest = cluster.shared / "wiki"
    if not dest.exists():
        shutil.copytree(wiki_pages, dest)
    return dest


PM4PY = "process_mining/event_logs/pm4py"


def _same_csvs(a: Path, b: Path, *names: str) -> None:
    for name in names:
        pd.testing.assert_frame_equal(pd.read_csv(a / name), pd.read_csv(b / name),
                                      obj=name)


ORDERS = ROOT / "conf" / "event_logs" / "olist_orders.yaml"


@pytest.fixture(scope="module")
def orders_local(spark, shared_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("event_log") / "local"
    _local(spark, "event_log", "--mapping", str(ORDERS), "--output", str(out))
    return out


@pytest.mark.heavy
def test_event_log_from_csv_and_sql_views(cluster: Cluster, orders_local):
    """SQL views over CSV sources. The mapping is read on the driver through Hadoop's
    FileSystem; the data is on shared storage."""
    out = cluster.shared / "event_log_orders"
    _ok(cluster.submit("event_log", "--mapping", str(ORDERS), "--output", str(out)))
    _same_csvs(out, orders_local, "dfg.csv", "variants.csv")


OCEL = ROOT / "conf" / "event_logs" / "olist_ocel.yaml"


@pytest.mark.heavy
def test_event_log_object_centric_sqlite_from_executor_parts(cluster: Cluster, spark,
                                                             shared_data, tmp_path):
    """ocel.sqlite built by the executors in parts of 5,000 rows (the log has about 28,000
    events), appended by the driver: the same tables, row for row, as a local run whose
    driver placed every table itself (one part each)."""
    local = tmp_path / "local"
    _local(spark, "event_log", "--mapping", str(OCEL), "--output", str(local),
           "--exports", "none")
    out = cluster.shared / "event_log_ocel"
    _ok(cluster.submit("event_log", "--mapping", str(OCEL), "--output", str(out),
                       "--exports", "none", "--sqlite-part-rows", "5000"))
    tables = {}
    for run in (local, out):
        with sqlite3.connect(run / "ocel.sqlite") as db:
            names = [r[0] for r in db.execute("SELECT name FROM sqlite_master "
                                              "WHERE type = 'table' ORDER BY name")]
            tables[run] = {n: db.execute(f'SELECT * FROM "{n}" ORDER BY rowid').fetchall()
                           for n in names}
    assert len(tables[out]["event"]) > 25_000
    assert tables[out] == tables[local]


# parsed by the executors: the gzip log is decompressed by one and its traces dealt out to both;
# the plain log's byte ranges parsed in the JVM by the library's jar, which only the driver has
@pytest.mark.parametrize("log", ["receipt.xes.gz", "roadtraffic100traces.xes"])
def test_process_mining_on_a_shared_log(cluster: Cluster, spark, shared_data, log, tmp_path):
    src = cluster.shared / "logs" / log
    src.parent.mkdir(exist_ok=True)
    shutil.copy(shared_data / PM4PY / log, src)
    out = cluster.shared / f"pm_{log.replace('.', '_')}"
    # the plain log's run checks the reader only: the tables compared, nothing else
    only_views = ("--no-model", "--no-conformance", "--no-statistics", "--exports", "none") \
        if log.endswith(".xes") else ()
    _ok(cluster.submit("process_mining", "--log", str(src), "--output", str(out),
                       "--conf", "spark.sql.files.maxPartitionBytes=64k", *only_views))
    notes = json.loads((out / "run_report.json").read_text())["notes"]
    assert any("parsed in the JVM" in n for n in notes) == log.endswith(".xes"), notes
    # the oracle for the two tables compared: the local run skips what they do not need
    _local(spark, "process_mining", "--log", str(src), "--output", str(tmp_path / "local"),
           "--no-model", "--no-conformance", "--no-statistics")
    _same_csvs(out, tmp_path / "local", "dfg.csv", "variants.csv")


@pytest.fixture(scope="module")
def bow_local(spark, wiki_shared, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bow") / "local"
    _local(spark, "bag_of_words", "--html-dir", str(wiki_shared), "--output", str(out))
    return out


@pytest.fixture(scope="module")
def http_pages(wiki_shared):
    """The test pages on a local HTTP server (all nodes reach 127.0.0.1)."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(wiki_shared))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_bag_of_words_from_urls(cluster: Cluster, spark, wiki_shared, http_pages, bow_local):
    """The pages fetched over HTTP by the executors (parsed with the packed environment's
    lxml, bs4 and NLTK) give the vocabulary and the sentences of the same pages read locally
    from a folder; the executors' Python workers wrote the sentences/ files (pyarrow's
    writer) to the shared storage, and the driver committed them."""
    urls = cluster.shared / "urls.txt"
    urls.write_text("".join(f"{http_pages}/{p.name}\n" for p in sorted(wiki_shared.iterdir())))
    out = cluster.shared / "bow_urls"
    _ok(cluster.submit("bag_of_words", "--urls", str(urls), "--output", str(out)))
    vocab = pd.read_csv(out / "vocabulary.csv")
    assert len(vocab) == 200
    pd.testing.assert_frame_equal(vocab, pd.read_csv(bow_local / "vocabulary.csv"))
    files = sorted((out / "sentences").iterdir())
    assert [f.name for f in files if not f.name.startswith("part-")] == ["_SUCCESS"]
    assert all(pq.read_metadata(f).created_by.startswith("parquet-cpp-arrow")
               for f in files if f.name.startswith("part-"))
    # the doc_id and url of a page differ between the two runs (http://... against a path)
    cols = ["sentence_idx", "sentence", "tokens", "vector"]
    cluster_rows = spark.read.parquet(str(out / "sentences")).select(*cols)
    local_rows = spark.read.parquet(str(bow_local / "sentences")).select(*cols)
    assert cluster_rows.count() == local_rows.count() > 500
    assert cluster_rows.exceptAll(local_rows).count() == 0


SENTENCES = [
    "Spark runs the same job on one machine or on many.",
    "Executors see only what the driver ships to them.",
    "The model folder travels as an archive and loads once per executor.",
    "Coffee shops near stations do well when crime is low.",
    "Process mining turns event logs into maps of what happened.",
    "A packed environment carries native packages such as lxml.",
]


@pytest.mark.heavy
def test_embed_with_the_bundled_model(cluster: Cluster, spark, tmp_path):
    """The model folder (the default, from the driver's environment) reaches the executors as
    an archive; the executors' environment has torch but no copy of the model."""
    src = cluster.shared / "sentences.csv"
    pd.DataFrame({"id": [f"s{i}" for i in range(len(SENTENCES))], "sentence": SENTENCES}) \
        .to_csv(src, index=False)
    flags = ["--input", str(src), "--id-col", "id"]
    out = cluster.shared / "embed"
    before = _ids(cluster)
    _ok(cluster.submit("embed", *flags, "--output", str(out), env_tar=cluster.nlp_env,
                       timeout=600))
    (app,) = [a for a in cluster.apps() if a["id"] not in before]
    assert cluster.worker_files(f"/tmp/work/{app['id']}/*/sparkfield-dir-*.zip/config.json")
    _local(spark, "embed", *flags, "--output", str(tmp_path / "local"))
    got = pd.read_parquet(out / "embeddings").sort_values("id").reset_index(drop=True)
    want = pd.read_parquet(tmp_path / "local" / "embeddings").sort_values("id") \
        .reset_index(drop=True)
    assert list(got["id"]) == list(want["id"]) and len(got) == len(SENTENCES)
    import numpy as np

    diff = np.abs(np.stack(got["embedding"]) - np.stack(want["embedding"])).max()
    assert diff <= 1e-6, diff


@pytest.mark.heavy
def test_infer_with_model_folders_only_the_driver_has(cluster: Cluster, spark, tmp_path):
    """The infer job with two small models built in the driver's /tmp, which the workers do
    not see: a classifier on ONNX Runtime with dynamic int8 (exported and checked on the
    driver, shipped inside its folder) and a Marian translator with beam search. Each reaches
    the executors as an archive, and the cluster's results equal a local run's."""
    from tests.nlp.tiny_models import build
    from tests.nlp.tiny_seq2seq import build as build_seq2seq

    src = cluster.shared / "infer_sentences.csv"
    pd.DataFrame({"id": [f"s{i}" for i in range(len(SENTENCES))], "text": SENTENCES}) \
        .to_csv(src, index=False)
    classifier = build(tmp_path / "sentiment", "ForSequenceClassification",
                       ("negative", "neutral", "positive"))
    translator = build_seq2seq(tmp_path / "marian", "marian", SENTENCES)
    runs = {
        "classify": ["--task", "classify", "--model", str(classifier), "--engine", "onnx",
                     "--quantize", "int8"],
        "generate": ["--task", "generate", "--model", str(translator), "--num-beams", "2",
                     "--max-new-tokens", "12"],
    }
    for name, task in runs.items():
        flags = [*task, "--input", str(src), "--id-col", "id"]
        out = cluster.shared / f"infer_{name}"
        before = _ids(cluster)
        _ok(cluster.submit("infer", *flags, "--output", str(out), env_tar=cluster.nlp_env,
                           timeout=600))
        (app,) = [a for a in cluster.apps() if a["id"] not in before]
        assert cluster.worker_files(
            f"/tmp/work/{app['id']}/*/sparkfield-dir-*.zip/config.json"), name
        _local(spark, "infer", *flags, "--output", str(tmp_path / f"local_{name}"))
        got = pd.read_parquet(out / "results").sort_values("id").reset_index(drop=True)
        want = pd.read_parquet(tmp_path / f"local_{name}" / "results").sort_values("id") \
            .reset_index(drop=True)
        assert list(got["id"]) == list(want["id"]) and len(got) == len(SENTENCES), name
        if name == "classify":
            assert list(got["label"]) == list(want["label"])
            assert (got["score"] - want["score"]).abs().max() <= 1e-5
        else:
            assert list(got["generated"]) == list(want["generated"])
