# Charter: the consumer mode of the "jetstream" streaming source (docs/spark.md, "Work-queue and interest
# streams") on the session's local[2,2] Spark and a real nats-server: a work-queue stream drained exactly
# once, also across a driver killed between the batch's commit and its acks (the first run in a process of
# its own, tests/_spark_consumer_job.py; the restart on the session), two queries sharing one durable, an
# interest stream without direct gets, and the replay mode's refusal of a work-queue stream.
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import wait_for

pytestmark = pytest.mark.spark

HERE = Path(__file__).parent


def test_sequence_runs_are_compact_and_split_into_partitions_of_about_equal_size():
    from jetstream_sync.spark._consumer_reads import from_runs, split_runs, to_runs

    assert to_runs([5, 3, 4, 9, 10, 12, 4]) == [[3, 6], [9, 11], [12, 13]]
    assert from_runs([[3, 6], [9, 11]]) == {3, 4, 5, 9, 10}
    assert split_runs([[1, 11], [20, 22]], 3) == [[(1, 5)], [(5, 9)], [(9, 11), (20, 22)]]
    assert split_runs([[1, 3]], 5) == [[(1, 2)], [(2, 3)]]  # never more partitions than sequences
    assert split_runs([], 4) == []


def _new_stream(js, **fields):
    name = f"WQ_{uuid.uuid4().hex[:10].upper()}"
    js.create_stream(name=name, subjects=[f"{name}.>"], **fields)
    return name


def _jobs(js, subject, n):
    for i in range(n):
        js.publish_async(subject, b"%d" % i)
    js.publish_async_complete(timeout=120.0)


def _consume(spark, url, stream, durable, table, checkpoint, **options):
    reader = (spark.readStream.format("jetstream").option("servers", url).option("stream", stream)
              .option("mode", "consumer").option("durable", durable))
    for key, value in options.items():
        reader = reader.option(key, value)
    return (reader.load().select("seq", "data").writeStream.format("memory").queryName(table)
            .option("checkpointLocation", str(checkpoint)).start())


def _rows(spark, table):
    return [(r.seq, bytes(r.data)) for r in spark.sql(f"SELECT seq, data FROM {table}").collect()]


def _drained(js, stream, queries, what):
    def empty():
        for q in queries:
            if q.exception() is not None:
                raise AssertionError(f"{what}: the query failed: {q.exception()}")
        return js.stream_info(stream).state.messages == 0
    return empty


@pytest.mark.timeout(300)
def test_a_work_queue_of_100000_jobs_is_drained_into_the_sink_each_job_exactly_once(spark, js, nats_server,
                                                                                       tmp_path):
    stream = _new_stream(js, retention="workqueue", allow_direct=True)
    _jobs(js, f"{stream}.job", 100_000)

    query = _consume(spark, nats_server.url, stream, "etl", "wq_all", tmp_path / "ckpt",
                     maxMessagesPerTrigger=25_000)
    try:
        wait_for(_drained(js, stream, [query], "drain"), timeout=240, interval=0.5, what="the work queue to empty")
        wait_for(lambda: spark.sql("SELECT count(*) AS n FROM wq_all").first().n >= 100_000, timeout=60,
                 interval=0.5, what="the sink to hold every job")
    finally:
        query.stop()
    rows = _rows(spark, "wq_all")
    assert len(rows) == 100_000
    assert sorted(rows) == [(i + 1, b"%d" % i) for i in range(100_000)]
    info = js.consumer_info(stream, "etl")
    assert info.num_ack_pending == 0 and info.num_pending == 0
    assert info.config.headers_only  # the driver never pulled a payload


@pytest.mark.timeout(300)
def test_two_queries_on_one_durable_split_the_jobs_without_overlap(spark, js, nats_server, tmp_path):
    stream = _new_stream(js, retention="workqueue", allow_direct=True)
    _jobs(js, f"{stream}.job", 20_000)

    queries = [_consume(spark, nats_server.url, stream, "shared", f"wq_split_{i}", tmp_path / f"ckpt{i}",
                        maxMessagesPerTrigger=500) for i in range(2)]
    try:
        wait_for(_drained(js, stream, queries, "split"), timeout=240, interval=0.5, what="the work queue to empty")
        wait_for(lambda: sum(spark.sql(f"SELECT count(*) AS n FROM wq_split_{i}").first().n for i in range(2))
                 >= 20_000, timeout=60, interval=0.5, what="the sinks to hold every job")
    finally:
        for q in queries:
            q.stop()
    first, second = ({seq for seq, _ in _rows(spark, f"wq_split_{i}")} for i in range(2))
    assert first and second, "one query took every job"
    assert not first & second
    assert sorted(first | second) == list(range(1, 20_001))
    assert len(_rows(spark, "wq_split_0")) + len(_rows(spark, "wq_split_1")) == 20_000


@pytest.mark.timeout(300)
def test_an_interest_stream_without_direct_gets_is_read_once_and_kept_for_its_other_consumers(
        spark, js, nats_server, tmp_path):
    stream = _new_stream(js, retention="interest")
    js.create_consumer(stream, durable_name="audit")  # another interest: it has acked nothing
    _jobs(js, f"{stream}.job", 2_000)

    query = _consume(spark, nats_server.url, stream, "etl", "interest_all", tmp_path / "ckpt",
                     maxMessagesPerTrigger=700)
    try:
        wait_for(lambda: spark.sql("SELECT count(*) AS n FROM interest_all").first().n >= 2_000, timeout=240,
                 interval=0.5, what="the sink to hold every message")
        wait_for(lambda: js.consumer_info(stream, "etl").num_ack_pending == 0, timeout=60, interval=0.5,
                 what="the durable to ack every message")
    finally:
        query.stop()
    assert sorted(_rows(spark, "interest_all")) == [(i + 1, b"%d" % i) for i in range(2_000)]
    assert js.consumer_info(stream, "etl").num_pending == 0
    # Acked by this durable, still wanted by the other one: kept.
    assert js.stream_info(stream).state.messages == 2_000
    js.delete_consumer(stream, "audit")
    wait_for(lambda: js.stream_info(stream).state.messages == 0, timeout=30, what="the stream to empty")


def _jobs_started(spark, group, action):
    """Run ``action`` under a job group; return how many Spark jobs it started (and what it raised)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        try:
            action()
            raised = None
        except Exception as exc:  # the driver-side error Spark wraps
            raised = exc
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group)), raised


@pytest.mark.timeout(180)
def test_the_replay_mode_refuses_a_work_queue_stream_on_the_driver_naming_the_consumer_mode(
        spark, js, nats_server, tmp_path):
    stream = _new_stream(js, retention="workqueue")
    _jobs(js, f"{stream}.job", 10)
    reader = spark.read.format("jetstream").option("servers", nats_server.url).option("stream", stream)

    jobs, raised = _jobs_started(spark, "wq-refused", lambda: reader.load().collect())
    assert jobs == 0
    assert raised is not None and "work-queue stream" in str(raised) and "'mode', 'consumer'" in str(raised)

    query = (spark.readStream.format("jetstream").option("servers", nats_server.url).option("stream", stream)
             .load().writeStream.format("memory").queryName("wq_refused")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    with pytest.raises(Exception, match=r"work-queue stream.*'mode', 'consumer'"):
        query.awaitTermination(60)
    # Nothing was taken off the queue, and no consumer was made.
    assert js.stream_info(stream).state.messages == 10
    assert js.stream_info(stream).state.consumer_count == 0


@pytest.mark.timeout(120)
def test_consumer_mode_options_are_checked_on_the_driver(spark, js, nats_server, tmp_path):
    stream = _new_stream(js, retention="workqueue", allow_direct=True)
    js.create_consumer(stream, durable_name="full", headers_only=False)

    def start(**options):
        reader = spark.readStream.format("jetstream").option("servers", nats_server.url).option("stream", stream)
        for key, value in options.items():
            reader = reader.option(key, value)
        query = (reader.load().writeStream.format("memory").queryName(f"opts_{uuid.uuid4().hex[:8]}")
                 .option("checkpointLocation", str(tmp_path / uuid.uuid4().hex)).start())
        try:
            query.awaitTermination(60)
        finally:
            query.stop()

    with pytest.raises(Exception, match="option durable is required with option mode='consumer'"):
        start(mode="consumer")
    with pytest.raises(Exception, match="option mode must be 'replay'.*or 'consumer'"):
        start(mode="queue", durable="x")
    with pytest.raises(Exception, match="option startingOffsets does not apply with mode='consumer'"):
        start(mode="consumer", durable="x", startingOffsets="earliest")
    with pytest.raises(Exception, match=r"option durable applies only with \.option\('mode', 'consumer'\)"):
        start(durable="x")
    with pytest.raises(Exception, match="durable consumer 'full'.*headers_only false"):
        start(mode="consumer", durable="full")
    with pytest.raises(Exception, match="mode='consumer' is for streaming reads"):
        spark.read.format("jetstream").option("servers", nats_server.url).option("stream", stream) \
            .option("mode", "consumer").option("durable", "x").load().collect()


# -- a driver killed between the batch's commit and its acks ------------------------------------


@pytest.mark.timeout(600)
def test_a_driver_killed_after_a_batch_is_committed_but_before_its_acks_restarts_without_duplicates(
        spark, js, nats_server, tmp_path):
    stream = _new_stream(js, retention="workqueue", allow_direct=True)
    _jobs(js, f"{stream}.job", 100_000)
    checkpoint, marker = tmp_path / "ckpt", tmp_path / "crashed"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with open(tmp_path / "job.log", "wb") as out:
        job = subprocess.Popen([sys.executable, str(HERE / "_spark_consumer_job.py"), nats_server.url, stream,
                                str(checkpoint), str(tmp_path / "out"), str(marker)],
                               stdout=out, stderr=subprocess.STDOUT, env=env, cwd=HERE, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():  # the job's driver is about to ack its third batch
            assert job.poll() is None, (tmp_path / "job.log").read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, "the job never reached its crash point"
            time.sleep(0.2)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
        job.wait(30)
    taken = int(marker.read_text())
    # The batch was written to the sink (its rows are in the file sink's log) and not acked.
    written = {r.seq for r in spark.read.parquet(str(tmp_path / "out")).select("seq").collect()}
    assert taken > 0 and len(written) >= taken
    assert js.consumer_info(stream, "etl").num_ack_pending >= taken

    query = (spark.readStream.format("jetstream").option("servers", nats_server.url).option("stream", stream)
             .option("mode", "consumer").option("durable", "etl").option("maxMessagesPerTrigger", 20_000)
             .load().select("seq", "data").writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(checkpoint)).start())
    try:
        wait_for(_drained(js, stream, [query], "restart"), timeout=300, interval=0.5,
                 what="the work queue to empty after the restart")
        wait_for(lambda: js.consumer_info(stream, "etl").num_ack_pending == 0, timeout=60, interval=0.5,
                 what="every delivery to be acked")
    finally:
        query.stop()
    rows = [(r.seq, bytes(r.data)) for r in spark.read.parquet(str(tmp_path / "out")).collect()]
    assert len(rows) == 100_000
    assert sorted(rows) == [(i + 1, b"%d" % i) for i in range(100_000)]
