# Charter: `jetstream-sync stream export` through the real console script against the shared server: each
# format (Parquet, CSV, JSON Lines) read back with its own reader holds exactly the rows the library reads
# (`Stream.to_arrow`), across several record batches; ranges by sequence (end exclusive), by time and by
# subject; deleted messages skipped; payloads that are not UTF-8 refused naming their sequence, or written
# as base64; a missing stream (exit 3) and a missing pyarrow (exit 1, before connecting); an output that
# is never left half-written, nor replaced without -f.
from __future__ import annotations

import base64
import csv
import json
import os
import re
import subprocess
from datetime import datetime, timezone

import pexpect
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from conftest import publish_n
from test_cli import CLI, as_json, cli, cli_env, fails, ok, unused_url

pytestmark = pytest.mark.timeout(120)

COLUMNS = ["subject", "data", "headers", "stream", "seq", "timestamp", "msg_id"]


def export(stream: str, fmt: str, path, *flags: str, server) -> subprocess.CompletedProcess:
    return cli("stream", "export", stream, "--format", fmt, "--output", str(path), *flags, server=server,
               timeout=90)


def rfc3339(ns: int) -> str:
    """What CSV and JSON Lines hold for a time: UTC with all nine digits of the nanoseconds."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{fraction:09d}Z"


def nanos(table: pa.Table) -> list[int]:
    """The ``timestamp`` column as integer nanoseconds since the epoch."""
    return table.column("timestamp").cast(pa.int64()).to_pylist()


def expected_text_rows(table: pa.Table, data: str = "utf-8") -> list[dict]:
    """The rows of ``table`` (as the library reads them) as CSV and JSON Lines spell them."""
    rows = []
    for row, ns in zip(table.to_pylist(), nanos(table)):
        payload = row["data"]
        rows.append({
            "subject": row["subject"],
            "data": payload.decode("utf-8") if data == "utf-8" else base64.b64encode(payload).decode("ascii"),
            "headers": dict(row["headers"]),
            "stream": row["stream"],
            "seq": row["seq"],
            "timestamp": rfc3339(ns),
            "msg_id": row["msg_id"],
        })
    return rows


def read_csv(path) -> list[dict]:
    """The CSV file's rows with the csv module, typed back: headers parsed, seq an int, an empty msg_id None."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        return [{**row, "headers": json.loads(row["headers"]), "seq": int(row["seq"]),
                 "msg_id": row["msg_id"] or None} for row in reader]


def read_jsonl(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    docs = [json.loads(line) for line in lines]
    assert all(list(doc) == COLUMNS for doc in docs)
    return docs


def seqs_of(fmt: str, path) -> list[int]:
    if fmt == "parquet":
        return pq.read_table(path).column("seq").to_pylist()
    return [row["seq"] for row in (read_csv(path) if fmt == "csv" else read_jsonl(path))]


def leftovers(folder) -> list[str]:
    """Temporary files an export left in ``folder``."""
    return [p.name for p in folder.iterdir() if p.name.endswith(".part")]


@pytest.fixture
def orders(js):
    """A stream of text messages with headers, a message id, several values for one header, text that CSV
    must quote (commas, quotes, newlines) and text beyond ASCII."""
    stream = js.create_stream(name="CLI_EXPORT", subjects=["exp.>"], storage="memory", allow_direct=True)
    js.publish("exp.new", b'{"id": 1, "region": "eu"}', msg_id="order-1", headers={"Content-Type": "application/json"})
    js.publish("exp.new", b'say "hi", then\nleave', headers={"Tag": ["a", "b"]})
    js.publish("exp.paid", "prix: 12 €, Größe ✓".encode())
    js.publish("exp.paid", b"")
    js.publish("exp.shipped", b"plain", msg_id="order-5")
    return stream


# --- the formats ---------------------------------------------------------------------------------------------


def test_parquet_holds_the_rows_the_library_reads_with_their_arrow_types(js, nats_server, orders, tmp_path):
    binary = bytes(range(256))
    js.publish("exp.blob", binary, headers={"X": "1"})
    path = tmp_path / "orders.parquet"
    assert ok(export("CLI_EXPORT", "parquet", path, server=nats_server)) == \
        f"wrote 6 messages of stream CLI_EXPORT to {path} (parquet)\n"
    table = pq.read_table(path)
    expected = orders.to_arrow()
    assert table.schema == expected.schema
    assert table.equals(expected)
    assert table.schema.field("timestamp").type == pa.timestamp("ns", tz="UTC")
    assert table.column("seq").to_pylist() == [1, 2, 3, 4, 5, 6]
    assert table.column("data").to_pylist()[5] == binary  # bytes stay bytes
    assert table.column("msg_id").to_pylist() == ["order-1", None, None, None, "order-5", None]
    assert dict(table.column("headers").to_pylist()[1]) == {"Tag": ["a", "b"]}


def test_csv_holds_the_rows_as_text_read_back_by_the_csv_module(nats_server, orders, tmp_path):
    path = tmp_path / "orders.csv"
    doc = as_json(export("CLI_EXPORT", "csv", path, "--json", server=nats_server))
    assert doc == {"stream": "CLI_EXPORT", "format": "csv", "path": str(path), "rows": 5}
    rows = read_csv(path)
    assert rows == expected_text_rows(orders.to_arrow())
    assert rows[1]["data"] == 'say "hi", then\nleave' and rows[1]["headers"] == {"Tag": ["a", "b"]}
    assert rows[0]["headers"] == {"Content-Type": ["application/json"], "Nats-Msg-Id": ["order-1"]}
    # pyarrow's own CSV reader reads the same file.
    assert pacsv.read_csv(path).column("seq").to_pylist() == [1, 2, 3, 4, 5]


def test_jsonl_holds_one_json_object_per_row(nats_server, orders, tmp_path):
    path = tmp_path / "orders.jsonl"
    assert ok(export("CLI_EXPORT", "jsonl", path, server=nats_server)).startswith("wrote 5 messages")
    docs = read_jsonl(path)
    assert docs == expected_text_rows(orders.to_arrow())
    assert docs[2]["data"] == "prix: 12 €, Größe ✓" and docs[3]["data"] == ""
    assert docs[4]["msg_id"] == "order-5" and docs[2]["msg_id"] is None
    assert docs[0]["timestamp"] == rfc3339(nanos(orders.to_arrow())[0])  # the server's nanoseconds


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_a_range_of_several_batches_is_written_whole_and_the_bar_reaches_its_end(js, nats_server, tmp_path, fmt):
    js.create_stream(name="CLI_EXPORT_BIG", subjects=["big.>"], storage="memory", allow_direct=True)
    seqs = publish_n(js, "big.x", 25_000)
    path = tmp_path / f"big.{fmt}"
    proc = export("CLI_EXPORT_BIG", fmt, path, "--progress", server=nats_server)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"wrote 25,000 messages of stream CLI_EXPORT_BIG to {path} ({fmt})\n"
    assert "25000/25000" in proc.stderr and "100%" in proc.stderr  # the bar, on stderr only
    assert seqs_of(fmt, path) == seqs
    if fmt == "parquet":
        assert pq.read_table(path).column("data").to_pylist()[-1] == b"m24999"
    # Without a terminal and without --progress, no bar.
    assert ok(export("CLI_EXPORT_BIG", fmt, path, "--end", "3", "-f", server=nats_server))
    assert seqs_of(fmt, path) == [1, 2]


def test_on_a_terminal_the_bar_is_drawn_and_replacing_a_file_is_asked(nats_server, orders, tmp_path):
    def on_terminal(*args: str, reply: str | None = None) -> str:
        term = pexpect.spawn(str(CLI), ["stream", "export", "CLI_EXPORT", "--format", "csv", "--output", "out.csv",
                                        *args], env=cli_env(nats_server), cwd=str(tmp_path), encoding="utf-8",
                             timeout=60)
        if reply is not None:
            term.expect(r"Really overwrite out.csv\? \[y/N\]")
            term.sendline(reply)
        term.expect(pexpect.EOF)
        term.close()
        assert term.exitstatus == 0, term.before
        return term.before

    assert "5/5" in on_terminal() and seqs_of("csv", tmp_path / "out.csv") == [1, 2, 3, 4, 5]
    assert "out.csv not overwritten" in on_terminal("--end", "3", reply="n")
    assert seqs_of("csv", tmp_path / "out.csv") == [1, 2, 3, 4, 5]
    shown = on_terminal("--end", "3", "--no-progress", reply="y")
    assert "%" not in shown and seqs_of("csv", tmp_path / "out.csv") == [1, 2]
    assert re.search(r"^\s+export\s+write a range of messages", ok(cli("stream", "--help")), re.M)


# --- ranges --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_start_end_and_subject_choose_the_rows(nats_server, orders, tmp_path, fmt):
    path = tmp_path / f"part.{fmt}"
    ok(export("CLI_EXPORT", fmt, path, "--start", "2", "--end", "4", server=nats_server))
    assert seqs_of(fmt, path) == [2, 3]  # end is exclusive
    ok(export("CLI_EXPORT", fmt, path, "--subject", "exp.paid", "-f", server=nats_server))
    assert seqs_of(fmt, path) == [3, 4]
    ok(export("CLI_EXPORT", fmt, path, "--subject", "exp.*", "--start", "2", "--end", "5", "-f", server=nats_server))
    assert seqs_of(fmt, path) == [2, 3, 4]
    ok(export("CLI_EXPORT", fmt, path, "--end", "100", "-f", server=nats_server))
    assert seqs_of(fmt, path) == [1, 2, 3, 4, 5]
    # A range with nothing in it is a file with the columns and no rows.
    assert ok(export("CLI_EXPORT", fmt, path, "--start", "50", "-f", server=nats_server)).startswith(
        "wrote 0 messages")
    assert seqs_of(fmt, path) == []
    if fmt == "parquet":
        assert pq.read_table(path).schema == orders.to_arrow().schema


def test_since_takes_a_duration_or_a_time_to_the_nanosecond(js, nats_server, orders, tmp_path):
    path = tmp_path / "since.jsonl"
    ok(export("CLI_EXPORT", "jsonl", path, "--since", "1h", server=nats_server))
    assert seqs_of("jsonl", path) == [1, 2, 3, 4, 5]
    ok(export("CLI_EXPORT", "jsonl", path, "--since", "0s", "-f", server=nats_server))
    assert seqs_of("jsonl", path) == []  # every message was stored before the command started
    third = nanos(orders.to_arrow())[2]
    ok(export("CLI_EXPORT", "jsonl", path, "--since", rfc3339(third), "-f", server=nats_server))
    assert seqs_of("jsonl", path) == [3, 4, 5]  # start_time <= t
    ok(export("CLI_EXPORT", "jsonl", path, "--since", rfc3339(third + 1), "--subject", "exp.>", "--end", "5",
              "-f", server=nats_server))
    assert seqs_of("jsonl", path) == [4]
    bar = export("CLI_EXPORT", "csv", tmp_path / "since.csv", "--since", rfc3339(third), "--progress",
                 server=nats_server)
    assert bar.returncode == 0 and "3/3" in bar.stderr  # the bar of a time range: sequences 3 to 5


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_deleted_messages_are_skipped(nats_server, orders, tmp_path, fmt):
    orders.delete_msg(2)
    orders.delete_msg(5)
    path = tmp_path / f"gaps.{fmt}"
    ok(export("CLI_EXPORT", fmt, path, server=nats_server))
    assert seqs_of(fmt, path) == [1, 3, 4]
    ok(export("CLI_EXPORT", fmt, path, "--start", "2", "--end", "4", "-f", server=nats_server))
    assert seqs_of(fmt, path) == [3]


# --- payloads that are not text ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_payload_that_is_not_utf8_is_refused_naming_its_sequence_or_written_as_base64(js, nats_server, orders,
                                                                                      tmp_path, fmt):
    binary = b"\xff\xfe\x00raw"
    js.publish("exp.blob", binary)
    path = tmp_path / f"blob.{fmt}"
    fails(export("CLI_EXPORT", fmt, path, server=nats_server), 1,
          "the payload of the message at sequence 6 is not UTF-8 text: export with --data base64")
    assert not path.exists() and leftovers(tmp_path) == []
    ok(export("CLI_EXPORT", fmt, path, "--data", "base64", server=nats_server))
    rows = read_csv(path) if fmt == "csv" else read_jsonl(path)
    assert rows == expected_text_rows(orders.to_arrow(), data="base64")
    assert base64.b64decode(rows[5]["data"]) == binary
    # --data utf-8 is the default, said out loud; the range before the binary payload is text.
    ok(export("CLI_EXPORT", fmt, path, "--data", "utf-8", "--end", "6", "-f", server=nats_server))
    assert seqs_of(fmt, path) == [1, 2, 3, 4, 5]


# --- errors --------------------------------------------------------------------------------------------------


def test_a_missing_stream_exits_3_and_writes_nothing(nats_server, tmp_path):
    path = tmp_path / "none.parquet"
    fails(export("CLI_EXPORT_NOPE", "parquet", path, server=nats_server), 3, "stream 'CLI_EXPORT_NOPE' not found")
    assert list(tmp_path.iterdir()) == []


def test_a_failure_part_way_leaves_the_existing_file_as_it_was(js, nats_server, tmp_path):
    js.create_stream(name="CLI_EXPORT_FAIL", subjects=["fail.>"], storage="memory", allow_direct=True)
    publish_n(js, "fail.x", 15_000)
    js.publish("fail.x", b"\xc3\x28")  # not UTF-8, in the second batch of rows: the first is already written
    path = tmp_path / "out.csv"
    path.write_text("the previous export\n")
    os.chmod(path, 0o640)
    fails(export("CLI_EXPORT_FAIL", "csv", path, "-f", server=nats_server), 1, "sequence 15001")
    assert path.read_text() == "the previous export\n"
    assert leftovers(tmp_path) == []
    # Without -f and without a terminal, an existing file is not replaced, and nothing is read.
    fails(export("CLI_EXPORT_FAIL", "csv", path, "--end", "10", server=nats_server), 2, "overwrite .*give -f")
    assert path.read_text() == "the previous export\n"
    ok(export("CLI_EXPORT_FAIL", "csv", path, "--end", "10", "-f", server=nats_server))
    assert seqs_of("csv", path) == list(range(1, 10))
    assert os.stat(path).st_mode & 0o777 == 0o640  # the replaced file's permissions carry over


@pytest.mark.parametrize("args, match", [
    (["--format", "xml", "--output", "x"], "--format"),
    (["--format", "csv"], "--output"),
    (["--format", "csv", "--output", "x", "--start", "5", "--end", "2"], "--end .* must be >= --start"),
    (["--format", "csv", "--output", "x", "--start", "5", "--since", "1h"], "not allowed with argument --start"),
    (["--format", "csv", "--output", "x", "--since", "soon"], "--since"),
    (["--format", "csv", "--output", "x", "--start", "0"], "--start"),
    (["--format", "csv", "--output", "x", "--subject", "a b"], "--subject"),
    (["--format", "parquet", "--output", "x", "--data", "base64"], "--data goes with --format csv or jsonl"),
    (["--format", "csv", "--output", "no/such/folder/x.csv"], "no such directory"),
    (["--format", "jsonl", "--output", "-"], "--output must be a file path"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_flags_exit_2_before_connecting(tmp_path, args, match):
    proc = subprocess.run([str(CLI), "stream", "export", "S", *args], capture_output=True, text=True, timeout=60,
                          input="", cwd=tmp_path, env=cli_env(unused_url()))
    fails(proc, 2, match)
    assert list(tmp_path.iterdir()) == []


def test_without_pyarrow_the_error_names_the_extra_before_connecting(tmp_path):
    # A pyarrow that cannot be imported, first on the path.
    fake = tmp_path / "site" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'pyarrow'\")\n")
    path = os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")]))
    env = cli_env(unused_url(), PYTHONPATH=path)  # nothing listens: connecting first would exit 4
    proc = subprocess.run([str(CLI), "stream", "export", "S", "--format", "parquet", "--output",
                           str(tmp_path / "out.parquet")], capture_output=True, text=True, timeout=60, input="",
                          env=env)
    fails(proc, 1, r"stream export: .*needs pyarrow: pip install 'jetstream-sync\[arrow\]'")
    assert not (tmp_path / "out.parquet").exists()
