"""Extraction from a real PostgreSQL server on 127.0.0.1 through Spark JDBC (Debian's
driver jar), compared with the extraction of the same tables from CSV."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sparkfield.core.conf import load_config
from sparkfield.process import run_event_log

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
JAR = "/usr/share/java/postgresql.jar"
OLIST = "process_mining/olist/sample_4000_orders"  # under SPARKFIELD_DATA
TABLES = {
    "orders": ("olist_orders_dataset.csv", """order_id TEXT PRIMARY KEY, customer_id TEXT,
        order_status TEXT, order_purchase_timestamp TIMESTAMP, order_approved_at TIMESTAMP,
        order_delivered_carrier_date TIMESTAMP, order_delivered_customer_date TIMESTAMP,
        order_estimated_delivery_date TIMESTAMP"""),
    "items": ("olist_order_items_dataset.csv", """order_id TEXT, order_item_id INTEGER,
        product_id TEXT, seller_id TEXT, shipping_limit_date TIMESTAMP, price NUMERIC(12,2),
        freight_value NUMERIC(12,2)"""),
    "payments": ("olist_order_payments_dataset.csv", """order_id TEXT,
        payment_sequential INTEGER, payment_type TEXT, payment_installments INTEGER,
        payment_value TEXT"""),
    "reviews": ("olist_order_reviews_dataset.csv", """review_id TEXT, order_id TEXT,
        review_score INTEGER, review_comment_title TEXT, review_comment_message TEXT,
        review_creation_date TIMESTAMP, review_answer_timestamp TIMESTAMP"""),
}


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    assert found, f"PostgreSQL {name} not installed: run scripts/system_deps.sh (make test does)"
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres(shared_data):
    assert os.path.isfile(JAR), f"{JAR} missing: install libpostgresql-jdbc-java"
    olist = shared_data / OLIST
    base = Path(tempfile.mkdtemp(prefix="sparkfield-pg-"))
    as_root = os.geteuid() == 0
    run_as: list[str] = []
    if as_root:  # the server refuses to run as root
        pw = pwd.getpwnam("postgres")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port, password = base / "data", _free_port(), "s3cret-for-tests"
    pwfile = base / "pw"
    pwfile.write_text(password + "\n")
    if as_root:
        os.chown(pwfile, pw.pw_uid, pw.pw_gid)
    subprocess.run([*run_as, _bin("initdb"), "-D", str(data), "-U", "sparkfield",
                    "--pwfile", str(pwfile), "--auth", "scram-sha-256", "-E", "UTF8"],
                   check=True, capture_output=True)
    subprocess.run([*run_as, _bin("pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w",
                    "-o", f"-p {port} -h 127.0.0.1 -k {base}", "start"], check=True,
                   capture_output=True)
    env = {**os.environ, "PGPASSWORD": password, "PGUSER": "sparkfield"}
    try:
        psql = [_bin("psql"), "-h", "127.0.0.1", "-p", str(port), "-v", "ON_ERROR_STOP=1"]
        subprocess.run([*psql, "-d", "postgres", "-c", "CREATE DATABASE shop"], env=env,
                       check=True, capture_output=True)
        for table, (csv, cols) in TABLES.items():
            sql = (f"CREATE TABLE {table} ({cols});\n"
                   f"\\copy {table} FROM '{olist / csv}' WITH (FORMAT csv, HEADER true)\n")
            subprocess.run([*psql, "-d", "shop"], input=sql, text=True, env=env, check=True,
                           capture_output=True)
        yield {"url": f"jdbc:postgresql://127.0.0.1:{port}/shop",
               "env": {**env, "SPARKFIELD_DATA": str(shared_data)}}
    finally:
        subprocess.run([*run_as, _bin("pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _events(path: Path) -> pd.DataFrame:
    df = pd.read_parquet(path)
    df["attributes"] = df["attributes"].map(
        lambda m: tuple(sorted(dict(m).items())) if m is not None else None)
    df["attrs_key"] = df["attributes"].astype(str)
    return df.sort_values(["case_id", "timestamp", "activity", "attrs_key"]).drop(
        columns=["row_order", "attrs_key"]).reset_index(drop=True)


def test_jdbc_extraction_equals_csv_extraction(spark, repo_root, tmp_path, postgres):
    """Every table read whole over JDBC (reviews in three partitions); both runs keep the same
    seeded fifth of the orders (cases are drawn by a hash of their id, whatever the source)."""
    mapping = yaml.safe_load((repo_root / "conf/event_logs/olist_orders.yaml").read_text())
    jdbc = {"format": "jdbc", "url": postgres["url"], "user_env": "PGUSER",
            "password_env": "PGPASSWORD"}
    mapping["sources"] = {
        "orders": {**jdbc, "table": "orders"},
        "items": {**jdbc, "table": "items"},
        "payments": {**jdbc, "table": "payments"},
        "reviews": {**jdbc, "table": "reviews", "partition_column": "review_score",
                    "lower_bound": 1, "upper_bound": 6, "num_partitions": 3},
    }
    pg_mapping = tmp_path / "olist_pg.yaml"
    pg_mapping.write_text(yaml.safe_dump(mapping))
    out = tmp_path / "pg"
    res = subprocess.run(
        [str(ROOT / "submit.sh"), "event_log", "--mapping", str(pg_mapping), "--output",
         str(out), "--sample", "0.2", "--conf", f"spark.jars={JAR}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**postgres["env"], "SPARKFIELD_PYTHON": sys.executable})
    log = res.stdout + res.stderr
    errors = [line for line in log.splitlines() if "Exception" in line or "rror" in line]
    assert res.returncode == 0, "\n".join(errors)[:3000]

    cfg = load_config("event_log", "local", repo_root / "conf", {"job": {
        "mapping": str(repo_root / "conf/event_logs/olist_orders.yaml"),
        "output": str(tmp_path / "csv"), "render_map": False, "sample": 0.2}})
    csv_res = run_event_log(spark, cfg)
    pg, csv = _events(out / "events"), _events(tmp_path / "csv" / "events")
    assert len(pg) == csv_res.report.outputs["events"] > 4000
    pd.testing.assert_frame_equal(pg, csv)


def test_wrong_password_fails_with_the_server_message(postgres, tmp_path):
    """The driver jar is on the classpath (as in the extraction test), so the only way to fail
    is the server refusing the password."""
    doc = {"sources": {"o": {"format": "jdbc", "url": postgres["url"], "table": "orders",
                             "user_env": "SF_PG_USER", "password_env": "SF_PG_PW"}},
           "activities": [{"name": "x", "source": "o", "case_id": "order_id",
                           "timestamp": "order_purchase_timestamp"}]}
    mapping = tmp_path / "wrong_pw.yaml"
    mapping.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    res = subprocess.run(
        [str(ROOT / "submit.sh"), "event_log", "--mapping", str(mapping), "--output", str(out),
         "--conf", f"spark.jars={JAR}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**postgres["env"], "SF_PG_USER": "sparkfield", "SF_PG_PW": "wrong",
             "SPARKFIELD_PYTHON": sys.executable})
    log = res.stdout + res.stderr
    assert res.returncode != 0
    assert 'password authentication failed for user "sparkfield"' in log, log[-3000:]
    assert "ClassNotFoundException" not in log and "No suitable driver" not in log
    assert not out.exists()
