# Charter: a soak run, not a test (issue 5, item 4): consume 1,000,000 messages with acks through
# consume(workers=2) and watch this process's memory. RSS (/proc/self/status VmRSS) and the consume
# buffer are sampled every 0.5 s; the run fails (exit 1) if RSS grows by 20 MB or more, the buffer ever
# holds more than max_messages, or a message is missed or left unacked. Public jss API only.
"""Soak jetstream_sync's consume() and watch memory.

    .venv/bin/python benchmarks/soak_consume.py                    # 1,000,000 x 64 B, embedded server
    .venv/bin/python benchmarks/soak_consume.py --count 200000     # a shorter run
    .venv/bin/python benchmarks/soak_consume.py --server nats://127.0.0.1:4222
    .venv/bin/python benchmarks/soak_consume.py --push --size 1024   # a push consumer with flow control

With ``--push`` the consumer is a push consumer with flow control (idle heartbeat 1 s) read by
``consume(handler, workers=1)`` whose handler sleeps 1 ms every 100 messages: a slow handler must
pause the server (flow control) instead of growing memory, and nothing may be dropped.

The messages are published first, with ``publish_async``, into a memory stream, by a child process (so
the publishing leaves nothing in this process's heap to hide or inflate the consumer's memory). Then
this process starts ``consumer.consume(handler, workers=2)`` (handler: ``msg.ack()``) on a durable
explicit-ack consumer and samples, every 0.5 s, its RSS and ``handle.stats.buffered``. It prints the
RSS at the start (just before ``consume()``), its peak, at the end (after the handle closed), the growth
(peak - start), the RSS at each tenth of the run, and the largest buffered count against the limit.

Exits 1 when: RSS peak - start >= ``--max-growth-mb`` (20), buffered > max_messages in any sample,
fewer than ``--count`` messages handled, or the consumer ends with messages pending or unacked.
"""
from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import threading
import time

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

STREAM = "SOAK"
SUBJECT = "soak.consume"
SAMPLE_EVERY = 0.5


def rss_bytes() -> int:
    """This process's resident set size, from /proc/self/status (VmRSS, in kB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def mb(n: float) -> str:
    return f"{n / 1e6:8.1f} MB"


def publish(url: str, count: int, size: int) -> None:
    """Child process: create the memory stream and fill it with ``count`` messages of ``size`` bytes."""
    payload = os.urandom(size)
    with jss.connect(url, name="soak-publisher", timeout=30.0) as client:
        js = client.jetstream(max_pending=4000)
        try:
            js.delete_stream(STREAM)
        except jss.StreamNotFoundError:
            pass
        js.create_stream(name=STREAM, subjects=[SUBJECT], storage="memory")
        started = time.monotonic()
        failed = 0
        for i in range(count):
            js.publish_async(SUBJECT, payload)
            if i % 100_000 == 99_999:
                print(f"  published {i + 1:>9,}", flush=True)
        js.publish_async_complete(timeout=60)
        took = time.monotonic() - started
        stored = js.stream(STREAM).info().state.messages
        if stored != count:
            failed = count - stored
        print(f"  published {count:,} x {size} B in {took:.1f}s ({count / took:,.0f} msgs/s); stored {stored:,}",
              flush=True)
    sys.exit(1 if failed else 0)


class Sampler(threading.Thread):
    """Samples RSS and the consume buffer every SAMPLE_EVERY seconds until stopped."""

    def __init__(self, handle: jss.ConsumeHandle) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.handle = handle
        self.samples: list[tuple[float, int, int, int]] = []  # (time, rss, buffered, handled)
        self.done = threading.Event()

    def sample(self) -> None:
        stats = self.handle.stats
        self.samples.append((time.monotonic(), rss_bytes(), stats.buffered, stats.handled))

    def run(self) -> None:
        while not self.done.wait(SAMPLE_EVERY):
            self.sample()


def soak(url: str, args: argparse.Namespace) -> list[str]:
    """Consume every message; return the list of failures (empty when the run passed)."""
    failures: list[str] = []
    with jss.connect(url, name="soak-consumer", timeout=30.0) as client:
        js = client.jetstream()
        count = args.count
        taken = 0

        def handler(msg: jss.Msg) -> None:
            msg.ack()

        def slow_handler(msg: jss.Msg) -> None:
            nonlocal taken
            taken += 1
            if taken % 100 == 0:
                time.sleep(0.001)
            msg.ack()

        gc.collect()
        start_rss = rss_bytes()
        started = time.monotonic()
        on_error = lambda exc: failures.append(f"error_handler got {exc!r}")  # noqa: E731
        if args.push:
            consumer = js.create_push_consumer(STREAM, durable_name="soak", deliver_subject="soak.deliver",
                                               ack_policy="explicit", ack_wait=120.0, flow_control=True,
                                               idle_heartbeat=1.0, max_ack_pending=args.max_ack_pending)
            handle = consumer.consume(slow_handler, workers=1, error_handler=on_error)
        else:
            consumer = js.create_consumer(STREAM, durable_name="soak", ack_policy="explicit", ack_wait=120.0)
            handle = consumer.consume(handler, workers=2, max_messages=args.max_messages, error_handler=on_error)
        sampler = Sampler(handle)
        sampler.sample()
        sampler.start()
        deadline = started + args.max_seconds
        next_report = 0.0
        while handle.stats.handled < count and time.monotonic() < deadline and not handle.closed:
            time.sleep(0.05)  # the main thread only watches; the sampler measures
            now = time.monotonic()
            if now >= next_report:
                s = sampler.samples[-1]
                print(f"  {now - started:6.1f}s handled {s[3]:>9,}  rss {mb(s[1])}  buffered {s[2]:>4}", flush=True)
                next_report = now + 5.0
        took = time.monotonic() - started
        handled = handle.stats.handled
        dropped = handle.stats.dropped
        handle.drain()
        if not handle.wait(30):
            failures.append("the consume handle did not close within 30 s of drain()")
        sampler.done.set()
        sampler.join()
        sampler.sample()
        client.flush(timeout=30)
        settle = time.monotonic() + 15
        while True:
            info = consumer.info()
            if (info.num_pending == 0 and info.num_ack_pending == 0) or time.monotonic() > settle:
                break
            time.sleep(0.1)
        gc.collect()
        end_rss = rss_bytes()
        if handle.error is not None:
            failures.append(f"the handle ended with {handle.error!r}")
        if handled < count:
            failures.append(f"only {handled:,} of {count:,} messages handled within {args.max_seconds:.0f}s")
        if dropped:
            failures.append(f"{dropped:,} messages dropped")
        if info.num_pending or info.num_ack_pending:
            failures.append(f"consumer ends with {info.num_pending} pending and {info.num_ack_pending} unacked")
        try:
            js.delete_stream(STREAM)
        except jss.JetStreamError:
            pass

    samples = sampler.samples
    peak_rss = max(max(s[1] for s in samples), end_rss)
    max_buffered = max(s[2] for s in samples)
    growth = peak_rss - start_rss
    print()
    how = ("push, flow control, consume(workers=1), 1 ms sleep every 100" if args.push
           else f"consume(workers=2, max_messages={args.max_messages})")
    print(f"consumed {handled:,} messages with acks in {took:.1f}s ({handled / took:,.0f} msgs/s), "
          f"{how}; {len(samples)} samples every {SAMPLE_EVERY}s; dropped {dropped}")
    print("RSS by progress:  " + "  ".join(
        f"{pct}%={rss_at(samples, count * pct // 100) / 1e6:.1f}" for pct in range(0, 101, 10)) + "  (MB)")
    print(f"RSS start     {mb(start_rss)}   (just before consume())")
    print(f"RSS peak      {mb(peak_rss)}")
    print(f"RSS end       {mb(end_rss)}   (after the handle closed)")
    print(f"RSS growth    {mb(growth)}   (peak - start; limit < {args.max_growth_mb} MB)  "
          f"{'PASS' if growth < args.max_growth_mb * 1e6 else 'FAIL'}")
    print(f"              {mb(end_rss - start_rss)}   (end - start)")
    limit = 65536 if args.push else args.max_messages
    print(f"max buffered  {max_buffered:>8}      (limit {limit})  {'PASS' if max_buffered <= limit else 'FAIL'}")
    if growth >= args.max_growth_mb * 1e6:
        failures.append(f"RSS grew by {growth / 1e6:.1f} MB (limit {args.max_growth_mb} MB)")
    if max_buffered > limit:
        failures.append(f"{max_buffered} messages buffered, above the limit {limit}")
    return failures


def rss_at(samples: list[tuple[float, int, int, int]], handled: int) -> int:
    """RSS of the first sample taken once ``handled`` messages were handled (the last one if none)."""
    for s in samples:
        if s[3] >= handled:
            return s[1]
    return samples[-1][1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1_000_000, help="messages to consume (default 1,000,000)")
    parser.add_argument("--size", type=int, default=64, help="payload bytes (default 64)")
    parser.add_argument("--max-messages", type=int, default=500, help="consume() buffer limit (default 500)")
    parser.add_argument("--max-growth-mb", type=float, default=20.0, help="RSS growth limit in MB (default 20)")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="give up consuming after this long")
    parser.add_argument("--push", action="store_true",
                        help="a push consumer with flow control and a handler that sleeps 1 ms every 100 messages")
    parser.add_argument("--max-ack-pending", type=int, default=-1,
                        help="--push: the consumer's max_ack_pending (default -1: unlimited, so flow control alone "
                             "paces the server; its window grows to 32 MiB in flight)")
    parser.add_argument("--server", help="a NATS URL; default: an embedded nats-server")
    parser.add_argument("--publish-only", metavar="URL", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.publish_only:
        publish(args.publish_only, args.count, args.size)
        return 0

    print(f"soak: {args.count:,} messages x {args.size} B, python {sys.version.split()[0]}, "
          f"jetstream_sync {getattr(jss, '__version__', '?')}, "
          f"load {os.getloadavg()[0]:.2f}")
    server = None
    url = args.server
    if url is None:
        server = NatsServer().start()
        url = server.url
    try:
        pub = subprocess.run([sys.executable, __file__, "--publish-only", url, "--count", str(args.count),
                              "--size", str(args.size)])
        if pub.returncode != 0:
            print("FAILED: publishing did not store every message")
            return 1
        failures = soak(url, args)
    finally:
        if server is not None:
            server.stop()
    print(f"load {os.getloadavg()[0]:.2f}")
    if failures:
        for f in failures:
            print(f"FAILED: {f}")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
