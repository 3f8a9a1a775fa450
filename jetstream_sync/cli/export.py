# ``jetstream-sync stream export``: a range of a stream (by sequence, by time, by subject) written to a
# Parquet, CSV or JSON Lines file, batch by batch as ``Stream.iter_batches`` reads it, with a progress bar
# of the range's sequences on stderr.
# Rule 1: memory is bounded by one record batch whatever the range: Parquet through ParquetWriter, CSV
#         through pyarrow's CSV writer, JSON Lines a line at a time.
# Rule 2: the file appears whole or not at all: it is written as a temporary file beside the output,
#         renamed over it at the end and removed on any failure; an existing file is replaced only after
#         -f or a yes on the terminal.
# Rule 3: Parquet keeps the Arrow types; CSV and JSON Lines are text: payloads as UTF-8 (a payload that is
#         not is an error naming its sequence and --data) or base64, headers as a JSON object, times as
#         RFC 3339 with nanoseconds.
# pyarrow (the [arrow] extra) and the range reader (attrs) are imported when the command runs.
from __future__ import annotations

import argparse
import base64
import json
import os
from datetime import datetime
from typing import IO, Any, Iterator

import jetstream_sync as jss

from ._args import UsageError, int_at_least, subject, time_ago
from ._errors import CommandError, NotFound
from ._output import Output, fmt_int, progress_bar, write_whole
from ._prompt import can_ask, confirm_or_force, force_flag
from ._session import Session

__all__ = ["DATA_ENCODINGS", "FORMATS", "register_export"]

#: What ``--format`` takes.
FORMATS = ("parquet", "csv", "jsonl")
#: What ``--data`` takes: how CSV and JSON Lines spell a payload.
DATA_ENCODINGS = ("utf-8", "base64")
#: Rows per record batch read and written at a time (the memory bound).
_BATCH_ROWS = 10_000


def register_export(cmds: Any, common: argparse.ArgumentParser) -> None:
    """Add ``stream export`` to ``cmds`` (the ``stream`` command's sub-parsers action)."""
    export = cmds.add_parser(
        "export", parents=[common], help="write a range of messages to a Parquet, CSV or JSON Lines file",
        description="Write the messages of the stream with START <= seq < END (default: all of them, up to the "
                    "last when the command starts), or stored since --since, optionally only those on "
                    "--subject, to --output, in as little memory as one batch of rows takes. The columns are "
                    "subject, data, headers, stream, seq, timestamp and msg_id. Parquet keeps their types "
                    "(data as bytes, timestamp in nanoseconds); CSV and JSON Lines write data as UTF-8 text "
                    "(or --data base64), headers as a JSON object and timestamp as RFC 3339 with nanoseconds. "
                    "The file appears once complete; replacing one asks first on a terminal, -f replaces "
                    "without asking (and is needed without a terminal). Needs pyarrow: "
                    "pip install 'jetstream-sync[arrow]'.")
    export.add_argument("stream", metavar="NAME", help="the stream to export")
    export.add_argument("--format", required=True, choices=FORMATS, help="the file format")
    export.add_argument("-o", "--output", required=True, metavar="PATH", help="the file to write")
    where = export.add_mutually_exclusive_group()
    where.add_argument("--start", metavar="N", type=int_at_least(1), help="the first sequence (default: the first)")
    where.add_argument("--since", metavar="DURATION", type=time_ago,
                       help="only messages stored this long ago or later (e.g. 1h), or since an RFC 3339 time")
    export.add_argument("--end", metavar="N", type=int_at_least(1),
                        help="stop before this sequence (exclusive; default: after the last)")
    export.add_argument("--subject", metavar="SUBJECT", type=subject,
                        help="only messages on this subject (wildcards allowed)")
    export.add_argument("--data", choices=DATA_ENCODINGS, default=None,
                        help="how CSV and JSON Lines write payloads (default utf-8; a payload that is not UTF-8 "
                             "text is an error: use base64)")
    export.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    force_flag(export)
    export.set_defaults(handler=cmd_export)


def _check(args: argparse.Namespace) -> None:
    """Usage errors, before anything is loaded or sent."""
    if args.end is not None and args.start is not None and args.end < args.start:
        raise UsageError(f"stream export: --end ({args.end}) must be >= --start ({args.start}): "
                         f"the range is START <= seq < END")
    if args.data is not None and args.format == "parquet":
        raise UsageError("stream export: --data goes with --format csv or jsonl (Parquet keeps payloads as bytes)")
    if not args.output:
        raise UsageError("stream export: --output must not be empty")
    if args.output == "-":
        raise UsageError("stream export: --output must be a file path (the summary goes to stdout)")
    if os.path.isdir(args.output):
        raise UsageError(f"stream export: --output {args.output!r} is a directory: give a file path")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise UsageError(f"stream export: --output: no such directory: {folder!r}")


def cmd_export(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream export NAME --format F --output PATH [--start N | --since D] [--end N] [--subject S]``:
    write the range, batch by batch; prints how many rows went where.

    Raises UsageError (exit 2) before connecting for bad flags, CommandError (exit 1) without pyarrow
    or for a payload that is not UTF-8 with ``--data utf-8``, NotFound (exit 3) for a missing stream;
    on any failure the output is left as it was."""
    _check(args)
    pa = _pyarrow()
    target = args.output
    replacing = os.path.isfile(target)
    what = f"overwrite {target}"
    if replacing and not args.force and not can_ask():
        confirm_or_force(args, "stream export", what)  # raises, naming -f
    js = session.js()
    try:
        stream = js.stream(args.stream)
    except jss.StreamNotFoundError:
        raise NotFound(f"stream {args.stream!r} not found") from None
    if replacing and not confirm_or_force(args, "stream export", what):
        out.line(f"{target} not overwritten")
        return 0
    state = stream.cached_info.state
    last = state.last_seq or 0
    end = last + 1 if args.end is None else min(args.end, last + 1)
    end = max(end, args.start or 1)  # a range past the last message is empty, not an error
    first = max(args.start or 1, state.first_seq or 1)
    total = max(0, end - first) if args.since is None else None
    batches = stream.iter_batches(start=args.start, end=end, subject=args.subject, start_time=args.since,
                                  batch_size=_BATCH_ROWS)
    bar = progress_bar(total, args.progress, desc=stream.name)
    try:
        rows = _write_file(pa, args.format, args.data or "utf-8", _counted(batches, bar, first, end, args.since),
                           target)
    finally:
        bar.close()
    if out.json:
        out.emit({"stream": stream.name, "format": args.format, "path": target, "rows": rows})
    else:
        out.line(f"wrote {fmt_int(rows)} message{'s' * (rows != 1)} of stream {stream.name} to {target} "
                 f"({args.format})")
    return 0


def _pyarrow() -> Any:
    """The pyarrow module, or CommandError (exit 1) naming the extra that brings it."""
    from ..ranges import require_pyarrow  # late: the range reader loads attrs; see the charter

    try:
        return require_pyarrow()
    except ImportError as exc:
        raise CommandError(f"stream export: {exc}") from None


def _counted(batches: Iterator[Any], bar: Any, first: int, end: int, since: datetime | None) -> Iterator[Any]:
    """``batches``, moving ``bar`` over the sequences read through (a range by time learns where it
    starts from its first row); at the end the bar is full."""
    done = first - 1
    for batch in batches:
        seqs = batch.column("seq")
        if len(seqs):
            if since is not None and bar.total is None:
                done = seqs[0].as_py() - 1
                bar.total = max(0, end - 1 - done)
                bar.refresh()
            last = seqs[-1].as_py()
            bar.update(last - done)
            done = last
        yield batch
    if bar.total is not None and bar.n < bar.total:
        bar.update(bar.total - bar.n)


# ---------------------------------------------------------------------------------------------
# The file: a temporary file beside it, renamed over it once complete
# ---------------------------------------------------------------------------------------------


def _write_file(pa: Any, fmt: str, encoding: str, batches: Iterator[Any], target: str) -> int:
    """Write ``batches`` to ``target`` in ``fmt``, whole or not at all (``write_whole``); the rows written."""
    return write_whole(target, lambda path: _write(pa, fmt, encoding, batches, path))


def _write(pa: Any, fmt: str, encoding: str, batches: Iterator[Any], path: str) -> int:
    rows = 0
    with open(path, "wb") as sink:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # late: the [arrow] extra

            from ..ranges import arrow_schema  # late: see the charter

            with pq.ParquetWriter(sink, arrow_schema()) as writer:
                for batch in batches:
                    writer.write_batch(batch)
                    rows += batch.num_rows
        elif fmt == "csv":
            import pyarrow.csv as pacsv  # late: the [arrow] extra

            with pacsv.CSVWriter(sink, _csv_schema(pa)) as writer:
                for batch in batches:
                    writer.write_batch(_csv_batch(pa, batch, encoding))
                    rows += batch.num_rows
        else:
            for batch in batches:
                _write_jsonl(pa, batch, encoding, sink)
                rows += batch.num_rows
    return rows


# ---------------------------------------------------------------------------------------------
# Rows as text (CSV and JSON Lines)
# ---------------------------------------------------------------------------------------------


def _csv_schema(pa: Any) -> Any:
    return pa.schema([("subject", pa.string()), ("data", pa.string()), ("headers", pa.string()),
                      ("stream", pa.string()), ("seq", pa.int64()), ("timestamp", pa.string()),
                      ("msg_id", pa.string())])


def _data_text(pa: Any, batch: Any, encoding: str) -> Any:
    """The ``data`` column as text: UTF-8, or base64; CommandError naming the sequence of a payload
    that is not UTF-8."""
    data = batch.column("data")
    if encoding == "base64":
        return pa.array([base64.b64encode(d).decode("ascii") for d in data.to_pylist()], pa.string())
    try:
        return data.cast(pa.string())
    except pa.ArrowInvalid:
        for seq, payload in zip(batch.column("seq").to_pylist(), data.to_pylist()):
            try:
                payload.decode("utf-8")
            except UnicodeDecodeError:
                raise CommandError(f"stream export: the payload of the message at sequence {seq} is not UTF-8 "
                                   f"text: export with --data base64") from None
        raise


def _times(pa: Any, batch: Any) -> Any:
    """RFC 3339 in UTC with all nine digits of the nanoseconds: ``2026-05-01T10:11:12.123456789Z``."""
    import pyarrow.compute as pc  # late: the [arrow] extra

    naive = batch.column("timestamp").cast(pa.timestamp("ns"))  # the same UTC instants, no zone to look up
    return pc.strftime(naive, format="%Y-%m-%dT%H:%M:%SZ")


def _headers(batch: Any) -> list[dict[str, list[str]]]:
    return [dict(pairs) for pairs in batch.column("headers").to_pylist()]


def _csv_batch(pa: Any, batch: Any, encoding: str) -> Any:
    headers = [json.dumps(h, ensure_ascii=False) for h in _headers(batch)]
    return pa.RecordBatch.from_arrays(
        [batch.column("subject"), _data_text(pa, batch, encoding), pa.array(headers, pa.string()),
         batch.column("stream"), batch.column("seq"), _times(pa, batch), batch.column("msg_id")],
        schema=_csv_schema(pa))


def _write_jsonl(pa: Any, batch: Any, encoding: str, sink: IO[bytes]) -> None:
    columns = zip(batch.column("subject").to_pylist(), _data_text(pa, batch, encoding).to_pylist(),
                  _headers(batch), batch.column("stream").to_pylist(), batch.column("seq").to_pylist(),
                  _times(pa, batch).to_pylist(), batch.column("msg_id").to_pylist())
    lines = [json.dumps({"subject": subj, "data": data, "headers": headers, "stream": stream, "seq": seq,
                         "timestamp": ts, "msg_id": msg_id}, ensure_ascii=False)
             for subj, data, headers, stream, seq, ts, msg_id in columns]
    sink.write(("\n".join(lines) + "\n").encode("utf-8") if lines else b"")
