# Charter: publishing DataFrames with jetstream_sync.spark.publisher /
# publish_partition. Spark tests run on the session local[2,2] SparkSession
# (two Python workers, task.maxFailures 2) against the real session nats-server;
# each uses its own stream. publish_partition is also exercised in-process.
from __future__ import annotations

import functools
import os
import pickle
import uuid
from collections import Counter, defaultdict

import pytest

import jetstream_sync as jss
import jetstream_sync.spark as jss_spark
from jetstream_sync.server import NatsServer
from jetstream_sync.spark import PublishError, client_for, drop_all, publish_partition, publisher

WORKER = "Jss-Worker"


@pytest.fixture(autouse=True)
def _drop_cached_connections():
    yield
    drop_all()


def new_stream(js, **fields):
    name = "SPARK_" + uuid.uuid4().hex[:10].upper()
    js.create_stream(name=name, subjects=[f"{name}.>"], **fields)
    return name


def read_all(js, stream, expected):
    """Every message of ``stream`` in order (checking the stream holds exactly ``expected``)."""
    assert js.stream(stream).info().state.messages == expected
    consumer = js.ordered_consumer(stream)
    msgs = []
    while len(msgs) < expected:
        batch = list(consumer.fetch(min(expected - len(msgs), 5000), expires=5))
        assert batch, f"read {len(msgs)} of {expected} messages"
        msgs.extend(batch)
    return msgs


def tasks_of(msgs):
    """(write id, partition) -> row indexes, from the generated Nats-Msg-Id values."""
    out = defaultdict(list)
    for m in msgs:
        write_id, partition, row = m.headers["Nats-Msg-Id"].rsplit("-", 2)
        out[(write_id, int(partition, 16))].append(int(row, 16))
    return out


# -- on Spark -----------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_ten_thousand_rows_land_once_and_each_python_worker_uses_one_connection(spark, nats_server, js):
    stream = new_stream(js)
    df = spark.range(10_000).selectExpr("cast(id as string) as data").repartition(4)
    for job, subject in enumerate(("a", "b")):  # two jobs, two writes
        df.foreachPartition(publisher(servers=nats_server.url, subject=f"{stream}.{subject}", worker_header=WORKER))
        assert js.stream(stream).info().state.messages == 10_000 * (job + 1)
    msgs = read_all(js, stream, 20_000)
    for subject in ("a", "b"):
        data = Counter(m.data for m in msgs if m.subject == f"{stream}.{subject}")
        assert data == Counter(str(i).encode() for i in range(10_000))
    tasks = tasks_of(msgs)
    assert len(tasks) == 8 and all(sorted(rows) == list(range(len(rows))) for rows in tasks.values())
    # Every task names the (process, connection) it published through.
    identities = {m.headers[WORKER] for m in msgs}
    pids = {identity.split(":")[0] for identity in identities}
    assert str(os.getpid()) not in pids  # published by the Python workers, not by the driver
    assert 1 <= len(pids) <= 2, identities
    assert len(identities) == len(pids), f"a worker opened more than one connection: {identities}"


def _publish_half_then_fail_on_first_attempt(pub):
    """foreachPartition body: partition 0's first attempt stores half its rows, then fails."""

    def run(rows):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        # Record in each message which attempt stored it.
        rows = [{"data": row.data, "headers": {"Attempt": str(ctx.attemptNumber())}} for row in rows]
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            pub(rows[: len(rows) // 2])
            raise RuntimeError("injected failure halfway through partition 0")
        pub(rows)

    return run


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_publish_partition_used_directly_derives_ids_a_retry_repeats_and_another_job_does_not(
        spark, nats_server, js):
    stream = new_stream(js, duplicate_window=120.0)
    direct = functools.partial(publish_partition, servers=nats_server.url, subject=f"{stream}.rows")
    df = spark.range(2_000).selectExpr("cast(id as string) as data").repartition(4)
    df.foreachPartition(_publish_half_then_fail_on_first_attempt(direct))
    msgs = read_all(js, stream, 2_000)  # the failed attempt's half was dropped as duplicates
    assert Counter(m.data for m in msgs) == Counter(str(i).encode() for i in range(2_000))
    rows = tasks_of(msgs)
    assert len({write_id for write_id, _ in rows}) == 1 and len(rows) == 4
    assert all(sorted(r) == list(range(len(r))) for r in rows.values())
    # The same rows written again by another job (another stage): new ids, so nothing is dropped.
    df.foreachPartition(direct)
    assert js.stream(stream).info().state.messages == 4_000


@pytest.mark.spark
@pytest.mark.timeout(90)
def test_a_task_retried_after_failing_halfway_is_deduplicated_to_exactly_ten_thousand(spark, nats_server, js):
    # The stream's duplicate_window (2 minutes by default) must cover the time to the retry.
    stream = new_stream(js, duplicate_window=120.0)
    pub = publisher(servers=nats_server.url, subject=f"{stream}.rows")
    spark.range(10_000).selectExpr("cast(id as string) as data").repartition(4) \
        .foreachPartition(_publish_half_then_fail_on_first_attempt(pub))
    msgs = read_all(js, stream, 10_000)
    assert Counter(m.data for m in msgs) == Counter(str(i).encode() for i in range(10_000))
    rows = tasks_of(msgs)
    assert len(rows) == 4 and all(sorted(r) == list(range(len(r))) for r in rows.values())
    # Partition 0: the failed attempt stored the first half; the retry re-sent every row,
    # and only the second half was new. Other partitions ran once.
    attempts = {}
    for m in msgs:
        _, partition, row = m.headers["Nats-Msg-Id"].rsplit("-", 2)
        attempts[(int(partition, 16), int(row, 16))] = m.headers["Attempt"]
    half = len(rows[(pub.write_id, 0)]) // 2
    assert {attempts[(0, i)] for i in range(half)} == {"0"}
    assert {attempts[(0, i)] for i in range(half, 2 * half)} == {"1"}
    assert {a for (p, _), a in attempts.items() if p != 0} == {"0"}


@pytest.mark.spark
@pytest.mark.timeout(60)
def test_subject_data_headers_and_msg_id_columns_are_honoured(spark, nats_server, js):
    from pyspark.sql.types import BinaryType, MapType, ArrayType, StringType, StructField, StructType

    stream = new_stream(js)
    schema = StructType([
        StructField("subject", StringType()), StructField("data", BinaryType()),
        StructField("headers", MapType(StringType(), ArrayType(StringType()))), StructField("msg_id", StringType()),
    ])
    rows = [
        (f"{stream}.x", b"\x00\x01", {"k": ["1", "2"]}, "id-1"),
        (f"{stream}.y", b"two", None, "id-2"),
        (f"{stream}.x", b"dup", {"k": ["3"]}, "id-1"),   # same msg_id: dropped by the server
        (f"{stream}.z", None, {"a": ["x"]}, None),        # no msg_id: a generated one
    ]
    pub = publisher(servers=nats_server.url)
    spark.createDataFrame(rows, schema).coalesce(1).foreachPartition(pub)

    schema2 = StructType([StructField("subject", StringType()), StructField("data", StringType()),
                          StructField("headers", MapType(StringType(), StringType()))])
    rows2 = [("ignored.subject", "héllo", {"h": "v"}), ("ignored.subject", "plain", None)]
    spark.createDataFrame(rows2, schema2).coalesce(1) \
        .foreachPartition(publisher(servers=nats_server.url, subject=f"{stream}.kw", deduplicate=False))

    msgs = read_all(js, stream, 5)
    got = [(m.subject, m.data, m.headers.multi() if m.headers else None) for m in msgs]
    assert got == [
        (f"{stream}.x", b"\x00\x01", {"k": ["1", "2"], "Nats-Msg-Id": ["id-1"]}),
        (f"{stream}.y", b"two", {"Nats-Msg-Id": ["id-2"]}),
        (f"{stream}.z", b"", {"a": ["x"], "Nats-Msg-Id": [f"{pub.write_id}-0-3"]}),
        (f"{stream}.kw", "héllo".encode(), {"h": ["v"]}),
        (f"{stream}.kw", b"plain", None),
    ]


@pytest.mark.spark
@pytest.mark.timeout(60)
def test_a_failed_puback_fails_the_task_and_spark_gives_up_with_a_clear_error(spark, nats_server, js):
    subject = f"NO_STREAM_{uuid.uuid4().hex[:8]}.x"  # no stream captures it
    df = spark.range(10).selectExpr("cast(id as string) as data").repartition(2)
    sc = spark.sparkContext
    group = f"failed-puback-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, "a write that no stream captures")
    try:
        with pytest.raises(Exception) as info:
            df.foreachPartition(publisher(servers=nats_server.url, subject=subject))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    text = str(info.value)
    assert "PublishError" in text and f"no stream captures subject '{subject}'" in text
    # Spark retried the failed task (spark.task.maxFailures is 2) before failing the job.
    tracker = sc.statusTracker()
    stages = [tracker.getStageInfo(s) for job in tracker.getJobIdsForGroup(group)
              for s in tracker.getJobInfo(job).stageIds]
    assert max(stage.numFailedTasks for stage in stages if stage is not None) >= 2, stages


@pytest.mark.spark
@pytest.mark.timeout(60)
def test_credential_files_on_the_driver_are_shipped_as_contents_and_never_printed(spark, tmp_path):
    from test_spark_connections import make_tls_files

    files = make_tls_files(tmp_path / "pki")
    config = (f'tls {{ cert_file: "{files["server.pem"]}", key_file: "{files["server.key"]}", '
              f'ca_file: "{files["ca.pem"]}", verify: true }}\n')
    with NatsServer(config_text=config) as server:
        pub = publisher(servers=server.url, subject="TLS.rows", tls_ca_file=files["ca.pem"],
                        tls_cert_file=files["client.pem"], tls_key_file=files["client.key"],
                        max_reconnect_attempts=1)
        secret = open(files["client.key"]).read().strip().splitlines()[1]
        for path in files.values():
            os.unlink(path)  # the executors cannot read the driver's files: they get the contents
        assert secret in pickle.dumps(pub).decode("latin-1")
        assert secret not in repr(pub) and secret not in str(pub.options)
        js = client_for(pub.options).jetstream()
        js.create_stream(name="TLS", subjects=["TLS.>"])
        spark.range(100).selectExpr("cast(id as string) as data").repartition(2).foreachPartition(pub)
        assert js.stream("TLS").info().state.messages == 100


# -- publish_partition in this process ------------------------------------------------------------


@pytest.mark.timeout(20)
def test_publish_partition_outside_spark_needs_a_partition_id_and_a_driver_write_id(nats_server, js):
    stream = new_stream(js)
    rows = [{"data": b"a"}, {"data": "b"}]
    with pytest.raises(ValueError, match="partition_id"):
        publish_partition(rows, servers=nats_server.url, subject=f"{stream}.s", write_id="w")
    with pytest.raises(ValueError, match="write_id"):
        publish_partition(rows, servers=nats_server.url, subject=f"{stream}.s", partition_id=0)
    assert js.stream(stream).info().state.messages == 0
    write_id = jss_spark.new_write_id()
    assert publish_partition(rows, servers=nats_server.url, subject=f"{stream}.s", write_id=write_id,
                             partition_id=7) == 2
    assert publish_partition(rows, servers=nats_server.url, subject=f"{stream}.s", write_id=write_id,
                             partition_id=7) == 2  # the same write again: deduplicated
    msgs = read_all(js, stream, 2)
    assert [m.headers["Nats-Msg-Id"] for m in msgs] == [f"{write_id}-7-0", f"{write_id}-7-1"]
    assert publish_partition(rows, servers=nats_server.url, subject=f"{stream}.s", partition_id=0,
                             deduplicate=False) == 2
    assert js.stream(stream).info().state.messages == 4


@pytest.mark.timeout(20)
def test_bad_rows_raise_errors_naming_the_column_and_row(nats_server, js):
    stream = new_stream(js)
    pub = publisher(servers=nats_server.url, subject=f"{stream}.s")
    with pytest.raises(TypeError, match=r"row 1 of partition 0: column 'data' must be binary or string, got int"):
        pub.publish([{"data": b"ok"}, {"data": 5}], partition_id=0)
    with pytest.raises(ValueError, match=r"no column 'data' \(columns: payload\)"):
        pub.publish([{"payload": b"x"}], partition_id=0)
    with pytest.raises(ValueError, match="subject_column"):
        publisher(servers=nats_server.url).publish([{"data": b"x"}], partition_id=0)
    with pytest.raises(TypeError, match="column 'subject' must be a non-null string"):
        publisher(servers=nats_server.url).publish([{"data": b"x", "subject": None}], partition_id=0)
    with pytest.raises(ValueError, match="subject"):
        publisher(servers=nats_server.url, subject=None, subject_column=None)


@pytest.mark.timeout(20)
def test_a_failed_puback_raises_publish_error_and_keeps_a_healthy_connection(nats_server, js):
    pub = publisher(servers=nats_server.url, subject=f"NOWHERE_{uuid.uuid4().hex[:8]}.s")
    client = client_for(pub.options)
    with pytest.raises(PublishError, match="no stream captures subject") as info:
        pub.publish([{"data": b"x"}] * 3, partition_id=2)
    assert isinstance(info.value.__cause__, jss.NoRespondersError)
    assert info.value.partition_id == 2 and info.value.row_index == 0
    assert client_for(pub.options) is client  # the connection was fine: kept


@pytest.mark.timeout(30)
def test_a_puback_timeout_drops_the_connection_so_the_retry_connects_afresh(fresh_server):
    with jss.connect(fresh_server.url) as admin:
        admin.jetstream().create_stream(name="GONE", subjects=["GONE.>"])
    pub = publisher(servers=fresh_server.url, subject="GONE.s", timeout=0.5)
    assert pub.publish([{"data": b"1"}], partition_id=0) == 1
    client = client_for(pub.options)
    fresh_server.kill()
    with pytest.raises(PublishError, match="was not stored") as info:
        pub.publish([{"data": b"2"}], partition_id=1)
    assert isinstance(info.value.__cause__, (jss.TimeoutError, jss.NotConnectedError))
    assert client.is_closed  # dropped: the next task in this worker connects again
    fresh_server.start()
    assert pub.publish([{"data": b"3"}], partition_id=2) == 1
    assert client_for(pub.options) is not client


@pytest.mark.timeout(20)
def test_an_empty_partition_publishes_nothing_and_does_not_connect():
    pub = publisher(servers="nats://127.0.0.1:1", subject="NOWHERE.s")  # nothing listens there
    assert pub.publish([], partition_id=0) == 0
    assert pub.publish(iter(()), partition_id=1) == 0


@pytest.mark.timeout(20)
def test_headers_as_an_array_of_key_value_structs_keep_repeated_keys(nats_server, js):
    from pyspark.sql import Row

    stream = new_stream(js)
    rows = [Row(data=b"x", headers=[Row(key="k", value="1"), Row(key="k", value="2"), ("b", b"bin"), ("n", None)],
                msg_id=42)]
    publisher(servers=nats_server.url, subject=f"{stream}.s").publish(rows, partition_id=0)
    (msg,) = read_all(js, stream, 1)
    assert msg.headers.multi() == {"k": ["1", "2"], "b": ["bin"], "Nats-Msg-Id": ["42"]}
