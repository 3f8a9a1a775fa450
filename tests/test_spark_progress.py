# Charter: jetstream_sync.spark.progress, the driver-side progress bar for writes to a stream. The bar
# (written to a StringIO) and the summary are checked against the stream's real state, with in-process
# publishing and with Spark (the session local[2,2] SparkSession) against the session nats-server; the
# poller thread and the block's own connection must be gone after every block, also one that raised.
from __future__ import annotations

import importlib.util
import io
import re
import threading
import uuid

import pytest

import jetstream_sync as jss
import jetstream_sync.spark as jss_spark
from jetstream_sync.spark import ConnectionOptions, drop_all, progress, publisher
from jetstream_sync.spark._progress import THREAD_NAME

from conftest import wait_for


@pytest.fixture(autouse=True)
def _drop_cached_connections():
    yield
    drop_all()


def new_stream(js, **fields):
    name = "PROG_" + uuid.uuid4().hex[:10].upper()
    js.create_stream(name=name, subjects=[f"{name}.>"], **fields)
    return name


def pollers():
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def loop_threads():
    return [t for t in threading.enumerate() if t.name.startswith("jetstream-sync-loop")]


def bar_states(text: str) -> list[str]:
    """The successive renderings of a tqdm text bar (tqdm separates them with carriage returns)."""
    return [s.strip() for s in re.split(r"[\r\n]", text) if s.strip()]


# -- in-process publishing -------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_the_bar_follows_the_stream_while_the_block_runs_and_ends_at_the_exact_total(nats_server, js):
    stream = new_stream(js)
    out = io.StringIO()
    before = len(loop_threads())
    with progress(nats_server.url, stream=stream, total=1000, file=out, interval=0.02) as p:
        assert len(pollers()) == 1 and len(loop_threads()) == before + 1  # the poller and our own connection
        for i in range(400):
            js.publish_async(f"{stream}.a", b"x")
        js.publish_async_complete()
        wait_for(lambda: p.messages == 400, timeout=5, what="the poller to see 400 messages")
        # ... and the bar to show them (tqdm redraws at most every `interval`: on a loaded machine later)
        wait_for(lambda: any(s.startswith(f"{stream}:  40%") and "400/1000" in s for s in bar_states(out.getvalue())),
                 timeout=10, what="the bar to show 400/1000")
        for i in range(600):
            js.publish_async(f"{stream}.a", b"x")
        js.publish_async_complete()
    assert pollers() == [] and len(loop_threads()) == before  # own connection closed
    states = bar_states(out.getvalue())
    assert any(s.startswith(f"{stream}:  40%") and "400/1000" in s for s in states), states
    assert states[-1].startswith(f"{stream}: 100%") and "1000/1000" in states[-1], states
    assert out.getvalue().endswith("\n")  # the bar was closed (tqdm ends a closed bar's line)
    summary = p.summary
    assert (summary.stream, summary.messages) == (stream, 1000)
    assert summary.elapsed > 0 and summary.rate == pytest.approx(1000 / summary.elapsed)
    assert str(summary).startswith(f"1000 messages stored in {stream} in ")


@pytest.mark.timeout(30)
def test_only_messages_stored_during_the_block_count_and_duplicates_do_not(nats_server, js):
    stream = new_stream(js)
    for i in range(50):
        js.publish(f"{stream}.old", b"before", msg_id=f"id-{i}")
    out = io.StringIO()
    with progress(js, stream=stream, file=out) as p:
        for i in range(100):  # ids 0..49 are duplicates of what the stream already holds
            js.publish(f"{stream}.new", b"during", msg_id=f"id-{i}")
    assert p.summary.messages == 50 == js.stream_info(stream).state.messages - 50
    assert bar_states(out.getvalue())[-1].startswith(f"{stream}: 50msg ")  # no total: a count and a rate


@pytest.mark.timeout(30)
def test_when_the_block_raises_the_error_propagates_and_the_poller_bar_and_connection_are_gone(nats_server, js):
    stream = new_stream(js)
    out = io.StringIO()
    before = len(loop_threads())
    with pytest.raises(RuntimeError, match="the job failed"):
        with progress(ConnectionOptions(nats_server.url), stream=stream, total=100, file=out, interval=0.02) as p:
            for i in range(30):
                js.publish(f"{stream}.a", b"x")
            raise RuntimeError("the job failed")
    assert pollers() == [] and len(loop_threads()) == before
    assert p.summary.messages == 30
    assert out.getvalue().endswith("\n") and "30/100" in bar_states(out.getvalue())[-1]


@pytest.mark.timeout(30)
def test_a_client_or_jetstream_context_passed_in_is_used_and_left_open(client, js):
    stream = new_stream(js)
    for given in (client, js):
        with progress(given, stream=stream, file=io.StringIO()) as p:
            js.publish(f"{stream}.a", b"x")
        assert p.summary.messages == 1
        assert not client.is_closed and pollers() == []
    assert js.stream_info(stream).state.messages == 2


@pytest.mark.timeout(30)
def test_a_missing_stream_fails_on_entering_and_leaves_nothing_running(nats_server):
    before = len(loop_threads())
    ran = False
    with pytest.raises(jss.StreamNotFoundError):
        with progress(nats_server.url, stream="NO_SUCH_STREAM", file=io.StringIO()):
            ran = True
    assert not ran and pollers() == [] and len(loop_threads()) == before


@pytest.mark.timeout(30)
def test_a_handle_serves_one_block(client, js):
    stream = new_stream(js)
    p = progress(client, stream=stream, file=io.StringIO())
    with p:
        pass
    assert p.summary.messages == 0
    with pytest.raises(RuntimeError, match="one block"):
        with p:
            pass


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kwargs, exc, match", [
    ({"stream": "A.B"}, ValueError, "stream"),
    ({"stream": 7}, TypeError, "stream"),
    ({"stream": "S", "total": -1}, ValueError, "total"),
    ({"stream": "S", "total": 1.5}, TypeError, "total"),
    ({"stream": "S", "total": True}, TypeError, "total"),
    ({"stream": "S", "interval": 0}, ValueError, "interval"),
    ({"stream": "S", "interval": "1"}, TypeError, "interval"),
    ({"stream": "S", "file": object()}, TypeError, "file"),
    ({"stream": "S", "desc": 3}, TypeError, "desc"),
    ({"stream": "S", "domain": "a b"}, ValueError, "domain"),
    ({"stream": "S", "domain": "hub", "api_prefix": "$JS.X.API"}, ValueError, "domain and api_prefix"),
    ({"connection": 42, "stream": "S"}, TypeError, "connection"),
    ({"connection": ConnectionOptions("nats://127.0.0.1:1"), "stream": "S", "user": "a"}, TypeError, "connection"),
    ({"connection": publisher("nats://127.0.0.1:1", subject="S.x"), "stream": "S", "domain": "hub"},
     TypeError, "connection"),
], ids=lambda v: repr(v) if not isinstance(v, dict) else ",".join(v))
def test_bad_arguments_raise_naming_the_argument_before_anything_starts(kwargs, exc, match):
    kwargs.setdefault("connection", "nats://127.0.0.1:1")  # nothing listens there: a connect would fail otherwise
    before = len(loop_threads())
    with pytest.raises(exc, match=match):
        progress(**kwargs)
    assert pollers() == [] and len(loop_threads()) == before


NOTEBOOK_CELL = """
import jetstream_sync as jss
import jetstream_sync.spark

with jss.connect({url!r}) as client:
    js = client.jetstream()
    js.create_stream(name={stream!r}, subjects=[{stream!r} + ".*"])
    with jss.spark.progress(client, stream={stream!r}, total=3, interval=0.05) as p:
        for i in range(3):
            js.publish({stream!r} + ".a", b"x")
    js.delete_stream({stream!r})
print("stored", p.summary.messages)
"""


@pytest.mark.timeout(90)
def test_in_a_jupyter_kernel_without_ipywidgets_the_bar_is_text_and_tqdm_does_not_warn(nats_server, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    stream = "PROG_NB_" + uuid.uuid4().hex[:8].upper()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        NOTEBOOK_CELL.format(url=nats_server.url, stream=stream))])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=60, startup_timeout=60,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    stdout = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert stdout == "stored 3\n"
    assert "IProgress" not in stderr and "Warning" not in stderr, stderr
    if importlib.util.find_spec("ipywidgets") is None:
        assert bar_states(stderr)[-1].startswith(f"{stream}: 100%") and "3/3" in bar_states(stderr)[-1], stderr


def test_the_progress_api_is_exported_from_jetstream_sync_spark():
    assert jss_spark.__all__ == sorted(jss_spark.__all__)
    for name in ("progress", "PublishProgress", "PublishSummary"):
        assert name in jss_spark.__all__ and getattr(jss_spark, name) is not None


# -- on Spark ----------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_foreach_partition_under_progress_fills_the_bar_to_the_total_with_exact_counts(spark, nats_server, js):
    stream = new_stream(js)
    df = spark.range(5000).selectExpr("cast(id as string) as data").repartition(4)
    out = io.StringIO()
    pub = publisher(servers=nats_server.url, subject=f"{stream}.a")
    with progress(pub, stream=stream, total=5000, file=out, interval=0.05) as p:
        df.foreachPartition(pub)
    assert pollers() == []
    assert p.summary.messages == 5000 == js.stream_info(stream).state.messages
    assert bar_states(out.getvalue())[-1].startswith(f"{stream}: 100%")
    assert "5000/5000" in bar_states(out.getvalue())[-1]


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_a_jetstream_data_source_write_under_progress_counts_exactly(spark, nats_server, js):
    stream = new_stream(js)
    df = spark.range(3000).selectExpr("cast(id as string) as data").repartition(3)
    out = io.StringIO()
    with progress(nats_server.url, stream=stream, total=3000, file=out, desc="write") as p:
        (df.write.format("jetstream").option("servers", nats_server.url).option("subject", f"{stream}.w")
         .mode("append").save())
    assert pollers() == []
    assert p.summary.messages == 3000 == js.stream_info(stream).state.messages
    assert bar_states(out.getvalue())[-1].startswith("write: 100%")


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_a_failing_spark_job_propagates_through_the_block_and_leaves_no_poller(spark, nats_server, js):
    stream = new_stream(js)
    df = spark.range(10).selectExpr("cast(id as string) as data").repartition(2)
    out = io.StringIO()
    with pytest.raises(Exception, match="PublishError") as failed:
        with progress(nats_server.url, stream=stream, total=10, file=out) as p:
            # No stream captures this subject: every task fails, and Spark gives up.
            df.foreachPartition(publisher(servers=nats_server.url, subject="NO_STREAM_CAPTURES.this"))
    assert not isinstance(failed.value, jss.JetStreamError)  # Spark's error, carrying the task's traceback
    assert pollers() == []
    assert p.summary.messages == 0 and out.getvalue().endswith("\n")
