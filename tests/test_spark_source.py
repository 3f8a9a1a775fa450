# Charter: the "jetstream" PySpark data source (docs/spark.md) on the session's local[2,2] Spark and a
# real nats-server: batch reads, streaming reads (limits, availableNow, checkpoint restart), batch and
# streaming writes (round trip, dedup ids). Only the last test registers the source by hand: the others
# find it through pyspark_jetstream (PySpark's auto-registration). One stream per test.
from __future__ import annotations

import datetime as dt
import json
import re
import threading
import uuid

import pytest

import jetstream_sync as jss
from conftest import wait_for
from jetstream_sync._server_os import free_ports as _free_ports
from jetstream_sync.server import NatsServer
from jetstream_sync.spark import derived_write_id
from jetstream_sync.spark.datasource import (
    READ_SCHEMA,
    JetStreamDataSource,
    SequenceRange,
    default_partitions,
    split_range,
)

pytestmark = pytest.mark.spark

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

DOCUMENTED_SCHEMA = ("struct<subject:string,data:binary,headers:map<string,array<string>>,stream:string,"
                     "seq:bigint,timestamp:timestamp,msg_id:string>")


def _new_stream(js, **fields):
    name = f"SPARK_{uuid.uuid4().hex[:10].upper()}"
    js.create_stream(name=name, subjects=[f"{name}.>"], **fields)
    return name


def _reader(spark, nats_server, stream, **options):
    reader = spark.read.format("jetstream").option("servers", nats_server.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def _seqs(df):
    return sorted(row.seq for row in df.select("seq").collect())


#: Reads run on both of the core range reader's transports: a stream that allows direct gets is read by
#: batch direct gets, any other by one ordered consumer per partition.
both_transports = pytest.mark.parametrize("direct", [False, True], ids=["consumer", "direct"])


# -- pure helpers (no SparkSession) ------------------------------------------------------------


def test_split_range_gives_exactly_the_requested_number_of_contiguous_ranges():
    assert split_range(1, 31, 3) == [(1, 11), (11, 21), (21, 31)]
    assert split_range(1, 12, 3) == [(1, 5), (5, 9), (9, 12)]
    assert split_range(10, 12, 5) == [(10, 11), (11, 12)]  # fewer sequences than partitions asked
    assert split_range(5, 5, 2) == []
    assert [hi - lo for lo, hi in split_range(1, 25_001, None)] == [8334, 8333, 8333]  # ~10k per partition
    assert split_range(1, 2, None) == [(1, 2)]


def test_the_default_partition_count_follows_the_cores_and_never_splits_below_ten_thousand():
    assert default_partitions(1_000_000, cores=2) == 2
    assert default_partitions(1_000_000, cores=16) == 16
    assert default_partitions(25_000, cores=16) == 3   # one per 10,000 sequences
    assert default_partitions(1, cores=8) == 1 and default_partitions(0, cores=8) == 1


def test_a_sequence_range_partition_survives_pickling():
    import pickle

    part = pickle.loads(pickle.dumps(SequenceRange(3, 9)))
    assert (part.start, part.end, part.direct, part.replicated) == (3, 9, False, False)
    part = pickle.loads(pickle.dumps(SequenceRange(3, 9, True, True)))
    assert (part.start, part.end, part.direct, part.replicated) == (3, 9, True, True)


# -- batch reads ---------------------------------------------------------------------------------


@both_transports
@pytest.mark.timeout(120)
def test_a_batch_read_returns_every_message_with_the_documented_schema_in_the_requested_partitions(
        spark, js, nats_server, direct):
    name = _new_stream(js, allow_direct=direct)
    for i in range(30):
        js.publish(f"{name}.{'even' if i % 2 == 0 else 'odd'}", f"m{i}".encode(),
                   headers={"k": ["a", "b"]} if i % 3 == 0 else None,
                   msg_id=f"id-{i}" if i % 5 == 0 else None)

    df = _reader(spark, nats_server, name, minPartitions=3).load()

    assert df.schema == READ_SCHEMA
    assert df.schema.simpleString() == DOCUMENTED_SCHEMA
    assert df.rdd.getNumPartitions() == 3
    rows = sorted(df.selectExpr("*", "unix_micros(timestamp) AS us").collect(), key=lambda r: r.seq)
    assert [r.seq for r in rows] == list(range(1, 31))
    stream = js.stream(name)
    for i, row in enumerate(rows):
        expected_headers = {}
        if i % 3 == 0:
            expected_headers["k"] = ["a", "b"]
        if i % 5 == 0:
            expected_headers["Nats-Msg-Id"] = [f"id-{i}"]
        assert row.subject == f"{name}.{'even' if i % 2 == 0 else 'odd'}"
        assert bytes(row.data) == f"m{i}".encode()
        assert row.headers == expected_headers
        assert row.stream == name
        assert row.msg_id == (f"id-{i}" if i % 5 == 0 else None)
        stored = stream.get_msg(row.seq).time
        assert row.us == (stored - EPOCH) // dt.timedelta(microseconds=1)
    # Without minPartitions: one partition per ~10,000 sequences, so one here.
    assert _reader(spark, nats_server, name).load().rdd.getNumPartitions() == 1


@both_transports
@pytest.mark.timeout(120)
def test_a_batch_read_honours_offsets_the_subject_filter_and_deleted_gaps(spark, js, nats_server, direct):
    name = _new_stream(js, allow_direct=direct)
    for i in range(20):  # seq 1, 3, 5, ... on .a; 2, 4, 6, ... on .b
        js.publish(f"{name}.{'a' if i % 2 == 0 else 'b'}", f"m{i + 1}".encode(), headers={"h": "v"})
    stream = js.stream(name)
    for seq in (7, 8, 9):
        stream.delete_msg(seq)
    offsets = dict(startingOffsets=json.dumps({name: 5}), endingOffsets=json.dumps({name: 15}), minPartitions=5)

    df = _reader(spark, nats_server, name, **offsets).load()
    # [5, 15) in five ranges of two; (7, 9) holds only deleted sequences and ends at once.
    assert df.rdd.getNumPartitions() == 5
    assert _seqs(df) == [5, 6, 10, 11, 12, 13, 14]

    filtered = _reader(spark, nats_server, name, subject=f"{name}.a", includeHeaders="false", **offsets).load()
    rows = sorted(filtered.collect(), key=lambda r: r.seq)
    assert [(r.seq, r.subject, bytes(r.data)) for r in rows] == [
        (5, f"{name}.a", b"m5"), (11, f"{name}.a", b"m11"), (13, f"{name}.a", b"m13")]
    assert all(r.headers is None for r in rows)

    # endingOffsets past the end and -2 (earliest) as in Spark's Kafka source.
    tail = _reader(spark, nats_server, name, startingOffsets=json.dumps({name: -2}),
                   endingOffsets=json.dumps({name: 1000})).load()
    assert _seqs(tail) == [s for s in range(1, 21) if s not in (7, 8, 9)]


@pytest.mark.timeout(120)
def test_a_batch_read_from_a_starting_timestamp_begins_at_the_first_message_stored_at_or_after_it(
        spark, js, nats_server):
    name = _new_stream(js)
    for i in range(10):
        js.publish(f"{name}.x", b"%d" % i)
    when = js.stream(name).get_msg(6).time

    df = _reader(spark, nats_server, name, startingTimestamp=when.isoformat()).load()
    assert _seqs(df) == [6, 7, 8, 9, 10]
    # Milliseconds since the epoch (Kafka's format) work too; it wins over startingOffsets.
    later = _reader(spark, nats_server, name, startingOffsets="earliest",
                    startingTimestamp=str(int(when.timestamp() * 1000) + 3_600_000)).load()
    assert _seqs(later) == []


@pytest.mark.timeout(60)
def test_a_read_with_a_user_schema_returns_only_the_chosen_documented_columns(spark, js, nats_server):
    name = _new_stream(js)
    js.publish(f"{name}.x", b"one", msg_id="a")
    df = _reader(spark, nats_server, name).schema("msg_id string, seq long").load()
    assert [tuple(r) for r in df.collect()] == [("a", 1)]
    with pytest.raises(Exception, match="has no column 'offset'"):
        _reader(spark, nats_server, name).schema("offset long").load().collect()


@both_transports
@pytest.mark.timeout(120)
def test_reads_fail_on_data_loss_by_default_and_skip_ahead_when_told(spark, js, nats_server, tmp_path, direct):
    name = _new_stream(js, max_msgs=5, allow_direct=direct)
    for i in range(10):
        js.publish(f"{name}.x", b"%d" % i)
    start = json.dumps({name: 2})  # sequences 2..5 were removed by max_msgs

    with pytest.raises(Exception, match="failOnDataLoss") as batch_err:
        _reader(spark, nats_server, name, startingOffsets=start).load().collect()
    assert "first sequence is 6" in str(batch_err.value)
    lenient = _reader(spark, nats_server, name, startingOffsets=start, failOnDataLoss="false").load()
    assert _seqs(lenient) == [6, 7, 8, 9, 10]

    query = (spark.readStream.format("jetstream").option("servers", nats_server.url).option("stream", name)
             .option("startingOffsets", start).load()
             .writeStream.format("memory").queryName(f"loss_{name.lower()}")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="failOnDataLoss"):
        query.awaitTermination(60)
    assert not query.isActive


@pytest.mark.timeout(60)
def test_bad_read_options_are_rejected_with_a_message_naming_the_option(spark, js, nats_server):
    name = _new_stream(js)
    js.publish(f"{name}.x", b"x")
    with pytest.raises(Exception, match="option stream is required"):
        spark.read.format("jetstream").option("servers", nats_server.url).load().collect()
    with pytest.raises(Exception, match="must name exactly the stream being read"):
        _reader(spark, nats_server, name, startingOffsets='{"OTHER": 3}').load().collect()
    with pytest.raises(Exception, match="not valid for a batch read"):
        _reader(spark, nats_server, name, startingOffsets="latest").load().collect()
    with pytest.raises(Exception, match="minPartitions must be an integer >= 1"):
        _reader(spark, nats_server, name, minPartitions="0").load().collect()


# -- streaming read ------------------------------------------------------------------------------


def _stream_to_parquet(spark, nats_server, name, out, checkpoint):
    return (spark.readStream.format("jetstream").option("servers", nats_server.url).option("stream", name)
            .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", 10).load()
            .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def _input_rows(query):
    return [p.numInputRows for p in query.recentProgress if p.numInputRows]


@pytest.mark.timeout(180)
def test_a_streaming_read_runs_to_completion_with_available_now_and_resumes_exactly_from_its_checkpoint(
        spark, js, nats_server, tmp_path):
    name = _new_stream(js)
    for i in range(25):
        js.publish(f"{name}.x", b"%d" % (i + 1))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    first = _stream_to_parquet(spark, nats_server, name, out, checkpoint)
    assert first.awaitTermination(90)
    assert first.exception() is None
    assert _input_rows(first) == [10, 10, 5]  # maxMessagesPerTrigger, then what availableNow found
    assert _seqs(spark.read.parquet(str(out))) == list(range(1, 26))

    for i in range(25, 32):
        js.publish(f"{name}.x", b"%d" % (i + 1))
    second = _stream_to_parquet(spark, nats_server, name, out, checkpoint)
    assert second.awaitTermination(90)
    assert second.exception() is None
    assert _input_rows(second) == [7]
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.seq for r in rows) == list(range(1, 33))  # every message once, none twice
    assert all(bytes(r.data) == b"%d" % r.seq for r in rows)


# -- writes --------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_batch_write_round_trips_data_headers_and_msg_id_and_a_repeated_msg_id_is_stored_once(
        spark, js, nats_server):
    name = _new_stream(js)
    rows = [(f"{name}.in", bytearray(b"payload-%d" % i), {"h": f"v{i}"}, f"mid-{i}") for i in range(20)]
    df = spark.createDataFrame(rows, "subject string, data binary, headers map<string,string>, msg_id string")

    for _ in range(2):
        (df.write.format("jetstream").option("servers", nats_server.url)
         .mode("append").save())

    assert js.stream(name).info().state.messages == 20
    back = sorted(_reader(spark, nats_server, name).load().collect(), key=lambda r: r.seq)
    assert sorted((bytes(r.data), r.msg_id) for r in back) == sorted((b"payload-%d" % i, f"mid-{i}") for i in range(20))
    for r in back:
        i = int(r.msg_id.split("-")[1])
        assert r.subject == f"{name}.in"
        assert r.headers == {"h": [f"v{i}"], "Nats-Msg-Id": [f"mid-{i}"]}


@pytest.mark.timeout(120)
def test_a_batch_write_without_msg_id_derives_one_from_write_id_partition_and_row(spark, js, nats_server):
    name = _new_stream(js)
    rows = [(f"text-{i}", {"multi": ["x", "y"], "n": [str(i)]}) for i in range(10)]
    df = spark.createDataFrame(rows, "data string, headers map<string,array<string>>").repartition(2)

    (df.write.format("jetstream").option("servers", nats_server.url).option("subject", f"{name}.out")
     .mode("append").save())

    back = _reader(spark, nats_server, name).load().collect()
    assert len(back) == 10
    ids = [re.fullmatch(r"([A-Za-z0-9_-]{8})-([0-9a-f]+)-([0-9a-f]+)", r.msg_id) for r in back]
    assert all(ids), [r.msg_id for r in back]
    assert len({m.group(1) for m in ids}) == 1  # one write id for the whole write
    by_partition = {}
    for m in ids:
        by_partition.setdefault(int(m.group(2), 16), []).append(int(m.group(3), 16))
    assert set(by_partition) == {0, 1}
    assert all(sorted(v) == list(range(len(v))) for v in by_partition.values())
    for r in back:
        assert r.subject == f"{name}.out"
        i = int(r.data.decode().split("-")[1])
        assert r.headers["multi"] == ["x", "y"] and r.headers["n"] == [str(i)]


@pytest.mark.timeout(60)
def test_a_write_needs_a_subject_and_a_data_column_and_cannot_overwrite(spark, js, nats_server):
    name = _new_stream(js)
    df = spark.createDataFrame([(b"x",)], "data binary")
    with pytest.raises(Exception, match="needs a subject"):
        df.write.format("jetstream").option("servers", nats_server.url).mode("append").save()
    with pytest.raises(Exception, match="needs a 'data' column"):
        (spark.createDataFrame([("s",)], "payload string").write.format("jetstream")
         .option("servers", nats_server.url).option("subject", f"{name}.x").mode("append").save())
    with pytest.raises(Exception, match="append-only"):
        (df.write.format("jetstream").option("servers", nats_server.url).option("subject", f"{name}.x")
         .mode("overwrite").save())
    assert js.stream(name).info().state.messages == 0


@pytest.mark.timeout(180)
def test_a_streaming_write_round_trips_and_derives_ids_from_query_batch_partition_and_row(
        spark, js, nats_server, tmp_path):
    source, sink = _new_stream(js), _new_stream(js)
    for i in range(10):
        js.publish(f"{source}.in", b"d%d" % i, headers={"k": ["1", "2"]} if i % 2 else None,
                   msg_id=f"src-{i}" if i < 4 else None)

    query = (spark.readStream.format("jetstream").option("servers", nats_server.url).option("stream", source)
             .option("startingOffsets", "earliest").load()
             .writeStream.format("jetstream").option("servers", nats_server.url)
             .option("subject", f"{sink}.out").option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(90)
    assert query.exception() is None

    back = sorted(_reader(spark, nats_server, sink).load().collect(), key=lambda r: bytes(r.data))
    assert [bytes(r.data) for r in back] == [b"d%d" % i for i in range(10)]
    for i, r in enumerate(back):
        assert r.subject == f"{sink}.out"
        if i < 4:
            assert r.msg_id == f"src-{i}"  # the msg_id column wins
        else:
            write_id = derived_write_id(query.id, 0)  # the query id and the first batch id
            m = re.fullmatch(rf"{re.escape(write_id)}-([0-9a-f]+)-([0-9a-f]+)", r.msg_id)
            assert m, r.msg_id
        assert r.headers.get("k") == (["1", "2"] if i % 2 else None)


# -- registration --------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_pyspark_jetstream_exposes_the_data_source_and_register_adds_it_to_a_session(spark, js, nats_server):
    import pyspark_jetstream

    assert pyspark_jetstream.DefaultSource is JetStreamDataSource
    assert JetStreamDataSource.name() == "jetstream"
    jss.spark.register(spark)
    jss.spark.register(spark)  # idempotent
    name = _new_stream(js)
    js.publish(f"{name}.x", b"x")
    assert _seqs(_reader(spark, nats_server, name).load()) == [1]


# -- nothing left behind on the server ----------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_stream_that_allows_direct_gets_is_read_without_creating_any_consumer(spark, js, nats_server):
    name = _new_stream(js, allow_direct=True)
    for i in range(40):
        js.publish(f"{name}.x", b"%d" % i, msg_id=f"id-{i}" if i % 4 == 0 else None)
    stream = js.stream(name)
    stream.delete_msg(10)

    with stream.events(types=["io.nats.jetstream.advisory.v1.consumer_action"]) as events:
        rows = sorted(_reader(spark, nats_server, name, minPartitions=4).load().collect(), key=lambda r: r.seq)
        stream.create_consumer(durable_name="after_the_read")
        first = events.next(timeout=10)
    # The server announces every consumer made on the stream, in order: the read made none.
    assert (first.consumer, first.action) == ("after_the_read", "create")
    assert [(r.seq, bytes(r.data), r.msg_id) for r in rows] == [
        (i + 1, b"%d" % i, f"id-{i}" if i % 4 == 0 else None) for i in range(40) if i + 1 != 10]


def _consumer_count(js, name):
    return js.stream_info(name).state.consumer_count


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_150_partition_read_leaves_no_consumer_and_a_second_read_succeeds(spark, js, nats_server):
    # The stream allows 100 consumers: a read that left one per partition would fail within its own
    # tasks, and the second read with "maximum consumers limit reached".
    name = _new_stream(js, max_consumers=100)
    for i in range(150):
        js.publish_async(f"{name}.x", b"%d" % i)
    js.publish_async_complete(timeout=30)
    for _ in range(2):
        df = _reader(spark, nats_server, name, minPartitions=150).load()
        assert df.rdd.getNumPartitions() == 150
        assert df.count() == 150
        assert _consumer_count(js, name) == 0


@pytest.mark.timeout(120)
def test_a_failing_read_task_and_a_starting_timestamp_lookup_leave_no_consumer(spark, js, nats_server):
    name = _new_stream(js)
    for i in range(20):
        js.publish(f"{name}.x", b"%d" % i)
    reader = _reader(spark, nats_server, name, startingOffsets=json.dumps({name: 1}), minPartitions=2)
    planned = reader.load()
    planned.rdd.getNumPartitions()  # plans 1..20 while every message is there
    js.stream(name).purge(sequence=15)  # the first partition's messages are gone: its task fails
    with pytest.raises(Exception, match="no longer stored"):
        planned.collect()
    # Spark reports the failed job before it has finished cancelling the other task, whose worker then
    # closes its consumer: wait for that, well inside the 10 s inactive threshold kept as the backstop.
    wait_for(lambda: _consumer_count(js, name) == 0, 5, what="every read task's consumer deleted")
    stamp = dt.datetime.now(dt.timezone.utc).isoformat()
    assert _reader(spark, nats_server, name, startingTimestamp=stamp).load().count() == 0
    assert _consumer_count(js, name) == 0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_hundred_micro_batch_streaming_query_with_twenty_partitions_each_runs_to_its_end(
        spark, js, nats_server, tmp_path):
    name = _new_stream(js)
    for i in range(2000):
        js.publish_async(f"{name}.x", b"%d" % (i + 1))
    js.publish_async_complete(timeout=30)
    table = f"hundred_{name.lower()}"
    query = (spark.readStream.format("jetstream").option("servers", nats_server.url).option("stream", name)
             .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", 20)
             .option("minPartitions", 20).load()
             .writeStream.format("memory").queryName(table).option("checkpointLocation", str(tmp_path))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(540)
    assert query.exception() is None
    progress = [p for p in query.recentProgress if p.numInputRows]
    assert max(p.batchId for p in progress) == 99 and all(p.numInputRows == 20 for p in progress)
    assert _seqs(spark.table(table)) == list(range(1, 2001))
    assert _consumer_count(js, name) == 0


# -- strict options and checks on the driver ------------------------------------------------------


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


@pytest.mark.timeout(120)
def test_misspelled_options_and_an_end_before_the_start_are_errors_naming_them(spark, js, nats_server):
    name = _new_stream(js)
    for i in range(30):
        js.publish(f"{name}.x", b"%d" % i)
    with pytest.raises(Exception, match=r"unknown option 'startingoffset' for a jetstream read\. "
                                        r"Did you mean 'startingOffsets'\?.*Valid options: .*endingOffsets"):
        _reader(spark, nats_server, name, startingOffset="20").load().collect()
    with pytest.raises(Exception, match=r"endingOffsets \(sequence 20, exclusive\) is before startingOffsets "
                                        r"\(sequence 25, inclusive\)"):
        _reader(spark, nats_server, name, startingOffsets=json.dumps({name: 25}),
                endingOffsets=json.dumps({name: 20})).load().collect()
    df = spark.createDataFrame([(b"x",)], "data binary")
    writes, raised = _jobs_started(spark, "typo-write", lambda: (
        df.write.format("jetstream").option("servers", nats_server.url).option("subject", f"{name}.w")
        .option("ackTimout", "5").mode("append").save()))
    assert writes == 0 and re.search(r"unknown option 'acktimout' for a jetstream write\. "
                                     r"Did you mean 'ackTimeout'\?", str(raised)), raised
    # Spark's own options still pass: a path given to load() is ignored by this source.
    assert _reader(spark, nats_server, name).load("ignored").count() == 30
    assert js.stream(name).info().state.messages == 30


@pytest.mark.timeout(180)
def test_a_write_that_cannot_succeed_fails_on_the_driver_before_any_job(spark, js, nats_server):
    name = _new_stream(js)
    # A local relation: nothing upstream runs as a job of its own (a shuffle would, before the write plans).
    df = spark.createDataFrame([(b"x",), (b"y",)], "data binary")

    def write(url, subject, **options):
        writer = df.write.format("jetstream").option("servers", url).option("subject", subject).mode("append")
        for key, value in options.items():
            writer = writer.option(key, value)
        return writer.save

    refused_port = f"nats://127.0.0.1:{_free_ports(1)[0]}"
    cases = [
        (write(nats_server.url, "nobody.captures.this"), r"no stream captures subject 'nobody\.captures\.this'"),
        (write(nats_server.url, f"{name}.*"), r"option subject '.*\.\*' is not a subject to publish to"),
        (write(refused_port, f"{name}.x", timeout="1"), r"could not connect to any server"),
    ]
    for i, (action, match) in enumerate(cases):
        jobs, raised = _jobs_started(spark, f"bad-write-{i}", action)
        assert raised is not None and re.search(match, str(raised)), (match, raised)
        assert jobs == 0, f"{match}: {jobs} Spark jobs started"
    assert js.stream(name).info().state.messages == 0


@pytest.mark.timeout(60)
def test_the_write_check_asks_again_after_one_second_when_the_stream_list_goes_unanswered(nats_server, caplog):
    # Run for every micro-batch of a streaming write: while the meta layer elects a leader such a request
    # gets no answer at all, and each try waits one second, not the client's whole timeout. The API of a
    # JetStream domain no server serves stands in for the election: this test answers its second request.
    from jetstream_sync.spark import ConnectionOptions, PartitionPublisher, drop
    from jetstream_sync.spark._writes import check_write_target

    pub = PartitionPublisher(options=ConnectionOptions.from_paths(nats_server.url), write_id="w", subject="x.y",
                             domain="electing")
    answered: list[str] = []
    done = threading.Event()
    with jss.connect(nats_server.url) as helper:
        requests = helper.subscribe("$JS.electing.API.STREAM.NAMES")
        helper.flush(timeout=10)  # the subscription is in place before the first request

        def answer_all_but_the_first() -> None:
            requests.next(timeout=20)  # the first: no answer, as during an election
            while not done.is_set():  # every later one (a busy machine may let a try run out first)
                try:
                    later = requests.next(timeout=0.25)
                except jss.TimeoutError:
                    continue
                helper.publish(later.reply, json.dumps({"type": "io.nats.jetstream.api.v1.stream_names_response",
                                                        "total": 1, "offset": 0, "limit": 1024, "streams": ["X"]}))
                answered.append(later.subject)

        responder = threading.Thread(target=answer_all_but_the_first, name="test-stream-names-responder")
        responder.start()
        try:
            with caplog.at_level("INFO", logger="jetstream_sync"):
                check_write_target(pub)  # no error: a stream captures the subject, a later answer says
        finally:
            done.set()
            responder.join(30)
            requests.stop()
            drop(pub.options)  # the check's cached connection
    assert not responder.is_alive() and answered and set(answered) == {"$JS.electing.API.STREAM.NAMES"}
    retries = [r.getMessage() for r in caplog.records if "retrying after TimeoutError" in r.getMessage()]
    assert retries and all("timed out after 1.0 s" in r for r in retries), retries


@pytest.mark.timeout(60)
def test_the_driver_check_of_a_write_refuses_wrong_credentials_without_echoing_them():
    # The check writer() runs on the driver, called directly: starting a second nats-server inside
    # the Spark session's process makes PySpark 4.3 lose track of Python data sources
    # (DATA_SOURCE_NOT_FOUND), so this case does not go through df.write.
    from jetstream_sync.spark import ConnectionOptions, PartitionPublisher
    from jetstream_sync.spark._writes import check_write_target

    with NatsServer(config_text='authorization { user: "etl", password: "right" }\n') as secured:
        pub = PartitionPublisher(options=ConnectionOptions.from_paths(secured.url, user="etl", password="wrong"),
                                 write_id="w", subject="x.y")
        with pytest.raises(jss.AuthorizationError, match="refused this connection's credentials") as info:
            check_write_target(pub)
        assert "wrong" not in str(info.value)
