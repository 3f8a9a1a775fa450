# Charter: the data source and the publisher beyond local[*]: a Spark standalone cluster (a master and two
# workers from the pyspark package, on loopback) running a batch read, a batch write, a foreachPartition
# publish, an availableNow streaming query and a consumer-mode one draining a work queue, and a Spark
# Connect server (the pyspark package's) taking a read, a write and a publish from a remote client
# (tests/_spark_cluster_job.py, in a process of its own).
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jetstream_sync._server_os import free_ports as _free_ports

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HERE = Path(__file__).parent


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class _Daemon:
    """A Spark daemon (master or worker) in a process group of its own, its output in a file."""

    def __init__(self, args: list[str], log: Path, env: dict) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([str(_spark_home() / "bin" / "spark-class"), *args], stdout=out,
                                         stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"{self.log.name}: no {text!r} within {timeout} s:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def _run_job(target: str, nats_url: str) -> dict:
    """Run tests/_spark_cluster_job.py against ``target`` (spark:// or sc://); return the facts it printed."""
    job = subprocess.run([sys.executable, str(HERE / "_spark_cluster_job.py"), target, nats_url],
                         capture_output=True, text=True, timeout=540, cwd=HERE)
    lines = [line for line in job.stdout.splitlines() if line.startswith("FACTS ")]
    assert job.returncode == 0 and lines, f"the job failed:\n{job.stdout[-2000:]}\n{job.stderr[-4000:]}"
    return json.loads(lines[-1][len("FACTS "):])


@pytest.fixture
def standalone_cluster(tmp_path):
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_HOME=str(_spark_home()), SPARK_WORKER_DIR=str(tmp_path / "work"))
    port, ui = _free_ports(2)
    daemons = []
    try:
        master = _Daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                          "--webui-port", str(ui)], tmp_path / "master.log", env)
        daemons.append(master)
        master.wait_for("I have been elected leader", 60)
        url = f"spark://127.0.0.1:{port}"
        for i in range(2):
            worker = _Daemon(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                              "--memory", "1g", "--webui-port", "0", "--work-dir", str(tmp_path / f"work{i}")],
                             tmp_path / f"worker{i}.log", env)
            daemons.append(worker)
        for worker in daemons[1:]:
            worker.wait_for("Successfully registered with master", 60)
        yield url
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


@pytest.mark.timeout(600)
def test_reads_writes_a_publish_and_a_streaming_query_on_a_standalone_cluster(standalone_cluster, fresh_server):
    facts = _run_job(standalone_cluster, fresh_server.url)
    assert facts["read_partitions"] == 4 and facts["read"] == [2000, 2000]
    assert facts["written"] == 2000 and facts["published"] == 2000 and facts["streamed"] == 2000
    assert facts["stream_error"] is None
    # Python workers on both executors published, each through exactly one connection of its own.
    assert len(facts["connections_per_worker_pid"]) >= 2 and set(facts["connections_per_worker_pid"]) == {1}
    assert facts["consumers_left"] == {"IN": 0, "OUT": 0, "PUB": 0, "COPY": 0}
    # A consumer-mode query drained a work queue: none left, each job once in the sink.
    assert facts["queue_error"] is None and facts["queue"] == [0, 2000, 2000]


@pytest.fixture
def connect_server(tmp_path):
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_HOME=str(_spark_home()))
    (port,) = _free_ports(1)
    log = tmp_path / "connect.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-submit"), "--master", "local[2]",
             "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
             "spark-internal"], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    daemon = _Daemon.__new__(_Daemon)
    daemon.log, daemon.proc = log, proc
    try:
        daemon.wait_for("Spark Connect server started", 120)
        yield f"sc://127.0.0.1:{port}"
    finally:
        daemon.stop()


@pytest.mark.timeout(600)
def test_a_read_a_write_and_a_publish_through_spark_connect(connect_server, fresh_server):
    facts = _run_job(connect_server, fresh_server.url)
    assert facts == {"read": [2000, 2000], "written": 2000, "published": 2000, "consumers_left": {"IN": 0, "OUT": 0}}
