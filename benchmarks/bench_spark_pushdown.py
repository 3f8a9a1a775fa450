# Charter: what subject filter pushdown saves a Spark batch read of the "jetstream" source: the bytes the
# server sends (its /varz out_bytes, counted around each query) and the time of one query whose filter
# keeps 1 % of the stream, with spark.sql.python.filterPushdown.enabled off (Spark filters every message
# it read) and on (the server sends only the matching subject). Both must return the same rows.
"""Benchmark subject filter pushdown of the ``jetstream`` data source.

    .venv/bin/python benchmarks/bench_spark_pushdown.py                  # 1,000,000 messages of 100 B
    .venv/bin/python benchmarks/bench_spark_pushdown.py --rows 100000

An embedded nats-server with monitoring is started and stopped (the byte counts are its ``/varz``
``out_bytes``: everything it sent while the query ran, planning requests included). One stream (memory
storage, direct gets allowed) holds ``--rows`` messages, one in 100 on ``<stream>.hot``, the others
spread over ``<stream>.cold.0`` .. ``.6``; the query is ``where subject = '<stream>.hot'`` with
``count()``. Spark runs as ``local[<cores>]`` (default 2) in this process's JVM. Anything but the same
row count both ways, or less than a 10x saving, exits 1 with ``FAILED: ...``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

# Spark's Python workers must run this interpreter; Spark binds to loopback. Set before the JVM starts.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import jetstream_sync as jss
from jetstream_sync._server_os import http_get
from jetstream_sync.server import NatsServer

from _common import fail, load

STREAM = "BENCH_PUSHDOWN"
CONF = "spark.sql.python.filterPushdown.enabled"


def out_bytes(server: NatsServer) -> int:
    status, body = http_get(server.monitor_url + "/varz")
    if status != 200:
        fail(f"/varz answered {status}")
    return int(json.loads(body)["out_bytes"])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="messages in the stream (default 1000000)")
    p.add_argument("--size", type=int, default=100, help="payload bytes of each message (default 100)")
    p.add_argument("--cores", type=int, default=2, help="Spark local cores (default 2)")
    args = p.parse_args(argv)

    from pyspark.sql import SparkSession

    print(f"load: {load()}")
    with NatsServer(monitor=True) as server:
        client = jss.Client(server.url)
        js = client.jetstream()
        js.create_stream(name=STREAM, subjects=[f"{STREAM}.>"], storage="memory", allow_direct=True)
        payload = b"x" * args.size
        for i in range(args.rows):
            js.publish_async(f"{STREAM}.hot" if i % 100 == 0 else f"{STREAM}.cold.{i % 7}", payload)
            if i % 50_000 == 49_999:
                js.publish_async_complete(timeout=120.0)
        js.publish_async_complete(timeout=120.0)
        spark = (SparkSession.builder.master(f"local[{args.cores}]").appName("bench-spark-pushdown")
                 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        try:
            def query() -> object:
                return (spark.read.format("jetstream").option("servers", server.url).option("stream", STREAM)
                        .load().where(f"subject = '{STREAM}.hot'"))

            results = {}
            for enabled in ("false", "true", "false", "true"):  # the first pair warms up workers and caches
                spark.conf.set(CONF, enabled)
                before = out_bytes(server)
                t0 = time.perf_counter()
                rows = query().count()
                results[enabled] = (rows, out_bytes(server) - before, time.perf_counter() - t0)
        finally:
            spark.stop()
            client.close()
    (rows_off, bytes_off, s_off), (rows_on, bytes_on, s_on) = results["false"], results["true"]
    expected = (args.rows + 99) // 100
    print(f"{args.rows:,} messages of {args.size} B, filter keeps {expected:,} (1 %)")
    print(f"  without pushdown: {rows_off:>9,} rows  {bytes_off:>14,} bytes from the server  {s_off:7.2f} s")
    print(f"  with pushdown:    {rows_on:>9,} rows  {bytes_on:>14,} bytes from the server  {s_on:7.2f} s")
    ratio = bytes_off / max(bytes_on, 1)
    print(f"  bytes ratio: {ratio:.1f}x fewer with pushdown")
    if not rows_off == rows_on == expected:
        fail(f"row counts differ: {rows_off} without pushdown, {rows_on} with, {expected} expected")
    if ratio < 10:
        fail(f"pushdown read only {ratio:.1f}x fewer bytes (at least 10x expected)")


if __name__ == "__main__":
    main()
