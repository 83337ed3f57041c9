"""A Spark Connect server started from the installed pyspark's own jars (no download), on
127.0.0.1 and a free port, for the tests that run the library over Spark Connect."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@contextmanager
def connect_server(log_dir: Path, master: str = "local[2]") -> Iterator[str]:
    """Yields the server's ``sc://`` URL; stops the server on exit. Its Python workers run
    this interpreter, so they import the library the tests import."""
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    port = _free_port()
    log = log_dir / "connect-server.log"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_REMOTE", None)
    cmd = [str(submit), "--class", SERVER_CLASS, "--master", master,
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=4",
           "--conf", "spark.sql.session.timeZone=UTC",
           "--conf", f"spark.sql.warehouse.dir={log_dir / 'warehouse'}",
           "spark-internal"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"Spark Connect server did not start (exit {proc.poll()}):"
                                   f"\n{tail}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
