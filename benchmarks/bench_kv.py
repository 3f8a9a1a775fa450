# Charter: the key-value store of jetstream_sync against nats-py's own asyncio KV, same server, same
# process, interleaved rounds. Three kinds of cases: get latency (p50 and p90 of one small value,
# with the bare loop crossing of the run), sequential blocking put throughput (against this
# library's own js.publish into the same bucket, the two taking turns in blocks so both see the same
# machine; nats-py's kv.put for reference), and a watcher's read of a large bucket's initial values
# to its caught-up point. Buckets live in memory; the put bucket is fresh for each case and must
# hold exactly what was put after it, and a watcher must yield every key exactly once. Public
# jetstream_sync API only, except the crossing (the client's loop).
"""Benchmark the key-value store: jetstream_sync versus nats-py asyncio (``js.create_key_value``).

    .venv/bin/python benchmarks/bench_kv.py                     # 128 B values, 3 rounds (about a minute)
    .venv/bin/python benchmarks/bench_kv.py --keys 20000 --rounds 5
    .venv/bin/python benchmarks/bench_kv.py --server nats://127.0.0.1:4222

Without ``--server`` an embedded nats-server (``jetstream_sync.server.NatsServer``) is started and
stopped. Prints one table (per round and the median): get p50/p90 latency with the bare thread ->
loop -> thread crossing of the run, put ops/s (kv.put() and js.publish() taking turns in blocks of
100), the watcher's initial read in entries/s, each with the client's CPU per operation; then the
three targets as PASS or BELOW. Exits 1 if a case fails, a bucket does not hold exactly what was
put, or a watcher misses or repeats a key; BELOW a target is a report, not a failure (the figures
are noisy).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Callable

import nats

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

from _common import cpu_seconds, crossing_us, fail, load, overhead_line, rotated

GET_BUCKET = "BENCH_KV_GET"
PUT_BUCKET = "BENCH_KV_PUT"
WATCH_BUCKET = "BENCH_KV_WATCH"
WARM_BUCKET = "BENCH_KV_WARM"
GET_KEY = "config.value"
#: Upper bound on any one case; a healthy case takes seconds.
CASE_TIMEOUT = 300.0
#: kv.put() and js.publish() take turns in blocks of this many calls (one case, two rows).
PAIR_BLOCK = 100
#: (label, jss case, nats-py case, target): get p50 over nats-py's, in bare loop crossings
GET_TARGET = ("kv.get() overhead vs nats-py await kv.get()", "jss_get", "nats_get", 1.0)
TARGETS = (
    # (label, numerator case, denominator case, target ratio)
    ("kv.put()           vs jss js.publish() into the same bucket", "jss_put", "jss_publish", 0.9),
    ("watch().initial()  vs nats-py watch() until its None marker", "jss_watch", "nats_watch", 1.0),
)
NO_TARGET = (
    ("kv.put()           vs nats-py await kv.put()", "jss_put", "nats_put"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--get-count", type=int, default=2000, help="gets per get case (default 2000)")
    p.add_argument("--put-count", type=int, default=10_000,
                   help="puts per put case and side, one round trip each (default 10000)")
    p.add_argument("--keys", type=int, default=100_000, help="keys in the bucket the watchers read (default 100000)")
    p.add_argument("--size", type=int, default=128, help="value bytes (default 128)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported (default 3)")
    p.add_argument("--server", default=None, help="NATS URL; default: start an embedded nats-server")
    args = p.parse_args(argv)
    for name, minimum in (("get_count", 1), ("put_count", 1), ("keys", 1), ("size", 0), ("rounds", 1)):
        if getattr(args, name) < minimum:
            p.error(f"--{name.replace('_', '-')} must be >= {minimum}")
    return args


# -- the timed loops ------------------------------------------------------------------
# Each returns the seconds of each operation (get) or the seconds of the whole loop (put, watch),
# and what is checked afterwards, untimed.

async def nats_get(nkv: Any, n: int) -> list[float]:
    latencies = []
    perf = time.perf_counter
    for _ in range(n):
        t0 = perf()
        await nkv.get(GET_KEY)
        latencies.append(perf() - t0)
    return latencies


def jss_get(kv: jss.KeyValue, n: int) -> list[float]:
    latencies = []
    perf = time.perf_counter
    for _ in range(n):
        t0 = perf()
        kv.get(GET_KEY)
        latencies.append(perf() - t0)
    return latencies


async def nats_put(nkv: Any, n: int, value: bytes) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        await nkv.put(f"k.{i}", value)
    return time.perf_counter() - t0


def jss_put_and_publish(js: jss.JetStream, kv: jss.KeyValue, n: int, value: bytes) -> dict[str, tuple[float, float]]:
    """``n`` kv.put() (keys ``k.<i>``) and ``n`` js.publish() to the same bucket (subjects of keys
    ``p.<i>``, as long), alternating blocks of PAIR_BLOCK calls (which side first alternates too), so
    that both see the same machine; (seconds, CPU seconds) of each side."""
    prefix = f"$KV.{kv.bucket}.p."
    perf = time.perf_counter
    totals = {"jss_publish": [0.0, 0.0], "jss_put": [0.0, 0.0]}

    def publish(start: int, stop: int) -> None:
        for i in range(start, stop):
            js.publish(f"{prefix}{i}", value)

    def put(start: int, stop: int) -> None:
        for i in range(start, stop):
            kv.put(f"k.{i}", value)

    sides = [("jss_publish", publish), ("jss_put", put)]
    for b, start in enumerate(range(0, n, PAIR_BLOCK)):
        stop = min(n, start + PAIR_BLOCK)
        for key, side in (sides if b % 2 == 0 else sides[::-1]):
            c0, t0 = cpu_seconds(), perf()
            side(start, stop)
            totals[key][0] += perf() - t0
            totals[key][1] += cpu_seconds() - c0
    return {key: (t[0], t[1]) for key, t in totals.items()}


async def nats_watch(nkv: Any) -> tuple[float, list[str]]:
    """From the watch call until its None marker (the caught-up point); the keys it yielded."""
    keys = []
    t0 = time.perf_counter()
    watcher = await nkv.watchall()
    while True:
        entry = await watcher.updates(timeout=CASE_TIMEOUT)
        if entry is None:
            break
        keys.append(entry.key)
    seconds = time.perf_counter() - t0
    await watcher.stop()
    return seconds, keys


def jss_watch(kv: jss.KeyValue) -> tuple[float, list[str]]:
    """From the watch call until ``initial()`` ends (the caught-up point); the keys it yielded."""
    keys = []
    t0 = time.perf_counter()
    watcher = kv.watch(timeout=CASE_TIMEOUT)
    for entry in watcher.initial():
        keys.append(entry.key)
    seconds = time.perf_counter() - t0
    watcher.stop()
    return seconds, keys


# -- the harness ----------------------------------------------------------------------

@dataclass
class Case:
    key: str
    label: str
    kind: str  # "get" (latency), "put" (ops/s), "watch" (entries/s)
    run: Callable[[bool], dict[str, RoundResult]]  # warm-up: a small run; a result per row


#: The rows of the table: (key, label, kind); a case gives one row, the paired put case two.
ROWS = (
    ("nats_get", "nats-py    await kv.get()", "get"),
    ("jss_get", "jss        kv.get()", "get"),
    ("nats_put", "nats-py    await kv.put()", "put"),
    ("jss_publish", "jss        js.publish() to $KV.B.<key> *", "put"),
    ("jss_put", "jss        kv.put() *", "put"),
    ("nats_watch", "nats-py    watchall() until None", "watch"),
    ("jss_watch", "jss        watch().initial()", "watch"),
)


@dataclass
class RoundResult:
    n: int
    cpu_us: float           # client process CPU per operation
    rate: float = 0.0       # put and watch: operations per second
    p50_us: float = 0.0     # get: latency percentiles
    p90_us: float = 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Bench:
    """Owns the server, both connections, the buckets and the asyncio loop (main thread) of one run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.value = b"x" * args.size
        self.stack = contextlib.ExitStack()
        try:
            self._connect()
            self._buckets()
        except BaseException:
            self.close()
            raise
        run = self.loop.run_until_complete
        self.cases = [
            Case("nats_get", "nats-py    await kv.get()", "get",
                 lambda warm: {"nats_get": self.get_case(lambda n: run(nats_get(self.nkv_get, n)), warm)}),
            Case("jss_get", "jss        kv.get()", "get",
                 lambda warm: {"jss_get": self.get_case(lambda n: jss_get(self.kv_get, n), warm)}),
            Case("nats_put", "nats-py    await kv.put()", "put",
                 lambda warm: self.put_case(
                     lambda n, kv, nkv: {"nats_put": run(nats_put(nkv, n, self.value))}, warm, 1)),
            Case("jss_put", "jss        kv.put() and js.publish()", "put",
                 lambda warm: self.put_case(
                     lambda n, kv, nkv: jss_put_and_publish(self.js, kv, n, self.value), warm, 2)),
            Case("nats_watch", "nats-py    watchall() until None", "watch",
                 lambda warm: {"nats_watch": self.watch_case(lambda kv, nkv: run(nats_watch(nkv)), warm)}),
            Case("jss_watch", "jss        watch().initial()", "watch",
                 lambda warm: {"jss_watch": self.watch_case(lambda kv, nkv: jss_watch(kv), warm)}),
        ]

    def _connect(self) -> None:
        args = self.args
        self.loop = asyncio.new_event_loop()
        self.stack.callback(self.loop.close)
        self.url = args.server or self._start_server()
        self.nc = self.loop.run_until_complete(nats.connect(self.url, name="bench-nats-py"))
        self.stack.callback(lambda: self.loop.run_until_complete(self.nc.close()))
        self.njs = self.nc.jetstream()
        self.client = self.stack.enter_context(jss.connect(self.url, name="bench-jss", timeout=30.0))
        self.js = self.client.jetstream()

    def _start_server(self) -> str:
        server = NatsServer()
        server.start()
        self.stack.callback(server.stop)
        return server.url

    def fresh_bucket(self, name: str) -> jss.KeyValue:
        with contextlib.suppress(jss.BucketNotFoundError):
            self.js.delete_key_value(name)
        return self.js.create_key_value(name, storage="memory")

    def _fill(self, kv: jss.KeyValue, n: int) -> None:
        """``n`` keys ``k.0`` .. with the value, published pipelined (untimed)."""
        prefix = f"$KV.{kv.bucket}.k."
        for i in range(n):
            self.js.publish_async(f"{prefix}{i}", self.value)
        self.js.publish_async_complete(timeout=CASE_TIMEOUT)
        held = kv.status().values
        if held != n:
            fail(f"bucket {kv.bucket} holds {held} values after filling, expected {n}")

    def _buckets(self) -> None:
        self.kv_get = self.fresh_bucket(GET_BUCKET)
        self.kv_get.put(GET_KEY, self.value)
        self.nkv_get = self.nats_bind(GET_BUCKET)
        self.kv_watch = self.fresh_bucket(WATCH_BUCKET)
        self._fill(self.kv_watch, self.args.keys)
        self.nkv_watch = self.nats_bind(WATCH_BUCKET)
        self.kv_warm = self.fresh_bucket(WARM_BUCKET)
        self._fill(self.kv_warm, min(1000, self.args.keys))
        self.nkv_warm = self.nats_bind(WARM_BUCKET)

    def nats_bind(self, bucket: str) -> Any:
        return self.loop.run_until_complete(self.njs.key_value(bucket))

    def close(self) -> None:
        for name in (GET_BUCKET, PUT_BUCKET, WATCH_BUCKET, WARM_BUCKET):
            with contextlib.suppress(Exception):
                self.js.delete_key_value(name)
        self.stack.close()

    def server_version(self) -> str:
        v = self.nc.connected_server_version
        return f"{v.major}.{v.minor}.{v.patch}" + (f"-{v.prerelease}" if v.prerelease else "")

    def count_for(self, kind: str) -> int:
        return {"get": self.args.get_count, "put": self.args.put_count, "watch": self.args.keys}[kind]

    # Each case: run it, time it, check what it left.

    def get_case(self, run: Callable[[int], list[float]], warm: bool) -> RoundResult:
        n = min(200, self.args.get_count) if warm else self.args.get_count
        cpu0 = cpu_seconds()
        latencies = run(n)
        cpu_us = (cpu_seconds() - cpu0) / n * 1e6
        return RoundResult(n, cpu_us, p50_us=statistics.median(latencies) * 1e6,
                           p90_us=percentile(latencies, 0.9) * 1e6)

    def put_case(self, run: Callable[[int, jss.KeyValue, Any], dict[str, Any]], warm: bool,
                 sides: int) -> dict[str, RoundResult]:
        """``run`` puts ``n`` keys per side into a fresh bucket and says, per row, its seconds (a float:
        CPU measured here) or its (seconds, CPU seconds); the bucket must then hold ``sides * n`` values."""
        n = min(200, self.args.put_count) if warm else self.args.put_count
        kv = self.fresh_bucket(PUT_BUCKET)
        nkv = self.nats_bind(PUT_BUCKET)
        cpu0 = cpu_seconds()
        timed = run(n, kv, nkv)
        cpu = cpu_seconds() - cpu0
        held = kv.status().values
        self.js.delete_key_value(PUT_BUCKET)  # frees the memory store before the next case
        if held != sides * n:
            fail(f"the put bucket holds {held} values, expected exactly {sides * n}")
        results = {}
        for key, figures in timed.items():
            seconds, cpu_side = figures if isinstance(figures, tuple) else (figures, cpu)
            results[key] = RoundResult(n, cpu_side / n * 1e6, rate=n / seconds)
        return results

    def watch_case(self, run: Callable[[jss.KeyValue, Any], tuple[float, list[str]]], warm: bool) -> RoundResult:
        kv, nkv = (self.kv_warm, self.nkv_warm) if warm else (self.kv_watch, self.nkv_watch)
        n = min(1000, self.args.keys) if warm else self.args.keys
        cpu0 = cpu_seconds()
        seconds, keys = run(kv, nkv)
        cpu_us = (cpu_seconds() - cpu0) / n * 1e6
        if len(keys) != n or len(set(keys)) != n:
            fail(f"a watcher of {n:,} keys yielded {len(keys):,} entries of {len(set(keys)):,} distinct keys "
                 f"before its caught-up point")
        return RoundResult(n, cpu_us, rate=n / seconds)


def run_rounds(bench: Bench) -> tuple[dict[str, list[RoundResult]], list[tuple[float, float]]]:
    """An untimed warm-up of every case (inboxes, subscriptions), then the rounds, case order rotating
    each round; right after the jss get case, the bare loop crossing (both forms, us)."""
    for case in bench.cases:
        case.run(True)
    crossing_us(bench.client, 200)
    results: dict[str, list[RoundResult]] = {key: [] for key, _, _ in ROWS}
    labels = {key: label for key, label, _ in ROWS}
    crossings = []
    for r in range(bench.args.rounds):
        for case in rotated(bench.cases, r):
            for key, res in case.run(False).items():
                results[key].append(res)
                figure = (f"p50 {res.p50_us:>6.0f} us  p90 {res.p90_us:>6.0f} us" if case.kind == "get"
                          else f"{res.rate:>10,.0f} {'ops' if case.kind == 'put' else 'entries'}/s")
                print(f"  round {r + 1}: {labels[key]:<40} {figure} {res.cpu_us:>7.1f} us CPU/op", flush=True)
            if case.key == GET_TARGET[1]:  # measured in the scheduling the jss case just ran in
                crossings.append(crossing_us(bench.client))
                print(f"  round {r + 1}: bare loop crossing p50 {crossings[-1][0]:.0f} us (lock hand-off "
                      f"{crossings[-1][1]:.0f} us)", flush=True)
    return results, crossings


# -- report ---------------------------------------------------------------------------

def print_header(bench: Bench) -> None:
    a = bench.args
    print(f"bench_kv: {a.size} B values in memory buckets; {a.get_count:,} gets, {a.put_count:,} puts per case "
          f"and side, a watch of {a.keys:,} keys; {a.rounds} rounds")
    print(f"nats-py {version('nats-py')}, nats-server {bench.server_version()} at {bench.url}"
          f"{'' if a.server else ' (embedded)'}, jetstream_sync {jss.__version__}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"load average at start: {load()}", flush=True)


def print_table(bench: Bench, results: dict[str, list[RoundResult]], crossings: list[tuple[float, float]]) -> None:
    rounds = bench.args.rounds
    med = statistics.median
    rate = {k: med(x.rate for x in v) for k, v in results.items()}
    p50 = {k: med(x.p50_us for x in v) for k, v in results.items()}
    p90 = {k: med(x.p90_us for x in v) for k, v in results.items()}
    crossing = (med(c[0] for c in crossings), med(c[1] for c in crossings))
    head = (f"{'case':<40} {'n':>8} " + " ".join(f"{f'r{i + 1}':>10}" for i in range(rounds))
            + f" {'median':>10} {'CPU us/op':>9}")
    print("\nper round and median over rounds; client process CPU per operation (all threads), median")
    print(head)
    print("-" * len(head))
    sections = (("get", "get: p50/p90 latency, us"), ("put", "put, one at a time: ops/s"),
                ("watch", "watcher, initial values to the caught-up point: entries/s"))
    for kind, title in sections:
        print(title)
        for key, label, _ in (row for row in ROWS if row[2] == kind):
            rs = results[key]
            cpu_us = med(x.cpu_us for x in rs)
            if kind == "get":
                cells = " ".join(f"{f'{x.p50_us:.0f}/{x.p90_us:.0f}':>10}" for x in rs)
                median = f"{p50[key]:.0f}/{p90[key]:.0f}"
            else:
                cells = " ".join(f"{x.rate:>10,.0f}" for x in rs)
                median = f"{rate[key]:,.0f}"
            print(f"{label:<40} {bench.count_for(kind):>8,} {cells} {median:>10} {cpu_us:>9.1f}")
        if kind == "get":
            for i, label in enumerate(("bare loop crossing (run a no-op)", "bare loop crossing (lock hand-off)")):
                cells = " ".join(f"{c[i]:>10.0f}" for c in crossings)
                print(f"{label:<40} {'':>8} {cells} {crossing[i]:>10.0f}")
    print(f"* one case: kv.put() and js.publish() take turns in blocks of {PAIR_BLOCK} into the same bucket")
    print()
    label, num, den, target = GET_TARGET
    print(overhead_line(label, p50[num], p50[den], crossing, target))
    for label, num, den, target in TARGETS:
        ratio = rate[num] / rate[den]
        verdict = "PASS" if ratio >= target else "BELOW"
        print(f"{label}: {ratio:5.2f}x  (target >= {target}x)  {verdict}")
    print(f"(no target) kv.get() vs nats-py await kv.get(): p50 {p50['jss_get'] / p50['nats_get']:4.2f}x, "
          f"p90 {p90['jss_get'] / p90['nats_get']:4.2f}x")
    for label, num, den in NO_TARGET:
        print(f"(no target) {label}: {rate[num] / rate[den]:5.2f}x")
    print(f"load average at end: {load()}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    try:
        print_header(bench)
        results, crossings = run_rounds(bench)
        print_table(bench, results, crossings)
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
