# Charter: publish throughput of jetstream_sync against nats-py asyncio, same server, same process.
# Four cases (awaited js.publish, blocking publish(), nats-py publish_async, jetstream_sync publish_async)
# run interleaved round by round so machine noise hits all alike; only the publish loop is timed, each
# case gets a fresh memory stream and must leave exactly N messages in it. The one-at-a-time cases also
# time each publish, for the blocking publish()'s overhead in bare loop crossings (measured each round).
# Public jetstream_sync API only, except the crossing, which reaches the client's loop thread.
"""Benchmark JetStream publishing: jetstream_sync versus nats-py asyncio.

    .venv/bin/python benchmarks/bench_publish.py                  # 100,000 x 128 B, 3 rounds
    .venv/bin/python benchmarks/bench_publish.py --size 1024      # 1 KiB messages
    .venv/bin/python benchmarks/bench_publish.py --server nats://127.0.0.1:4222

Without ``--server`` an embedded nats-server (``jetstream_sync.server.NatsServer``) is started and
stopped. Prints msgs/s per case (each round and the median), the two ratios the project targets, and
for the one-at-a-time cases the p50 latency per publish, the bare thread -> loop -> thread crossing of
the run and publish()'s overhead over nats-py in crossings (target <= 1.2). Exits 1 if a case fails or
a stream does not hold exactly the expected count; BELOW a target is not a failure (the figures are
noisy), only a report.
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

STREAM = "BENCH_PUBLISH"
SUBJECT = "bench.publish"
#: Upper bound on any one case; a healthy case takes seconds.
CASE_TIMEOUT = 300.0
TARGETS = (
    # (label, numerator case, denominator case, target ratio)
    ("publish()       vs nats-py await js.publish", "jss_publish", "nats_publish", 0.9),
    ("publish_async() vs nats-py js.publish_async", "jss_publish_async", "nats_publish_async", 2.0),
)
#: (label, jss case, nats-py case, target): p50 per publish over nats-py's, in bare loop crossings
OVERHEAD_TARGET = ("publish() overhead vs nats-py await js.publish", "jss_publish", "nats_publish", 1.2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100_000, help="messages per async case (default 100000)")
    p.add_argument("--sync-count", type=int, default=None,
                   help="messages per blocking case, one round trip each (default count/10)")
    p.add_argument("--size", type=int, default=128, help="payload bytes (default 128)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported (default 3)")
    p.add_argument("--window", type=int, default=1000, help="publishes in flight for the async cases (default 1000)")
    p.add_argument("--server", default=None, help="NATS URL; default: start an embedded nats-server")
    args = p.parse_args(argv)
    if args.sync_count is None:
        args.sync_count = max(1, args.count // 10)
    for name, minimum in (("count", 1), ("sync_count", 1), ("size", 0), ("rounds", 1), ("window", 1)):
        if getattr(args, name) < minimum:
            p.error(f"--{name.replace('_', '-')} must be >= {minimum}")
    return args


# -- the four timed publish loops -------------------------------------------------
# Each returns (seconds spent publishing, futures to check afterwards, untimed, and for the
# one-at-a-time cases the seconds of each publish). Callers keep every future, as
# `futures = [js.publish_async(...) for ...]` in user code does.

async def nats_publish(njs: Any, n: int, payload: bytes) -> tuple[float, list, list[float]]:
    latencies = []
    perf = time.perf_counter
    t_start = perf()
    for _ in range(n):
        t0 = perf()
        await njs.publish(SUBJECT, payload)
        latencies.append(perf() - t0)
    return perf() - t_start, [], latencies


def jss_publish(js: jss.JetStream, n: int, payload: bytes) -> tuple[float, list, list[float]]:
    latencies = []
    perf = time.perf_counter
    t_start = perf()
    for _ in range(n):
        t0 = perf()
        js.publish(SUBJECT, payload)
        latencies.append(perf() - t0)
    return perf() - t_start, [], latencies


async def nats_publish_async(njs: Any, n: int, payload: bytes) -> tuple[float, list, list[float]]:
    futures = []
    t0 = time.perf_counter()
    for _ in range(n):
        futures.append(await njs.publish_async(SUBJECT, payload))
    await asyncio.wait_for(njs.publish_async_completed(), CASE_TIMEOUT)
    return time.perf_counter() - t0, futures, []


def jss_publish_async(js: jss.JetStream, n: int, payload: bytes) -> tuple[float, list, list[float]]:
    futures = []
    t0 = time.perf_counter()
    for _ in range(n):
        futures.append(js.publish_async(SUBJECT, payload))
    js.publish_async_complete(timeout=CASE_TIMEOUT)
    return time.perf_counter() - t0, futures, []


# -- the harness --------------------------------------------------------------------

@dataclass
class Case:
    key: str
    label: str
    blocking: bool  # one round trip per message: runs --sync-count messages
    run: Callable[[int, bytes], tuple[float, list, list[float]]]


@dataclass
class RoundResult:
    rate: float         # msgs/s
    cpu_us: float       # client process CPU per message
    p50_us: float = 0.0  # one-at-a-time cases: p50 per publish


class Bench:
    """Owns the server, both connections and the asyncio loop (main thread) for one benchmark run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.payload = b"x" * args.size
        self.stack = contextlib.ExitStack()
        try:
            self._connect()
        except BaseException:
            self.stack.close()
            raise
        self.cases = [
            Case("nats_publish", "nats-py    await js.publish()", True,
                 lambda n, p: self.loop.run_until_complete(nats_publish(self.njs, n, p))),
            Case("jss_publish", "jss        js.publish()", True, lambda n, p: jss_publish(self.js, n, p)),
            Case("nats_publish_async", f"nats-py    js.publish_async() w={args.window}", False,
                 lambda n, p: self.loop.run_until_complete(nats_publish_async(self.njs_async, n, p))),
            Case("jss_publish_async", f"jss        js.publish_async() w={args.window}", False,
                 lambda n, p: jss_publish_async(self.js_async, n, p)),
        ]

    def _connect(self) -> None:
        args = self.args
        self.loop = asyncio.new_event_loop()
        self.stack.callback(self.loop.close)
        self.url = args.server or self._start_server()
        self.nc = self.loop.run_until_complete(nats.connect(self.url, name="bench-nats-py"))
        self.stack.callback(lambda: self.loop.run_until_complete(self.nc.close()))
        self.njs = self.nc.jetstream()
        self.njs_async = self.nc.jetstream(publish_async_max_pending=args.window)
        self.client = self.stack.enter_context(jss.connect(self.url, name="bench-jss", timeout=30.0))
        self.js = self.client.jetstream()
        self.js_async = self.client.jetstream(max_pending=args.window)

    def _start_server(self) -> str:
        server = NatsServer()
        server.start()
        self.stack.callback(server.stop)
        return server.url

    def close(self) -> None:
        with contextlib.suppress(jss.StreamNotFoundError):
            self.js.delete_stream(STREAM)
        self.stack.close()

    def server_version(self) -> str:
        v = self.nc.connected_server_version
        return f"{v.major}.{v.minor}.{v.patch}" + (f"-{v.prerelease}" if v.prerelease else "")

    def count_for(self, case: Case) -> int:
        return self.args.sync_count if case.blocking else self.args.count

    def fresh_stream(self) -> None:
        with contextlib.suppress(jss.StreamNotFoundError):
            self.js.delete_stream(STREAM)
        self.js.create_stream(name=STREAM, subjects=[SUBJECT], storage=jss.StorageType.MEMORY)

    def run_case(self, case: Case, n: int) -> RoundResult:
        """Publish ``n`` messages with ``case`` into a fresh stream; return msgs/s, client CPU us/msg
        and (one-at-a-time cases) the p50 per publish.

        Exits loudly on any failed publish or a stream not holding exactly ``n`` messages.
        """
        self.fresh_stream()
        cpu0 = cpu_seconds()
        seconds, futures, latencies = case.run(n, self.payload)
        cpu_us = (cpu_seconds() - cpu0) / n * 1e6
        failed = [f for f in futures if not f.done() or f.exception() is not None]
        stored = self.js.stream(STREAM).info().state.messages
        self.js.delete_stream(STREAM)  # frees the memory store before the next case
        if failed:
            first = failed[0].exception() if failed[0].done() else "not done"
            fail(f"{case.label}: {len(failed)} of {n} publish futures failed or unresolved (first: {first!r})")
        if stored != n:
            fail(f"{case.label}: stream holds {stored} messages, expected exactly {n}")
        return RoundResult(n / seconds, cpu_us, statistics.median(latencies) * 1e6 if latencies else 0.0)


def run_rounds(bench: Bench) -> tuple[dict[str, list[RoundResult]], list[tuple[float, float]]]:
    """A small untimed warm-up (inboxes, subscriptions), then the rounds, case order rotating each round;
    right after the jss one-at-a-time case, the bare loop crossing (both forms, us)."""
    for case in bench.cases:
        bench.run_case(case, min(1000, bench.count_for(case)))
    crossing_us(bench.client, 200)
    results: dict[str, list[RoundResult]] = {c.key: [] for c in bench.cases}
    crossings = []
    for r in range(bench.args.rounds):
        for case in rotated(bench.cases, r):
            res = bench.run_case(case, bench.count_for(case))
            results[case.key].append(res)
            p50 = f"  p50 {res.p50_us:>5.0f} us" if case.blocking else ""
            print(f"  round {r + 1}: {case.label:<40} {res.rate:>10,.0f} msgs/s {res.cpu_us:>7.1f} us CPU/msg{p50}",
                  flush=True)
            if case.key == OVERHEAD_TARGET[1]:  # measured in the scheduling the jss case just ran in
                crossings.append(crossing_us(bench.client))
                print(f"  round {r + 1}: bare loop crossing p50 {crossings[-1][0]:.0f} us (lock hand-off "
                      f"{crossings[-1][1]:.0f} us)", flush=True)
    return results, crossings


# -- report -------------------------------------------------------------------------

def print_header(bench: Bench) -> None:
    a = bench.args
    print(f"bench_publish: {a.count:,} msgs/async case, {a.sync_count:,} msgs/blocking case, {a.size} B payload, "
          f"{a.rounds} rounds, window {a.window}")
    print(f"nats-py {version('nats-py')}, nats-server {bench.server_version()} at {bench.url}"
          f"{'' if a.server else ' (embedded)'}, jetstream_sync {jss.__version__}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"load average at start: {load()}", flush=True)


def print_table(bench: Bench, results: dict[str, list[RoundResult]], crossings: list[tuple[float, float]]) -> None:
    rounds = bench.args.rounds
    rate = {k: statistics.median(x.rate for x in v) for k, v in results.items()}
    head = (f"{'case':<40} {'msgs':>8} " + " ".join(f"{f'r{i + 1}':>9}" for i in range(rounds))
            + f" {'median':>9} {'CPU us/msg':>10}")
    print("\nmsgs/s per round, median; client process CPU per message (all threads), median")
    print(head)
    print("-" * len(head))
    for case in bench.cases:
        cells = " ".join(f"{x.rate:>9,.0f}" for x in results[case.key])
        cpu_us = statistics.median(x.cpu_us for x in results[case.key])
        print(f"{case.label:<40} {bench.count_for(case):>8,} {cells} {rate[case.key]:>9,.0f} {cpu_us:>10.1f}")

    p50 = {k: statistics.median(x.p50_us for x in v) for k, v in results.items()}
    crossing = (statistics.median(c[0] for c in crossings), statistics.median(c[1] for c in crossings))
    print("\none at a time: p50 per publish, us, per round; medians over rounds")
    for case in (c for c in bench.cases if c.blocking):
        cells = " ".join(f"{x.p50_us:>9.0f}" for x in results[case.key])
        print(f"{case.label:<40} {bench.count_for(case):>8,} {cells} {p50[case.key]:>9.0f}")
    for i, label in enumerate(("bare loop crossing (run a no-op)", "bare loop crossing (lock hand-off)")):
        cells = " ".join(f"{c[i]:>9.0f}" for c in crossings)
        print(f"{label:<40} {'':>8} {cells} {crossing[i]:>9.0f}")
    print()
    for label, num, den, target in TARGETS:
        ratio = rate[num] / rate[den]
        verdict = "PASS" if ratio >= target else "BELOW"
        print(f"{label}: {ratio:5.2f}x  (target >= {target}x)  {verdict}")
    label, num, den, target = OVERHEAD_TARGET
    print(overhead_line(label, p50[num], p50[den], crossing, target))
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
