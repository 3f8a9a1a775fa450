# Charter: reading a whole stream with batch direct gets (stream.get_batch) against reading it with a
# fetch(500) loop on a pull consumer, same server, same client, same run. Every case must see each
# stream sequence exactly once (get_batch: in order); rounds interleaved; public jss API only (and the
# number of requests the get_batch iterator made, printed).
"""Benchmark reading stored messages: ``stream.get_batch`` against a ``fetch(500)`` loop.

    .venv/bin/python benchmarks/bench_get_batch.py                 # 100,000 x 100 B, 3 rounds
    .venv/bin/python benchmarks/bench_get_batch.py --size 1024     # 1 KiB messages
    .venv/bin/python benchmarks/bench_get_batch.py --server nats://127.0.0.1:4222

Without ``--server`` an embedded nats-server (``jetstream_sync.server.NatsServer``) is started and
stopped. The messages are published once into a memory stream that allows direct gets; each round reads
all of them three ways: ``stream.get_batch(N)`` (no consumer, no acks), a ``fetch(max_messages=500)`` loop
on a fresh durable explicit-ack consumer acking every message (the usual way to read a stream), and the
same loop on an AckNone consumer (no acks; shown without a target). Prints msgs/s per round, the medians,
client CPU per message and the ratio the project targets: get_batch against the explicit-ack fetch loop,
at least 1.5x. Exits 1 if a case misses a message or sees one twice; BELOW a target is a report, not a
failure.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from typing import Callable

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

from _common import cpu_seconds, fail, load, rotated
from bench_consume import library_revision, stream_sequence

STREAM = "BENCH_GET_BATCH"
SUBJECT = "bench.get.batch"
#: The fetch loops' batch (and jss consume()'s default max_messages).
BATCH = 500
#: Long enough that no message is redelivered while a case runs on a loaded machine.
ACK_WAIT = 300.0
#: Upper bound on any one case; a healthy case takes about a second.
CASE_TIMEOUT = 300.0
#: How long acks may take to land once a case is done (not timed).
SETTLE_TIMEOUT = 15.0
#: (label, numerator case, denominator case, target ratio): higher is better; None: no target.
TARGETS = (
    ("get_batch vs fetch(500) loop, explicit ack", "get_batch", "fetch_ack", 1.5),
    ("get_batch vs fetch(500) loop, AckNone     ", "get_batch", "fetch_none", None),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100_000, help="messages in the stream (default 100000)")
    p.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported (default 3)")
    p.add_argument("--server", default=None, help="NATS URL; default: start an embedded nats-server")
    args = p.parse_args(argv)
    for name, minimum in (("count", 1), ("size", 0), ("rounds", 1)):
        if getattr(args, name) < minimum:
            p.error(f"--{name} must be >= {minimum}")
    return args


@dataclass
class Outcome:
    seconds: float
    seqs: list[int]
    note: str = ""


def read_get_batch(bench: "Bench", n: int) -> Outcome:
    seqs: list[int] = []
    append = seqs.append
    t0 = time.perf_counter()
    msgs = bench.stream.get_batch(n, timeout=CASE_TIMEOUT)
    for msg in msgs:
        append(msg.seq)
    seconds = time.perf_counter() - t0
    return Outcome(seconds, seqs, f"{msgs.requests} requests")  # type: ignore[attr-defined]


def read_fetch_loop(bench: "Bench", n: int, ack: bool) -> Outcome:
    acks = {"ack_policy": jss.AckPolicy.EXPLICIT, "ack_wait": ACK_WAIT} if ack else {"ack_policy": jss.AckPolicy.NONE}
    consumer = bench.stream.create_consumer(durable_name=f"bench_fetch_{next(bench.names)}", **acks)
    try:
        replies: list[str] = []
        append = replies.append
        deadline = time.monotonic() + CASE_TIMEOUT
        t0 = time.perf_counter()
        while len(replies) < n:
            if time.monotonic() > deadline:
                fail(f"fetch loop: {len(replies)} of {n} messages in {CASE_TIMEOUT:.0f}s")
            for msg in consumer.fetch(max_messages=min(BATCH, n - len(replies))):
                append(msg.reply)
                if ack:
                    msg.ack()
        seconds = time.perf_counter() - t0
        if ack:
            bench.settle(consumer)
        return Outcome(seconds, [stream_sequence(r) for r in replies])  # parsed after the timing
    finally:
        with contextlib.suppress(jss.ConsumerNotFoundError):
            consumer.delete()


@dataclass
class Case:
    key: str
    label: str
    run: Callable[["Bench", int], Outcome]
    ordered: bool  # must see the sequences in order, not only each once


CASES = [
    Case("get_batch", "jss  stream.get_batch(N)", read_get_batch, True),
    Case("fetch_ack", f"jss  fetch({BATCH}) loop, explicit ack", lambda b, n: read_fetch_loop(b, n, True), False),
    Case("fetch_none", f"jss  fetch({BATCH}) loop, AckNone", lambda b, n: read_fetch_loop(b, n, False), False),
]


class Bench:
    """Owns the server, the client and the pre-filled stream."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.names = itertools.count(1)
        self.stack = contextlib.ExitStack()
        try:
            self.url = args.server or self._start_server()
            self.client = self.stack.enter_context(jss.connect(self.url, name="bench-get-batch", timeout=30.0))
            self.js = self.client.jetstream()
        except BaseException:
            self.stack.close()
            raise

    def _start_server(self) -> str:
        server = NatsServer()
        server.start()
        self.stack.callback(server.stop)
        return server.url

    def close(self) -> None:
        with contextlib.suppress(jss.StreamNotFoundError):
            self.js.delete_stream(STREAM)
        self.stack.close()

    def prepublish(self) -> None:
        n, payload = self.args.count, b"x" * self.args.size
        with contextlib.suppress(jss.StreamNotFoundError):
            self.js.delete_stream(STREAM)
        self.stream = self.js.create_stream(name=STREAM, subjects=[SUBJECT], storage=jss.StorageType.MEMORY,
                                            allow_direct=True)
        js_async = self.client.jetstream(max_pending=1000)
        t0 = time.perf_counter()
        futures = [js_async.publish_async(SUBJECT, payload) for _ in range(n)]
        js_async.publish_async_complete(timeout=CASE_TIMEOUT)
        seconds = time.perf_counter() - t0
        failed = [f for f in futures if not f.done() or f.exception() is not None]
        stored = self.stream.info().state.messages
        if failed or stored != n:
            fail(f"pre-publishing: {len(failed)} publishes failed, the stream holds {stored} of {n}")
        print(f"pre-published {n:,} x {self.args.size} B into memory stream {STREAM} "
              f"({n / seconds:,.0f} msgs/s, jss publish_async)", flush=True)

    def settle(self, consumer: jss.Consumer) -> None:
        """Wait (untimed) until the server has counted every ack."""
        self.client.flush()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            info = consumer.info()
            if info.num_ack_pending == 0 and info.num_pending == 0:
                return
            if time.monotonic() > deadline:
                fail(f"after {SETTLE_TIMEOUT:.0f}s the consumer shows num_ack_pending {info.num_ack_pending}, "
                     f"num_pending {info.num_pending} (expected 0 and 0)")
            time.sleep(0.05)

    def run_case(self, case: Case) -> tuple[Outcome, float]:
        n = self.args.count
        cpu0 = cpu_seconds()
        outcome = case.run(self, n)
        cpu_us = (cpu_seconds() - cpu0) / n * 1e6
        expected = list(range(1, n + 1))
        got = outcome.seqs if case.ordered else sorted(outcome.seqs)
        if got != expected:
            missing = sorted(set(expected) - set(outcome.seqs))
            fail(f"{case.label}: {len(outcome.seqs)} messages, {len(set(outcome.seqs))} distinct, expected sequences "
                 f"1..{n} {'in order' if case.ordered else 'each once'}; missing {missing[:10]}")
        return outcome, cpu_us


@dataclass
class RoundResult:
    rate: float
    cpu_us: float


def run_rounds(bench: Bench) -> dict[str, list[RoundResult]]:
    """One untimed warm-up of every case, then the rounds, the case order rotating each round."""
    for case in CASES:
        bench.run_case(case)
    results: dict[str, list[RoundResult]] = {c.key: [] for c in CASES}
    for r in range(bench.args.rounds):
        for case in rotated(CASES, r):
            outcome, cpu_us = bench.run_case(case)
            res = RoundResult(bench.args.count / outcome.seconds, cpu_us)
            results[case.key].append(res)
            note = f"  ({outcome.note})" if outcome.note else ""
            print(f"  round {r + 1}: {case.label:<38} {res.rate:>10,.0f} msgs/s {cpu_us:>7.1f} us CPU/msg{note}",
                  flush=True)
    return results


def print_header(bench: Bench) -> None:
    a = bench.args
    print(f"bench_get_batch: {a.count:,} msgs x {a.size} B, {a.rounds} rounds; fetch loops pull {BATCH} at a time")
    print(f"nats-server {bench.client._conn.server_version} at {bench.url}{'' if a.server else ' (embedded)'}, "
          f"nats-py {version('nats-py')}, jetstream_sync {jss.__version__}{library_revision()}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"load average at start: {load()}", flush=True)


def print_table(bench: Bench, results: dict[str, list[RoundResult]]) -> None:
    rounds = bench.args.rounds
    rate = {k: statistics.median(x.rate for x in v) for k, v in results.items()}
    cpu = {k: statistics.median(x.cpu_us for x in v) for k, v in results.items()}
    head = (f"{'case':<38} {'msgs':>8} " + " ".join(f"{f'r{i + 1}':>9}" for i in range(rounds))
            + f" {'median':>9} {'CPU us/msg':>10}")
    print("\nmsgs/s per round, median; client process CPU per message (all threads), median")
    print(head)
    print("-" * len(head))
    for case in CASES:
        cells = " ".join(f"{x.rate:>9,.0f}" for x in results[case.key])
        print(f"{case.label:<38} {bench.args.count:>8,} {cells} {rate[case.key]:>9,.0f} {cpu[case.key]:>10.1f}")
    print()
    for label, num, den, target in TARGETS:
        ratio = rate[num] / rate[den]
        if target is None:
            print(f"(no target) {label}: {ratio:5.2f}x  client CPU {cpu[num]:.1f} vs {cpu[den]:.1f} us/msg")
        else:
            verdict = "PASS" if ratio >= target else "BELOW"
            print(f"{label}: {ratio:5.2f}x  (target >= {target}x)  {verdict:<5}  "
                  f"client CPU {cpu[num]:.1f} vs {cpu[den]:.1f} us/msg")
    print("verified: every case read each stream sequence exactly once (get_batch in order), and the explicit-ack "
          "consumer ended with nothing pending or unacked")
    print(f"load average at end: {load()}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    try:
        print_header(bench)
        bench.prepublish()
        print_table(bench, run_rounds(bench))
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
