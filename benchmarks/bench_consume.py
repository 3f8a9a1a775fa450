# Charter: consume throughput and one-message latency of jetstream_sync against nats-py asyncio, same
# server, same process. Messages are published once into memory streams; every case reads all of them
# through a fresh durable explicit-ack consumer, acks each, and must end with every message received
# exactly once (by stream sequence) and nothing pending or unacked. Rounds interleaved; public jss API only,
# except the bare loop crossing measured each round (next()'s overhead is counted in crossings).
"""Benchmark JetStream consuming: jetstream_sync versus nats-py asyncio.

    .venv/bin/python benchmarks/bench_consume.py                   # 100,000 x 128 B, 3 rounds
    .venv/bin/python benchmarks/bench_consume.py --size 1024       # 1 KiB messages
    .venv/bin/python benchmarks/bench_consume.py --server nats://127.0.0.1:4222

Without ``--server`` an embedded nats-server (``jetstream_sync.server.NatsServer``) is started and
stopped. Prints msgs/s per throughput case, p50/p99 round trips per latency case (each round and the
median), the ratios the project targets, the bare thread -> loop -> thread crossing of the run
and next()'s overhead over the raw one-message pull in crossings (target <= 1.0). Exits 1 if a case
fails, a message is missed or seen twice, or a consumer ends with messages pending or unacked; BELOW a
target is not a failure (the figures are noisy), only a report.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any, Callable

import nats

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

from _common import cpu_seconds, crossing_us, fail, library_revision, load, overhead_line, rotated

STREAM = "BENCH_CONSUME"
SUBJECT = "bench.consume"
LAT_STREAM = "BENCH_CONSUME_LAT"
LAT_SUBJECT = "bench.consume.lat"
#: The untimed warm-up reads this one (every case reads a whole stream, so that nothing stays pending).
WARM_STREAM = "BENCH_CONSUME_WARMUP"
WARM_SUBJECT = "bench.consume.warmup"
SUBJECTS = {STREAM: SUBJECT, LAT_STREAM: LAT_SUBJECT, WARM_STREAM: WARM_SUBJECT}
WARM_COUNT = 1000
#: Pull batch of every throughput case (jss consume() default max_messages is also 500).
BATCH = 500
#: The hand-written continuous pull re-pulls the used credit when pending falls to this (ADR-37's 50%).
REFILL_AT = BATCH // 2
#: Server-side expiry of the throughput pulls (ADR-37's default), seconds.
EXPIRES = 30.0
#: Expiry of the one-message pulls of the latency cases, seconds (jss next(timeout=5) sends the same).
LAT_EXPIRES = 5.0
#: Long enough that no message is redelivered while a case runs on a loaded machine.
ACK_WAIT = 300.0
#: Upper bound on any one case; a healthy case takes seconds.
CASE_TIMEOUT = 300.0
#: How long acks may take to land once a case is done (not timed).
SETTLE_TIMEOUT = 15.0
TARGETS = (
    # (label, numerator case, denominator case, target ratio): higher is better
    ("consume(workers=1) vs asyncio ADR-37 loop", "jss_consume_1", "nats_continuous", 1.0),
    ("consume(workers=4) vs consume(workers=1) ", "jss_consume_4", "jss_consume_1", 1.0),
    ("fetch(500) loop    vs nats-py fetch(500) ", "jss_fetch", "nats_fetch", 3.5),
)
#: (label, numerator, denominator, target): p50 ratio, lower is better
LATENCY_TARGET = ("next() p50         vs raw one-message pull", "jss_next", "nats_raw_next", 1.3)
#: (label, jss case, nats-py case, target): p50 over nats-py's, in bare loop crossings
OVERHEAD_TARGET = ("next() overhead    vs raw one-message pull", "jss_next", "nats_raw_next", 1.0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100_000, help="messages per throughput case (default 100000)")
    p.add_argument("--latency-count", type=int, default=2000,
                   help="one-message round trips per latency case (default 2000)")
    p.add_argument("--size", type=int, default=128, help="payload bytes (default 128)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported (default 3)")
    p.add_argument("--server", default=None, help="NATS URL; default: start an embedded nats-server")
    args = p.parse_args(argv)
    for name, minimum in (("count", 1), ("latency_count", 1), ("size", 0), ("rounds", 1)):
        if getattr(args, name) < minimum:
            p.error(f"--{name.replace('_', '-')} must be >= {minimum}")
    return args


@dataclass
class Outcome:
    """What a case hands back: seconds timed, the reply subject of every message it handled and,
    for latency cases, one round trip (seconds) per message."""

    seconds: float
    replies: list[str]
    latencies: list[float] = field(default_factory=list)


# -- 1. asyncio nats-py: hand-written ADR-37 continuous pull ---------------------------

async def nats_continuous(nc: Any, stream: str, consumer: str, n: int) -> Outcome:
    """One inbox, a callback, pulls of 500 re-pulling the used credit once pending falls to 250."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()
    replies: list[str] = []
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
    inbox = nc.new_inbox()
    expires = int(EXPIRES * 1e9)
    pending = 0  # requested and not yet handled (or cancelled by a status)

    async def pull(batch: int) -> None:
        nonlocal pending
        pending += batch
        await nc.publish(subject, json.dumps({"batch": batch, "expires": expires}).encode(), reply=inbox)

    async def on_msg(msg: Any) -> None:
        nonlocal pending
        hdrs = msg.headers
        if hdrs and not msg.data and hdrs.get("Status"):
            status = hdrs["Status"]
            if status == "100":
                return
            left = hdrs.get("Nats-Pending-Messages")
            if left is None or status not in ("404", "408", "409"):
                if not done.done():
                    done.set_exception(RuntimeError(f"pull ended with status {status} {hdrs.get('Description')}"))
                return
            pending = max(0, pending - int(left))
        else:
            replies.append(msg.reply)
            await msg.ack()
            pending -= 1
            if len(replies) >= n:
                if not done.done():
                    done.set_result(None)
                return
        if pending <= REFILL_AT and not done.done():
            await pull(BATCH - pending)

    t0 = time.perf_counter()
    sub = await nc.subscribe(inbox, cb=on_msg)
    await pull(BATCH)
    await done
    seconds = time.perf_counter() - t0
    await sub.unsubscribe()
    return Outcome(seconds, replies)


# -- 2, 3. jss consume() ----------------------------------------------------------------

def jss_consume(consumer: jss.Consumer, n: int, workers: int) -> Outcome:
    replies: list[str] = []
    done = threading.Event()
    problems: list[BaseException] = []

    def handler(msg: jss.Msg) -> None:
        replies.append(msg.reply)
        msg.ack()
        if len(replies) >= n:
            done.set()

    t0 = time.perf_counter()
    handle = consumer.consume(handler, workers=workers, error_handler=problems.append)
    finished = done.wait(CASE_TIMEOUT)
    seconds = time.perf_counter() - t0
    handle.stop()
    if not finished:
        fail(f"consume(workers={workers}): {len(replies)} of {n} messages handled in {CASE_TIMEOUT:.0f}s "
             f"(stats {handle.stats}, error {handle.error!r})")
    if problems or handle.error is not None:
        fail(f"consume(workers={workers}): error_handler got {problems!r}, handle.error {handle.error!r}")
    return Outcome(seconds, replies)


# -- 4. nats-py pull_subscribe().fetch(500) ---------------------------------------------

async def nats_fetch(njs: Any, stream: str, consumer: str, n: int) -> Outcome:
    replies: list[str] = []
    t0 = time.perf_counter()
    psub = await njs.pull_subscribe(SUBJECTS[stream], durable=consumer, stream=stream)
    while len(replies) < n:
        for msg in await psub.fetch(min(BATCH, n - len(replies)), timeout=EXPIRES):
            replies.append(msg.reply)
            await msg.ack()
    seconds = time.perf_counter() - t0
    await psub.unsubscribe()
    return Outcome(seconds, replies)


# -- 5. jss fetch(500) ------------------------------------------------------------------

def jss_fetch(consumer: jss.Consumer, n: int) -> Outcome:
    replies: list[str] = []
    deadline = time.monotonic() + CASE_TIMEOUT
    t0 = time.perf_counter()
    while len(replies) < n:
        if time.monotonic() > deadline:
            fail(f"fetch loop: {len(replies)} of {n} messages in {CASE_TIMEOUT:.0f}s")
        for msg in consumer.fetch(max_messages=min(BATCH, n - len(replies))):
            replies.append(msg.reply)
            msg.ack()
    return Outcome(time.perf_counter() - t0, replies)


# -- 6a. asyncio raw one-message pull -----------------------------------------------------

async def nats_raw_next(nc: Any, stream: str, consumer: str, n: int) -> Outcome:
    """One inbox with a callback that resolves the waiting future; one ``{"batch":1}`` pull per message."""
    loop = asyncio.get_running_loop()
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
    body = json.dumps({"batch": 1, "expires": int(LAT_EXPIRES * 1e9)}).encode()
    inbox = nc.new_inbox()
    waiting: asyncio.Future | None = None
    replies: list[str] = []
    latencies: list[float] = []

    async def on_msg(msg: Any) -> None:
        hdrs = msg.headers
        if hdrs and not msg.data and hdrs.get("Status"):
            if hdrs["Status"] != "100" and waiting is not None and not waiting.done():
                waiting.set_exception(RuntimeError(f"pull ended with status {hdrs['Status']} "
                                                   f"{hdrs.get('Description')}"))
            return
        if waiting is not None and not waiting.done():
            waiting.set_result(msg)
        else:  # not asked for: record it, so the exactly-once check reports it
            replies.append(msg.reply)

    sub = await nc.subscribe(inbox, cb=on_msg)
    t_start = time.perf_counter()
    for _ in range(n):
        waiting = loop.create_future()
        t0 = time.perf_counter()
        await nc.publish(subject, body, reply=inbox)
        msg = await waiting
        latencies.append(time.perf_counter() - t0)
        replies.append(msg.reply)
        await msg.ack()
    seconds = time.perf_counter() - t_start
    await sub.unsubscribe()
    return Outcome(seconds, replies, latencies)


# -- 6b. jss next() -------------------------------------------------------------------------

def jss_next(consumer: jss.Consumer, n: int) -> Outcome:
    replies: list[str] = []
    latencies: list[float] = []
    t_start = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        msg = consumer.next(timeout=LAT_EXPIRES)
        latencies.append(time.perf_counter() - t0)
        replies.append(msg.reply)
        msg.ack()
    return Outcome(time.perf_counter() - t_start, replies, latencies)


# -- the harness --------------------------------------------------------------------------

@dataclass
class Case:
    key: str
    label: str
    latency: bool  # one-message round trips on the latency stream, --latency-count of them
    run: Callable[[jss.Consumer, int], Outcome]


class Bench:
    """Owns the server, both connections, the asyncio loop (main thread) and the two pre-filled streams."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stack = contextlib.ExitStack()
        self._names = itertools.count(1)
        try:
            self._connect()
        except BaseException:
            self.stack.close()
            raise
        self.cases = [
            Case("nats_continuous", "nats-py    ADR-37 continuous pull (cb)", False,
                 lambda c, n: self.aio(nats_continuous(self.nc, c.stream_name, c.name, n))),
            Case("jss_consume_1", "jss        consume(workers=1)", False, lambda c, n: jss_consume(c, n, 1)),
            Case("jss_consume_4", "jss        consume(workers=4)", False, lambda c, n: jss_consume(c, n, 4)),
            Case("nats_fetch", f"nats-py    pull_subscribe().fetch({BATCH})", False,
                 lambda c, n: self.aio(nats_fetch(self.njs, c.stream_name, c.name, n))),
            Case("jss_fetch", f"jss        fetch(max_messages={BATCH}) loop", False, jss_fetch),
            Case("nats_raw_next", "nats-py    raw one-message pull (cb)", True,
                 lambda c, n: self.aio(nats_raw_next(self.nc, c.stream_name, c.name, n))),
            Case("jss_next", "jss        next(timeout=5)", True, jss_next),
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

    def aio(self, coro: Any) -> Outcome:
        return self.loop.run_until_complete(asyncio.wait_for(coro, CASE_TIMEOUT))

    def close(self) -> None:
        for name in SUBJECTS:
            with contextlib.suppress(jss.StreamNotFoundError):
                self.js.delete_stream(name)
        self.stack.close()

    def server_version(self) -> str:
        v = self.nc.connected_server_version
        return f"{v.major}.{v.minor}.{v.patch}" + (f"-{v.prerelease}" if v.prerelease else "")

    def count_for(self, case: Case) -> int:
        return self.args.latency_count if case.latency else self.args.count

    def stream_size(self, stream: str) -> int:
        return {STREAM: self.args.count, LAT_STREAM: self.args.latency_count,
                WARM_STREAM: min(WARM_COUNT, self.args.count)}[stream]

    def prepublish(self) -> None:
        """Fill the memory streams once with jss publish_async (not timed as a case; reported)."""
        payload = b"x" * self.args.size
        js_async = self.client.jetstream(max_pending=1000)
        for stream, subject in SUBJECTS.items():
            n = self.stream_size(stream)
            with contextlib.suppress(jss.StreamNotFoundError):
                self.js.delete_stream(stream)
            self.js.create_stream(name=stream, subjects=[subject], storage=jss.StorageType.MEMORY)
            t0 = time.perf_counter()
            futures = [js_async.publish_async(subject, payload) for _ in range(n)]
            js_async.publish_async_complete(timeout=CASE_TIMEOUT)
            seconds = time.perf_counter() - t0
            failed = [f for f in futures if not f.done() or f.exception() is not None]
            stored = self.js.stream(stream).info().state.messages
            if failed or stored != n:
                fail(f"pre-publishing {stream}: {len(failed)} publishes failed, stream holds {stored} of {n}")
            print(f"pre-published {n:,} x {self.args.size} B into memory stream {stream} "
                  f"({n / seconds:,.0f} msgs/s, jss publish_async)", flush=True)

    def run_case(self, case: Case, warmup: bool = False) -> tuple[Outcome, float]:
        """Read all messages of the case's stream (or of the warm-up stream) through a fresh durable
        explicit-ack consumer; return the outcome and client CPU us/msg. Exits loudly unless every
        message was received exactly once and the consumer ends with nothing unacked or pending."""
        stream = WARM_STREAM if warmup else LAT_STREAM if case.latency else STREAM
        n = self.stream_size(stream)
        name = f"bench_{case.key}_{next(self._names)}"
        consumer = self.js.create_consumer(stream, durable_name=name, ack_policy=jss.AckPolicy.EXPLICIT,
                                           ack_wait=ACK_WAIT)
        try:
            cpu0 = cpu_seconds()
            outcome = case.run(consumer, n)
            cpu_us = (cpu_seconds() - cpu0) / n * 1e6
            self.settle(case, consumer)
            check_exactly_once(case, outcome.replies, n)
        finally:
            with contextlib.suppress(jss.ConsumerNotFoundError):
                consumer.delete()
        return outcome, cpu_us

    def settle(self, case: Case, consumer: jss.Consumer) -> None:
        """Push out both clients' buffered acks, then wait (untimed) for the server to count them."""
        self.loop.run_until_complete(self.nc.flush())
        self.client.flush()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            info = consumer.info()
            if info.num_ack_pending == 0 and info.num_pending == 0:
                return
            if time.monotonic() > deadline:
                fail(f"{case.label}: after {SETTLE_TIMEOUT:.0f}s the consumer shows num_ack_pending "
                     f"{info.num_ack_pending} (expected 0), num_pending {info.num_pending} "
                     f"(expected 0), num_redelivered {info.num_redelivered}")
            time.sleep(0.05)


def stream_sequence(reply: str) -> int:
    """The stream sequence from a ``$JS.ACK`` subject, both ADR-15 formats."""
    tokens = reply.split(".")
    return int(tokens[5] if len(tokens) == 9 else tokens[7])


def check_exactly_once(case: Case, replies: list[str], n: int) -> None:
    seqs = [stream_sequence(r) for r in replies]
    distinct = set(seqs)
    expected = set(range(1, n + 1))
    if len(seqs) != n or distinct != expected:
        missing = sorted(expected - distinct)
        extra = sorted(distinct - expected)
        fail(f"{case.label}: {len(seqs)} messages received, {len(distinct)} distinct, expected each of "
             f"sequences 1..{n} exactly once; {len(seqs) - len(distinct)} duplicates, "
             f"missing {missing[:10]}{'...' if len(missing) > 10 else ''}, unexpected {extra[:10]}")


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class RoundResult:
    rate: float       # msgs/s (latency cases: round trips/s)
    cpu_us: float     # client process CPU per message
    p50_us: float = 0.0
    p99_us: float = 0.0


def run_rounds(bench: Bench) -> tuple[dict[str, list[RoundResult]], list[tuple[float, float]]]:
    """An untimed warm-up on a small stream (inboxes, subscriptions, code paths), then the rounds, the case
    order rotating each round; right after the jss next() case, the bare loop crossing (both forms, us)."""
    for case in bench.cases:
        bench.run_case(case, warmup=True)
    crossing_us(bench.client, 200)
    results: dict[str, list[RoundResult]] = {c.key: [] for c in bench.cases}
    crossings = []
    for r in range(bench.args.rounds):
        for case in rotated(bench.cases, r):
            outcome, cpu_us = bench.run_case(case)
            res = RoundResult(bench.count_for(case) / outcome.seconds, cpu_us)
            if case.latency:
                res.p50_us = quantile(outcome.latencies, 0.50) * 1e6
                res.p99_us = quantile(outcome.latencies, 0.99) * 1e6
                detail = f"p50 {res.p50_us:>7.0f} us  p99 {res.p99_us:>7.0f} us"
            else:
                detail = f"{res.rate:>10,.0f} msgs/s"
            results[case.key].append(res)
            print(f"  round {r + 1}: {case.label:<42} {detail} {cpu_us:>7.1f} us CPU/msg", flush=True)
            if case.key == OVERHEAD_TARGET[1]:  # measured in the scheduling the jss case just ran in
                crossings.append(crossing_us(bench.client))
                print(f"  round {r + 1}: bare loop crossing p50 {crossings[-1][0]:.0f} us (lock hand-off "
                      f"{crossings[-1][1]:.0f} us)", flush=True)
    return results, crossings


# -- report -------------------------------------------------------------------------

def print_header(bench: Bench) -> None:
    a = bench.args
    print(f"bench_consume: {a.count:,} msgs/throughput case, {a.latency_count:,} round trips/latency case, "
          f"{a.size} B payload, {a.rounds} rounds, pull batch {BATCH}, explicit ack of every message")
    print(f"nats-py {version('nats-py')}, nats-server {bench.server_version()} at {bench.url}"
          f"{'' if a.server else ' (embedded)'}, jetstream_sync {jss.__version__}{library_revision()}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"load average at start: {load()}", flush=True)


def print_table(bench: Bench, results: dict[str, list[RoundResult]], crossings: list[tuple[float, float]]) -> None:
    rounds = bench.args.rounds
    rate = {k: statistics.median(x.rate for x in v) for k, v in results.items()}
    p50 = {k: statistics.median(x.p50_us for x in v) for k, v in results.items()}
    p99 = {k: statistics.median(x.p99_us for x in v) for k, v in results.items()}
    cpu = {k: statistics.median(x.cpu_us for x in v) for k, v in results.items()}
    throughput = [c for c in bench.cases if not c.latency]
    latency = [c for c in bench.cases if c.latency]

    head = (f"{'case':<42} {'msgs':>8} " + " ".join(f"{f'r{i + 1}':>9}" for i in range(rounds))
            + f" {'median':>9} {'CPU us/msg':>10}")
    print("\nthroughput: msgs/s per round, median; client process CPU per message (all threads), median")
    print(head)
    print("-" * len(head))
    for case in throughput:
        cells = " ".join(f"{x.rate:>9,.0f}" for x in results[case.key])
        print(f"{case.label:<42} {bench.count_for(case):>8,} {cells} {rate[case.key]:>9,.0f} {cpu[case.key]:>10.1f}")

    head = (f"{'case':<42} {'msgs':>8} " + " ".join(f"{f'r{i + 1} p50/p99':>15}" for i in range(rounds))
            + f" {'p50':>7} {'p99':>7} {'CPU us/msg':>10}")
    print("\nlatency: pull issued -> message in hand, us, per round; medians over rounds")
    print(head)
    print("-" * len(head))
    for case in latency:
        cells = " ".join(f"{f'{x.p50_us:.0f}/{x.p99_us:.0f}':>15}" for x in results[case.key])
        print(f"{case.label:<42} {bench.count_for(case):>8,} {cells} {p50[case.key]:>7.0f} {p99[case.key]:>7.0f} "
              f"{cpu[case.key]:>10.1f}")
    crossing = (statistics.median(c[0] for c in crossings), statistics.median(c[1] for c in crossings))
    for i, label in enumerate(("bare loop crossing (run a no-op)", "bare loop crossing (lock hand-off)")):
        cells = " ".join(f"{f'{c[i]:.0f}':>15}" for c in crossings)
        print(f"{label:<42} {'':>8} {cells} {crossing[i]:>7.0f}")

    print()
    for label, num, den, target in TARGETS:
        ratio = rate[num] / rate[den]
        verdict = "PASS" if ratio >= target else "BELOW"
        print(f"{label}: {ratio:5.2f}x  (target >= {target}x)  {verdict:<5}  "
              f"client CPU {cpu[num]:.1f} vs {cpu[den]:.1f} us/msg")
    label, num, den, target = LATENCY_TARGET
    ratio = p50[num] / p50[den]
    verdict = "PASS" if ratio <= target else "BELOW"
    print(f"{label}: {ratio:5.2f}x  (target <= {target}x)  {verdict}")
    label, num, den, target = OVERHEAD_TARGET
    print(overhead_line(label, p50[num], p50[den], crossing, target))
    print(f"(no target) consume(workers=4) vs asyncio ADR-37 loop: "
          f"{rate['jss_consume_4'] / rate['nats_continuous']:5.2f}x")
    print("verified: every case received each message exactly once (by stream sequence) and its consumer "
          "ended with num_ack_pending 0 and num_pending 0")
    print(f"load average at end: {load()}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    try:
        print_header(bench)
        bench.prepublish()
        results, crossings = run_rounds(bench)
        print_table(bench, results, crossings)
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
