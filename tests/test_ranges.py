# Charter: stream ranges read into Arrow and pandas (stream.iter_batches / to_arrow / to_pandas) against
# a real nats-server, on a stream that allows direct gets (batch direct gets) and on one that does not
# (one ordered consumer): exact rows checked against what the server stored (subject, payload, headers,
# sequence, nanosecond time, message id), ranges by sequence (end exclusive) and by time, subject
# filters, deleted messages skipped, batch sizes, decoding, the argument checks made before anything is
# sent, nothing left on the server, ImportError naming the extra, and a 1,000,000-message range read in
# bounded memory.
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import jetstream_sync as jss
from jetstream_sync import _jsapi, ranges
from jetstream_sync._time import nanos_from_parts, parse_time

from conftest import assert_sends_nothing, publish_n

SCHEMA = pa.schema([
    pa.field("subject", pa.string()),
    pa.field("data", pa.binary()),
    pa.field("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
    pa.field("stream", pa.string()),
    pa.field("seq", pa.int64()),
    pa.field("timestamp", pa.timestamp("ns", tz="UTC")),
    pa.field("msg_id", pa.string()),
])


@pytest.fixture(params=["direct", "consumer"])
def ranged(request, js, name, subj):
    """A file stream on ``<subj>.>``, with direct gets (read by batch direct gets) or without (read by
    an ordered consumer)."""
    return js.create_stream(name=name, subjects=[f"{subj}.>"], allow_direct=request.param == "direct")


def stored(stream: jss.Stream, seqs) -> list[dict]:
    """What the server stored at ``seqs``, as rows of the read schema (one message get each)."""
    rows = []
    for seq in seqs:
        m = stream.get_msg(seq)
        hdrs = m.headers.multi() if m.headers else {}
        rows.append({"subject": m.subject, "data": m.data, "headers": list(hdrs.items()), "stream": stream.name,
                     "seq": m.seq, "timestamp": m.time.timestamp_ns(),
                     "msg_id": m.headers.get("Nats-Msg-Id") if m.headers else None})
    return rows


def rows(table: pa.Table) -> list[dict]:
    out = table.to_pylist()
    for row, ts in zip(out, table.column("timestamp").cast(pa.int64()).to_pylist()):
        row["timestamp"] = ts
    return out


def fill(js: jss.JetStream, subj: str, n: int = 30) -> None:
    """``n`` messages on <subj>.a / <subj>.b alternately; the 4th with headers (one repeated) and a msg id."""
    for i in range(n):
        if i == 3:
            js.publish(f"{subj}.a", b"m3", headers={"k": ["v1", "v2"], "x": "y"}, msg_id="id-3")
        else:
            js.publish(f"{subj}.{'a' if i % 2 else 'b'}", f"m{i}".encode())


def test_a_whole_stream_reads_as_the_server_stored_it(ranged, js, subj):
    fill(js, subj)
    table = ranged.to_arrow()
    assert table.schema == SCHEMA
    assert rows(table) == stored(ranged, range(1, 31))
    assert table.column("msg_id").to_pylist()[3] == "id-3"
    assert dict(table.column("headers")[3].as_py())["k"] == ["v1", "v2"]


def test_a_sequence_range_is_start_inclusive_and_end_exclusive(ranged, js, subj):
    fill(js, subj)
    assert ranged.to_arrow(5, 9).column("seq").to_pylist() == [5, 6, 7, 8]
    assert ranged.to_arrow(28).column("seq").to_pylist() == [28, 29, 30]
    assert ranged.to_arrow(end=3).column("seq").to_pylist() == [1, 2]
    assert ranged.to_arrow(25, 1000).column("seq").to_pylist() == [25, 26, 27, 28, 29, 30]


def test_an_open_end_is_the_last_sequence_when_the_call_was_made(ranged, js, subj):
    fill(js, subj, 10)
    batches = ranged.iter_batches(batch_size=4)
    publish_n(js, f"{subj}.a", 5)  # stored after the call: not read
    assert [b.num_rows for b in batches] == [4, 4, 2]


def test_an_empty_range_is_an_empty_table_with_the_columns(ranged, js, subj):
    assert ranged.to_arrow().schema == SCHEMA and ranged.to_arrow().num_rows == 0
    fill(js, subj, 5)
    assert ranged.to_arrow(6).num_rows == 0
    assert ranged.to_arrow(3, 3).num_rows == 0
    assert ranged.to_arrow(subject=f"{subj}.none").num_rows == 0
    assert list(ranged.iter_batches(6)) == []


def test_deleted_messages_and_gaps_are_skipped(ranged, js, subj):
    fill(js, subj)
    for seq in (1, 7, 8, 20, 30):
        ranged.delete_msg(seq)
    assert ranged.to_arrow().column("seq").to_pylist() == [s for s in range(1, 31) if s not in (1, 7, 8, 20, 30)]
    assert ranged.to_arrow(7, 9).num_rows == 0
    assert rows(ranged.to_arrow(6, 11)) == stored(ranged, [6, 9, 10])


def test_a_subject_filter_keeps_its_subjects_wildcards_too(ranged, js, subj):
    fill(js, subj)
    assert ranged.to_arrow(subject=f"{subj}.a").column("seq").to_pylist() == list(range(2, 31, 2))
    assert ranged.to_arrow(10, 20, subject=f"{subj}.b").column("seq").to_pylist() == [11, 13, 15, 17, 19]
    assert ranged.to_arrow(subject=f"{subj}.*").num_rows == 30


def test_a_time_range_is_start_inclusive_and_end_exclusive_to_the_nanosecond(ranged, js, subj):
    fill(js, subj)
    t10 = ranged.get_msg(10).time
    t20 = ranged.get_msg(20).time
    assert ranged.to_arrow(start_time=t10).column("seq").to_pylist() == list(range(10, 31))
    assert ranged.to_arrow(end_time=t20).column("seq").to_pylist() == list(range(1, 20))
    assert ranged.to_arrow(start_time=t10, end_time=t20).column("seq").to_pylist() == list(range(10, 20))
    assert ranged.to_arrow(5, end_time=t10).column("seq").to_pylist() == [5, 6, 7, 8, 9]
    assert ranged.to_arrow(start_time=t10, end_time=t20, subject=f"{subj}.a").column("seq").to_pylist() == \
        [10, 12, 14, 16, 18]


def test_batches_hold_batch_size_rows_and_the_last_the_rest(ranged, js, subj):
    fill(js, subj)
    batches = list(ranged.iter_batches(batch_size=7))
    assert [b.num_rows for b in batches] == [7, 7, 7, 7, 2]
    assert all(b.schema == SCHEMA for b in batches)
    assert pa.Table.from_batches(batches).column("seq").to_pylist() == list(range(1, 31))


def test_a_range_longer_than_one_direct_request_is_read_whole_and_cut_at_its_end(js, name, subj, monkeypatch):
    monkeypatch.setattr(_jsapi, "BATCH_PER_REQUEST", 40)
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"], allow_direct=True)
    publish_n(js, f"{subj}.a", 500)
    assert stream.to_arrow(7, 333).column("seq").to_pylist() == list(range(7, 333))
    assert stream.to_arrow(batch_size=64).num_rows == 500


def test_a_consumer_read_pulls_by_the_sizes_it_sees_and_reads_large_and_small_messages_whole(js, name, subj,
                                                                                            monkeypatch):
    monkeypatch.setattr(ranges, "_PULL_BYTES", 64 * 1024)  # 64 KiB pulls: a few large messages each
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"])
    big = [bytes([i]) * 20_000 for i in range(30)]
    for data in big:
        js.publish(f"{subj}.big", data)
    publish_n(js, f"{subj}.small", 2500)  # the pulls grow again: the first 1,000, then 10,000 at most
    table = stream.to_arrow()
    assert table.column("seq").to_pylist() == list(range(1, 2531))
    assert table.column("data").to_pylist()[:30] == big
    assert stream.to_arrow(25, 40).column("seq").to_pylist() == list(range(25, 40))


def lagging_replica(monkeypatch, stored_up_to):
    """Make every read of a range end after sequence ``stored_up_to(n)`` on its n-th try, as a read served
    by a replica that has stored only that far; return the start sequence of each try."""
    real = ranges._ordered_runs
    tries: list[int] = []

    def runs(js, stream, spec, start, end, timeout):
        tries.append(start)
        limit = stored_up_to(len(tries))
        for run in real(js, stream, spec, start, end, timeout):
            keep = sum(1 for seq in run.seqs if seq <= limit)
            if keep < len(run.seqs):
                if keep:
                    yield ranges._slice(run, 0, keep)
                return
            yield run

    monkeypatch.setattr(ranges, "_ordered_runs", runs)
    return tries


def seqs_read(js, stream, start, end):
    spec = ranges.RangeSpec(batch_size=1000)
    batches = ranges.read_batches(js, stream.name, spec, start=start, end=end, direct=False, replicated=True,
                                  timeout=jss.DEFAULT)
    return [seq for batch in batches for seq in batch.column("seq").to_pylist()]


def test_a_replicated_read_served_by_a_replica_behind_goes_on_until_it_has_the_whole_range(js, name, subj,
                                                                                           monkeypatch):
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"])
    publish_n(js, f"{subj}.a", 100)
    tries = lagging_replica(monkeypatch, lambda n: 60 if n <= 5 else 10**9)  # caught up on the 6th try
    assert seqs_read(js, stream, 1, 101) == list(range(1, 101))  # not 1..60: the leader says 61 is stored
    assert tries == [1, 61, 61, 61, 61, 61]


def test_a_replicated_read_whose_range_ends_in_deleted_messages_ends_at_once(js, name, subj, monkeypatch):
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"])
    publish_n(js, f"{subj}.a", 100)
    for seq in range(91, 101):
        stream.delete_msg(seq)
    tries = lagging_replica(monkeypatch, lambda n: 10**9)
    assert seqs_read(js, stream, 1, 101) == list(range(1, 91))
    assert tries == [1, 91, 91]  # two quick retries, then the leader: nothing stored from 91 on


def test_a_replicated_read_whose_replicas_never_store_the_rest_fails_and_skips_nothing(js, name, subj,
                                                                                      monkeypatch):
    monkeypatch.setattr(ranges, "_REPLICA_SETTLE", 1.0)
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"])
    publish_n(js, f"{subj}.a", 100)
    lagging_replica(monkeypatch, lambda n: 60)
    with pytest.raises(jss.TimeoutError, match="sequence 61 is stored .* have not stored it yet"):
        seqs_read(js, stream, 1, 101)


def test_utf8_decoding_makes_data_text_and_names_a_payload_that_is_not(ranged, js, subj):
    fill(js, subj, 3)
    table = ranged.to_arrow(decode="utf-8")
    assert table.schema.field("data").type == pa.string()
    assert table.column("data").to_pylist() == ["m0", "m1", "m2"]
    assert ranged.to_arrow(9, decode="utf-8").schema.field("data").type == pa.string()  # empty too
    js.publish(f"{subj}.a", b"\xff\xfe")
    with pytest.raises(ValueError, match="sequence 4 is not UTF-8"):
        ranged.to_arrow(decode="utf-8")


def test_json_decoding_adds_the_top_level_keys_as_columns(ranged, js, subj):
    for obj in ({"n": 1, "name": "a"}, {"n": 2, "tags": ["x"]}, {"n": 3.5, "subject": "own"}, {"n": 4, "v": "s"},
                {"v": 5}):
        js.publish(f"{subj}.a", json.dumps(obj).encode())
    table = ranged.to_arrow(decode="json")
    assert table.column("n").to_pylist() == [1, 2, 3.5, 4, None]
    assert table.column("name").to_pylist() == ["a", None, None, None, None]
    assert table.column("tags").to_pylist() == [None, ["x"], None, None, None]
    assert table.column("data.subject").to_pylist() == [None, None, "own", None, None]  # a key named like a column
    assert table.column("subject").to_pylist() == [f"{subj}.a"] * 5
    assert table.column("v").to_pylist() == [None, None, None, '"s"', "5"]  # mixed kinds: each value's JSON text
    js.publish(f"{subj}.a", b"[1, 2]")
    with pytest.raises(ValueError, match="sequence 6 is a JSON list, not an object"):
        ranged.to_arrow(decode="json")
    with pytest.raises(ValueError, match="sequence 6 is not JSON|sequence 6 is a JSON list"):
        ranged.to_arrow(6, decode="json")


def test_to_pandas_gives_nanosecond_utc_times_and_headers_as_dicts(ranged, js, subj):
    fill(js, subj, 5)
    df = ranged.to_pandas()
    assert str(df["timestamp"].dtype) == "datetime64[ns, UTC]"
    assert df["seq"].tolist() == [1, 2, 3, 4, 5]
    assert [ts.value for ts in df["timestamp"]] == [ranged.get_msg(s).time.timestamp_ns() for s in range(1, 6)]
    assert {k: list(v) for k, v in df["headers"][3].items()} == {"k": ["v1", "v2"], "x": ["y"], "Nats-Msg-Id": ["id-3"]}
    assert df["headers"][0] == {}
    json_df = ranged.to_pandas(1, 2, decode="utf-8")
    assert json_df["data"].tolist() == ["m0"]


def test_nothing_is_left_on_the_server_also_by_a_read_stopped_early(ranged, js, subj):
    fill(js, subj)
    batches = ranged.iter_batches(batch_size=5)
    assert next(batches).num_rows == 5
    batches.close()
    ranged.to_arrow()
    assert ranged.info().state.consumer_count == 0


@pytest.mark.parametrize("call, exc, match", [
    (lambda s: s.to_arrow(0), ValueError, "start must be a stream sequence"),
    (lambda s: s.to_arrow(end=True), ValueError, "end must be a stream sequence"),
    (lambda s: s.to_arrow(9, 5), ValueError, r"end \(5\) must be >= start \(9\)"),
    (lambda s: s.to_arrow(3, start_time=jss.Timestamp.from_ns(0)), ValueError, "start and start_time are exclusive"),
    (lambda s: s.to_arrow(start_time="yesterday"), TypeError, "start_time must be an aware datetime"),
    (lambda s: s.to_arrow(end_time=__import__("datetime").datetime(2026, 1, 1)), ValueError,
     "end_time must be an aware datetime"),
    (lambda s: s.to_arrow(start_time=jss.Timestamp.from_ns(10), end_time=jss.Timestamp.from_ns(5)), ValueError,
     "end_time .* must not be before start_time"),
    (lambda s: s.iter_batches(batch_size=0), ValueError, "batch_size must be an int >= 1"),
    (lambda s: s.to_pandas(decode="latin-1"), ValueError, "decode must be None, 'utf-8' or 'json'"),
    (lambda s: s.to_arrow(subject="a b"), ValueError, "subject"),
    (lambda s: s.to_arrow(timeout=-1), ValueError, "timeout"),
])
def test_bad_arguments_are_refused_before_anything_is_sent(api_spy, js, name, subj, call, exc, match):
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"], allow_direct=True)
    assert_sends_nothing(api_spy, js, lambda: call(stream), exc, match)


@pytest.mark.parametrize("hidden, call", [("pyarrow", "to_arrow"), ("pyarrow", "iter_batches"),
                                          ("pandas", "to_pandas")])
def test_without_the_arrow_extra_the_call_names_it(nats_server, js, name, subj, hidden, call):
    js.create_stream(name=name, subjects=[f"{subj}.>"], allow_direct=True)
    script = textwrap.dedent(f"""
        import sys
        sys.modules[{hidden!r}] = None  # not installed
        import jetstream_sync as jss
        with jss.connect({nats_server.url!r}) as c:
            try:
                c.jetstream().stream({name!r}).{call}()
            except ImportError as exc:
                print("ImportError:", exc)
    """)
    root = str(pathlib.Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    assert f"ImportError: reading a stream into {'Arrow' if hidden == 'pyarrow' else 'pandas'} needs {hidden}: " \
           f"pip install 'jetstream-sync[arrow]'" in done.stdout


MEMORY_PROBE = textwrap.dedent("""
    import gc, json, sys
    import jetstream_sync as jss

    def vm():
        out = {}
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024
        return out

    url, name = sys.argv[1:3]
    with jss.connect(url, timeout=30.0) as client:
        stream = client.jetstream().stream(name)
        for batch in stream.iter_batches(1, 20_001):  # every code path once, imports and first allocations
            pass
        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
        except OSError:
            pass
        before = vm()
        rows, last = 0, 0
        for batch in stream.iter_batches():
            rows += batch.num_rows
            last = batch.column("seq")[-1].as_py()
        after = vm()
    print(json.dumps({"before": before, "after": after, "rows": rows, "last": last}))
""")


@pytest.mark.timeout(300)
def test_a_million_message_range_is_read_in_bounded_memory(nats_server, js, name, subj, tmp_path):
    js.create_stream(name=name, subjects=[f"{subj}.>"], allow_direct=True)
    fast = js.client.jetstream(max_pending=4096)
    for i in range(1_000_000):
        fast.publish_async(f"{subj}.a", b"0123456789abcdef")
    fast.publish_async_complete(timeout=120.0)
    script = tmp_path / "probe.py"
    script.write_text(MEMORY_PROBE)
    root = str(pathlib.Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, str(script), nats_server.url, name], capture_output=True, text=True,
                          timeout=240, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["rows"], result["last"]) == (1_000_000, 1_000_000)
    assert result["after"]["VmHWM"] - result["before"]["VmRSS"] < 64 * 1024 * 1024, result


def test_a_replicated_stream_reads_whole_from_any_replica(nats_cluster, name, subj):
    # Direct gets of an R3 stream are answered by whichever replica is first: every read is whole.
    client = jss.connect(nats_cluster.urls, name="ranges-cluster", timeout=10.0)
    try:
        js = client.jetstream(retry=jss.RetryPolicy(attempts=30, initial_backoff=0.1, max_backoff=1.0))
        stream = js.create_stream(name=name, subjects=[f"{subj}.>"], storage="file", num_replicas=3,
                                  allow_direct=True)
        try:
            for _ in range(3):
                last = publish_n(js, f"{subj}.a", 700)[-1]
                assert stream.to_arrow().column("seq").to_pylist() == list(range(1, last + 1))
        finally:
            js.delete_stream(name)
    finally:
        client.close()


@pytest.mark.parametrize("seconds, fraction", [
    (b"2026-05-01T10:11:12", b""), (b"2026-05-01T10:11:12", b"5"), (b"2026-05-01T10:11:12", b"000000001"),
    (b"1999-12-31T23:59:59", b"123456789"), (b"2026-05-01T10:11:13", b"12"),
])
def test_server_times_become_exact_integer_nanoseconds(seconds, fraction):
    text = (seconds + (b"." + fraction if fraction else b"") + b"Z").decode()
    expected = parse_time(text).timestamp_ns()
    assert nanos_from_parts([seconds], [fraction]) == [expected]
    assert nanos_from_parts([seconds, seconds], [fraction, b"9"]) == [expected, parse_time(
        seconds.decode() + ".9Z").timestamp_ns()]


def test_a_time_that_is_not_the_servers_is_refused():
    with pytest.raises(ValueError, match="not a server time"):
        nanos_from_parts([b"2026-05-01T10:11:12"], [b"12x"])
