# Charter: a stream range read into an Arrow table (stream.to_arrow) against what a user writes without
# it: a fetch(1000) loop on an ordered consumer collecting the same rows into columns and building the
# same table; same server, same client, same run, rounds interleaved. Both must return exactly the
# stream's messages (every sequence once, in order; checked untimed). Public jetstream_sync API only.
"""Benchmark reading a stream into Arrow: ``stream.to_arrow()`` against a ``fetch(1000)`` loop.

    .venv/bin/python benchmarks/bench_arrow.py                     # 1,000,000 x 100 B, 3 rounds
    .venv/bin/python benchmarks/bench_arrow.py --messages 200000 --rounds 5
    .venv/bin/python benchmarks/bench_arrow.py --server nats://127.0.0.1:4222

Without ``--server`` an embedded nats-server (``jetstream_sync.server.NatsServer``) is started and
stopped. The messages are published once into a file stream that allows direct gets. Each round reads
all of them into a ``pyarrow.Table`` with the same columns two ways: ``stream.to_arrow()`` (batch direct
gets, no consumer) and an ordered consumer's ``fetch(max_messages=1000)`` loop appending subject, data,
headers, sequence, time and message id to lists, then ``pyarrow.table(...)``. Prints msgs/s per round,
the medians, client CPU per message and the ratio the project targets (to_arrow at least 1.5x the fetch
loop). Exits 1 if a case returns other rows than the stream's; BELOW a target is a report, not a failure.
"""
from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Callable

import pyarrow as pa

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

from _common import cpu_seconds, fail, library_revision, load, rotated

STREAM, SUBJECT = "BENCH_ARROW", "bench.arrow"
TARGET = 1.5
SCHEMA = pa.schema([
    pa.field("subject", pa.string()),
    pa.field("data", pa.binary()),
    pa.field("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
    pa.field("stream", pa.string()),
    pa.field("seq", pa.int64()),
    pa.field("timestamp", pa.timestamp("ns", tz="UTC")),
    pa.field("msg_id", pa.string()),
])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000, help="messages in the stream (default 1,000,000)")
    p.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported (default 3)")
    p.add_argument("--server", default=None, help="NATS URL; default: start an embedded nats-server")
    args = p.parse_args(argv)
    for name in ("messages", "size", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    return args


@dataclass
class Timed:
    seconds: float
    cpu: float
    table: Any


def jss_to_arrow(js: jss.JetStream) -> Timed:
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    table = js.stream(STREAM).to_arrow()
    return Timed(time.perf_counter() - t0, cpu_seconds() - cpu0, table)


def fetch_loop(js: jss.JetStream, total: int) -> Timed:
    """What one writes without to_arrow: an ordered consumer's fetch(1000) loop into columns, then a table."""
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    subject: list[str] = []
    data: list[bytes] = []
    headers: list[Any] = []
    seq: list[int] = []
    ts: list[int] = []
    msg_id: list[str | None] = []
    oc = js.ordered_consumer(STREAM)
    try:
        while len(seq) < total:
            for msg in oc.fetch(max_messages=min(1000, total - len(seq)), expires=30.0):
                s, _, _, t = msg.metadata_numbers()
                h = msg.headers
                subject.append(msg.subject)
                data.append(msg.data)
                headers.append(list(h.multi().items()) if h else [])
                seq.append(s)
                ts.append(t)
                msg_id.append(h.get("Nats-Msg-Id") if h else None)
    finally:
        oc.close()
    table = pa.table([subject, data, headers, [STREAM] * len(seq), seq, ts, msg_id], schema=SCHEMA)
    return Timed(time.perf_counter() - t0, cpu_seconds() - cpu0, table)


def check(what: str, table: Any, total: int) -> None:
    if table.num_rows != total or table.schema != SCHEMA:
        fail(f"{what}: {table.num_rows} rows with schema {table.schema}, expected {total} rows of {SCHEMA}")
    if table.column("seq").to_pylist() != list(range(1, total + 1)):
        fail(f"{what}: the sequences are not 1..{total} in order")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with contextlib.ExitStack() as stack:
        url = args.server
        if url is None:
            server = stack.enter_context(NatsServer())
            url = server.url
        client = stack.enter_context(jss.connect(url, name="bench-arrow", timeout=60.0))
        js = client.jetstream(max_pending=4096)
        with contextlib.suppress(jss.StreamNotFoundError):
            js.delete_stream(STREAM)
        js.create_stream(name=STREAM, subjects=[SUBJECT], storage="file", allow_direct=True)
        stack.callback(lambda: js.delete_stream(STREAM))
        payload = b"x" * args.size
        t0 = time.perf_counter()
        for _ in range(args.messages):
            js.publish_async(SUBJECT, payload)
        js.publish_async_complete(timeout=300)
        print(f"prepared: {args.messages:,} x {args.size} B in file stream {STREAM} "
              f"({args.messages / (time.perf_counter() - t0):,.0f} msgs/s)", flush=True)
        print(f"python {platform.python_version()}, jetstream_sync {library_revision()}, pyarrow {version('pyarrow')}",
              flush=True)
        cases: list[tuple[str, Callable[[], Timed]]] = [
            ("stream.to_arrow()", lambda: jss_to_arrow(js)),
            ("ordered fetch(1000) loop -> pa.table", lambda: fetch_loop(js, args.messages)),
        ]
        # Warm both paths once (untimed, small reads would not warm the big allocations: whole).
        for label, run in cases:
            check(label, run().table, args.messages)
        rates: dict[str, list[float]] = {label: [] for label, _ in cases}
        cpus: dict[str, list[float]] = {label: [] for label, _ in cases}
        for r in range(args.rounds):
            for label, run in rotated(cases, r):
                timed = run()
                check(label, timed.table, args.messages)
                del timed.table
                rates[label].append(args.messages / timed.seconds)
                cpus[label].append(timed.cpu / args.messages * 1e6)
                print(f"  round {r + 1}: {label:40s} {rates[label][-1]:>12,.0f} msgs/s  "
                      f"{cpus[label][-1]:6.2f} us CPU/msg", flush=True)
        print(f"\n{'case':40s} {'median msgs/s':>14s} {'us CPU/msg':>11s}   rounds")
        for label, _ in cases:
            print(f"{label:40s} {statistics.median(rates[label]):>14,.0f} {statistics.median(cpus[label]):>11.2f}   "
                  + " ".join(f"{x:,.0f}" for x in rates[label]))
        ratio = statistics.median(rates[cases[0][0]]) / statistics.median(rates[cases[1][0]])
        verdict = "PASS" if ratio >= TARGET else "BELOW"
        print(f"\nto_arrow() vs fetch(1000) loop: {ratio:.2f}x  (target >= {TARGET}x)  {verdict}")
        print(f"load average at end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
