# Charter: Spark throughput of jetstream_sync.spark on one machine. Publishing N small rows of a
# spark.range() DataFrame through the foreachPartition publisher against the same rows through
# js.publish_async in one process, and reading them back through the "jetstream" data source (count() and
# a full materialisation) against one ordered consumer in one process. Every case is checked: exactly N.
"""Benchmark the Spark integration: publisher() and the ``jetstream`` data source.

    .venv/bin/python benchmarks/bench_spark.py                   # 1,000,000 rows of 100 B
    .venv/bin/python benchmarks/bench_spark.py --rows 200000
    .venv/bin/python benchmarks/bench_spark.py --server nats://127.0.0.1:4222

Without ``--server`` an embedded nats-server (``jetstream_sync.server.NatsServer``) is started and stopped.
Spark runs as ``local[<cores>]`` (default 2) in this process's JVM, its Python workers on this interpreter.
The cases, run once each in this order (a small untimed warm-up of every case runs first):

1. ``jss publish_async``: one process, ``js.publish_async(subject, row, msg_id=...)`` for every row with at
   most ``--window`` in flight, futures checked oldest first as the Spark helper does; timed until the last
   PubAck.
2. ``spark publisher``: ``df.foreachPartition(jss.spark.publisher(...))`` on
   ``spark.range(0, N, 1, --partitions).selectExpr("lpad(cast(id AS string), size, '.') AS data")``: the
   same payloads and the same kind of ``Nats-Msg-Id`` (``<write id>-<partition>-<row>``); timed as the
   whole Spark job (scheduling, row transfer to the Python workers, every PubAck).
3. ``spark read count()``: ``spark.read.format("jetstream")...load().count()``.
4. ``spark read sum(length(data))``: every row materialised and summed by Spark.
5. ``jss ordered consumer``: one process, ``fetch(1000)`` loop reading every message's data.

Each publish case gets a fresh memory stream and must leave exactly N messages in it; the reads must see
exactly N rows and N * size bytes. Anything else exits 1 with ``FAILED: ...``.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import os
import platform
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

# Spark's Python workers must run this interpreter; Spark binds to loopback. Set before the JVM starts.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import jetstream_sync as jss
import jetstream_sync.spark  # jss.spark.publisher, new_write_id, register
from jetstream_sync.server import NatsServer

from _common import load

STREAM = "BENCH_SPARK"
SUBJECT = "bench.spark"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="rows to publish and read (default 1000000)")
    p.add_argument("--size", type=int, default=100, help="bytes in each row's data column (default 100)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the published DataFrame (default 4)")
    p.add_argument("--read-partitions", type=int, default=None,
                   help="minPartitions of the reads (default: the source's, one per 10,000 sequences)")
    p.add_argument("--window", type=int, default=1000, help="publishes in flight per task / process (default 1000)")
    p.add_argument("--cores", type=int, default=2, help="Spark local[N] (default 2)")
    p.add_argument("--server", default=None, help="NATS URL; default: start an embedded nats-server")
    args = p.parse_args(argv)
    for name in ("rows", "partitions", "window", "cores"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if args.read_partitions is not None and args.read_partitions < 1:
        p.error("--read-partitions must be >= 1")
    if args.size < len(str(args.rows - 1)):
        p.error(f"--size must be at least {len(str(args.rows - 1))} (the digits of the largest row id)")
    return args


def fail(message: str) -> None:
    print(f"\nFAILED: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


class Bench:
    """Owns the server, the driver's connection and the SparkSession for one run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stack = contextlib.ExitStack()
        try:
            if args.server:
                self.url = args.server
            else:
                server = NatsServer()
                server.start()
                self.stack.callback(server.stop)
                self.url = server.url
            self.client = self.stack.enter_context(jss.connect(self.url, name="bench-spark-driver", timeout=30.0))
            self.js = self.client.jetstream()
            self.js_async = self.client.jetstream(max_pending=args.window)
            self.spark = self._start_spark()
        except BaseException:
            self.stack.close()
            raise

    def _start_spark(self) -> Any:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master(f"local[{self.args.cores}]")
            .appName("jetstream-sync-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate()
        )
        self.stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        jss.spark.register(spark)
        return spark

    def close(self) -> None:
        with contextlib.suppress(jss.JetStreamError):
            self.js.delete_stream(STREAM)
        self.stack.close()

    def fresh_stream(self) -> None:
        with contextlib.suppress(jss.StreamNotFoundError):
            self.js.delete_stream(STREAM)
        self.js.create_stream(name=STREAM, subjects=[SUBJECT], storage=jss.StorageType.MEMORY)

    def check_stored(self, label: str, n: int) -> None:
        stored = self.js.stream(STREAM).info().state.messages
        if stored != n:
            fail(f"{label}: stream holds {stored} messages, expected exactly {n}")

    # -- publishing ------------------------------------------------------------------------------

    def publish_async(self, n: int) -> float:
        """Every row through js.publish_async in this process; seconds until the last PubAck."""
        js, size, window = self.js_async, self.args.size, self.args.window
        prefix = f"{jss.spark.new_write_id()}-0-"
        pending: collections.deque = collections.deque()
        check_at = 2 * window

        def settle(k: int) -> None:
            for _ in range(k):
                exc = pending.popleft().exception(timeout=60.0)
                if exc is not None:
                    fail(f"jss publish_async: a publish failed: {exc!r}")

        t0 = time.perf_counter()
        for i in range(n):
            pending.append(js.publish_async(SUBJECT, str(i).rjust(size, "."), msg_id=prefix + str(i)))
            if len(pending) >= check_at:
                settle(len(pending) - window)
        settle(len(pending))
        return time.perf_counter() - t0

    def publish_plain(self, n: int) -> float:
        """The same payloads through js.publish_async without any Nats-Msg-Id: the stored-bytes baseline."""
        js, size, window = self.js_async, self.args.size, self.args.window
        pending: collections.deque = collections.deque()
        t0 = time.perf_counter()
        for i in range(n):
            pending.append(js.publish_async(SUBJECT, str(i).rjust(size, ".")))
            if len(pending) >= 2 * window:
                while len(pending) > window:
                    if pending.popleft().exception(timeout=60.0) is not None:
                        fail("jss publish_async without ids: a publish failed")
        js.publish_async_complete(timeout=60.0)
        if any(f.exception() is not None for f in pending):
            fail("jss publish_async without ids: a publish failed")
        return time.perf_counter() - t0

    def stored_bytes(self) -> int:
        return self.js.stream(STREAM).info().state.bytes

    def frame(self, n: int) -> Any:
        return self.spark.range(0, n, 1, self.args.partitions).selectExpr(
            f"lpad(cast(id AS string), {self.args.size}, '.') AS data")

    def spark_publisher(self, n: int) -> float:
        """df.foreachPartition(publisher(...)); seconds for the whole Spark job."""
        df = self.frame(n)
        pub = jss.spark.publisher(servers=self.url, subject=SUBJECT, max_pending=self.args.window,
                                  name="bench-spark-worker", timeout=30.0)
        t0 = time.perf_counter()
        df.foreachPartition(pub)
        return time.perf_counter() - t0

    # -- reading ---------------------------------------------------------------------------------

    def reader(self) -> Any:
        r = self.spark.read.format("jetstream").option("servers", self.url).option("stream", STREAM)
        if self.args.read_partitions is not None:
            r = r.option("minPartitions", self.args.read_partitions)
        return r.load()

    def read_count(self, n: int) -> float:
        df = self.reader()
        t0 = time.perf_counter()
        got = df.count()
        seconds = time.perf_counter() - t0
        if got != n:
            fail(f"spark read count(): {got} rows, expected {n}")
        return seconds

    def read_sum(self, n: int) -> float:
        df = self.reader()
        t0 = time.perf_counter()
        (row,) = df.selectExpr("count(*) AS rows", "sum(length(data)) AS bytes", "count(DISTINCT seq) AS seqs") \
            .collect()
        seconds = time.perf_counter() - t0
        if (row.rows, row.bytes, row.seqs) != (n, n * self.args.size, n):
            fail(f"spark read sum(length(data)): rows={row.rows} bytes={row.bytes} distinct seqs={row.seqs}, "
                 f"expected {n}, {n * self.args.size}, {n}")
        return seconds

    def read_ordered(self, n: int) -> float:
        oc = self.js.ordered_consumer(STREAM)
        got = total = 0
        t0 = time.perf_counter()
        while got < n:
            batch = 0
            for msg in oc.fetch(min(1000, n - got), expires=5.0):
                total += len(msg.data)
                batch += 1
            if not batch:
                fail(f"jss ordered consumer: read {got} of {n} messages, then nothing")
            got += batch
        seconds = time.perf_counter() - t0
        if total != n * self.args.size:
            fail(f"jss ordered consumer: {total} bytes, expected {n * self.args.size}")
        return seconds


Case = tuple[str, str, Callable[[int], float]]


def run(bench: Bench) -> dict[str, float]:
    n = bench.args.rows
    publishes: list[Case] = [
        ("publish_async", f"jss        js.publish_async() w={bench.args.window}, 1 process", bench.publish_async),
        ("publisher", f"spark      foreachPartition(publisher()), {bench.args.partitions} partitions",
         bench.spark_publisher),
    ]
    reads: list[Case] = [
        ("read_count", "spark      read.format('jetstream').count()", bench.read_count),
        ("read_sum", "spark      read ... sum(length(data))", bench.read_sum),
        ("ordered", "jss        ordered_consumer fetch(1000), 1 process", bench.read_ordered),
    ]
    # Warm-up, untimed: Python workers started, connections cached, inboxes made, code paths JIT-ed.
    warm = min(n, 20_000)
    for _, _, publish in publishes:
        bench.fresh_stream()
        publish(warm)
        bench.check_stored("warm-up", warm)
    for _, _, read in reads:
        read(warm)

    rates: dict[str, float] = {}
    bench.fresh_stream()
    bench.publish_plain(n)
    bench.check_stored("publish_async without ids", n)
    rates["plain_bytes"] = bench.stored_bytes()
    for key, label, publish in publishes:
        bench.fresh_stream()
        seconds = publish(n)
        bench.check_stored(label.split(",")[0].strip(), n)
        rates[key] = n / seconds
        rates[f"{key}_bytes"] = bench.stored_bytes()
        print(f"  {label:<58} {n:>10,} {seconds:>8.1f} s {rates[key]:>10,.0f} msgs/s", flush=True)
    print(f"  (reads: {bench.reader().rdd.getNumPartitions()} partitions)", flush=True)
    for key, label, read in reads:  # the stream the Spark publisher filled
        seconds = read(n)
        rates[key] = n / seconds
        print(f"  {label:<58} {n:>10,} {seconds:>8.1f} s {rates[key]:>10,.0f} msgs/s", flush=True)
    return rates


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    bench = Bench(args)
    try:
        import pyspark

        print(f"bench_spark: {args.rows:,} rows x {args.size} B, publish partitions {args.partitions}, read "
              f"minPartitions {args.read_partitions or 'default (1 per 10,000, at most 1 per core)'}, window {args.window}, "
              f"local[{args.cores}]")
        print(f"pyspark {pyspark.__version__}, nats-server at {bench.url}{'' if args.server else ' (embedded)'}, "
              f"jetstream_sync {jss.__version__}, nats-py {version('nats-py')}, Python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs")
        print(f"load average at start: {load()}", flush=True)
        print(f"\n  {'case':<58} {'msgs':>10} {'time':>10} {'rate':>17}")
        rates = run(bench)
        print()
        print(f"spark publisher vs jss publish_async (1 process): {rates['publisher'] / rates['publish_async']:5.2f}x")
        print(f"spark read sum  vs jss ordered consumer (1 process): {rates['read_sum'] / rates['ordered']:5.2f}x")
        print(f"stored bytes: spark publisher {rates['publisher_bytes'] / 1e6:.1f} MB vs the same rows without ids "
              f"{rates['plain_bytes'] / 1e6:.1f} MB: {rates['publisher_bytes'] / rates['plain_bytes']:5.2f}x")
        print(f"load average at end: {load()}; total {time.perf_counter() - started:.0f} s")
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
