"""Push consumers: jetstream_sync's blocking js.subscribe() against nats-py's asyncio js.subscribe(),
the same work on the same server in the same run.

Cases (each reads --count messages of --size bytes already in a memory stream, through a new consumer):

  push + ack        nats-py js.subscribe(cb=..., manual_ack=True), `await msg.ack()` in the callback
                    jss     js.subscribe(handler=..., manual_ack=True, workers=1), `msg.ack()` in the handler
  (each with flow control off, and on: flow_control=True, idle_heartbeat=1s)
  ordered push      nats-py js.subscribe(cb=..., ordered_consumer=True)
                    jss     js.subscribe(handler=..., ordered_consumer=True)

Prints msgs/s per round, the medians, client CPU per message and the jss/nats-py ratios (targets:
>= 1.0x), plus the bare thread -> loop -> thread crossing of this run (what a blocking call costs at least).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import nats

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jetstream_sync as jss  # noqa: E402
from jetstream_sync.server import NatsServer  # noqa: E402

from _common import cpu_seconds, fail, load, rotated  # noqa: E402

STREAM = "BENCH_PUSH"
SUBJECT = "bench.push"
CASE_TIMEOUT = 120.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100_000, help="messages per case (default 100000)")
    p.add_argument("--size", type=int, default=128, help="payload bytes (default 128)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported (default 3)")
    p.add_argument("--server", default=None, help="NATS URL; default: start an embedded nats-server")
    args = p.parse_args(argv)
    if args.count < 1 or args.size < 0 or args.rounds < 1:
        p.error("--count and --rounds must be >= 1, --size >= 0")
    return args


@dataclass
class Result:
    seconds: float
    cpu: float


def _fc(flow_control: bool) -> dict[str, Any]:
    return {"flow_control": True, "idle_heartbeat": 1.0} if flow_control else {}


# -- nats-py ---------------------------------------------------------------------------------------

async def nats_push(njs: Any, n: int, flow_control: bool, ordered: bool) -> Result:
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()
    count = 0

    async def cb(msg: Any) -> None:
        nonlocal count
        if not ordered:
            await msg.ack()
        count += 1
        if count >= n and not done.done():
            done.set_result(None)

    kw: dict[str, Any] = {"ordered_consumer": True} if ordered else {
        "manual_ack": True, "durable": "np" + uuid.uuid4().hex[:8], **_fc(flow_control)}
    c0, t0 = cpu_seconds(), time.perf_counter()
    sub = await njs.subscribe(SUBJECT, cb=cb, stream=STREAM, pending_msgs_limit=1_000_000,
                              pending_bytes_limit=1 << 30, **kw)
    try:
        await asyncio.wait_for(done, CASE_TIMEOUT)
    except asyncio.TimeoutError:
        fail(f"nats-py push (fc={flow_control}, ordered={ordered}): {count} of {n} in {CASE_TIMEOUT:.0f}s")
    result = Result(time.perf_counter() - t0, cpu_seconds() - c0)
    await sub.unsubscribe()
    if not ordered:
        await njs.delete_consumer(STREAM, kw["durable"])
    return result


# -- jetstream_sync --------------------------------------------------------------------------------

def jss_push(js: jss.JetStream, n: int, flow_control: bool, ordered: bool) -> Result:
    done = threading.Event()
    count = 0
    problems: list[BaseException] = []

    def handler(msg: jss.Msg) -> None:
        nonlocal count
        if not ordered:
            msg.ack()
        count += 1
        if count >= n:
            done.set()

    kw: dict[str, Any] = {"ordered_consumer": True} if ordered else {
        "manual_ack": True, "durable": "jp" + uuid.uuid4().hex[:8], **_fc(flow_control)}
    c0, t0 = cpu_seconds(), time.perf_counter()
    sub = js.subscribe(SUBJECT, handler=handler, stream=STREAM, error_handler=problems.append,
                       pending_msgs_limit=1_000_000, pending_bytes_limit=1 << 30, **kw)
    finished = done.wait(CASE_TIMEOUT)
    result = Result(time.perf_counter() - t0, cpu_seconds() - c0)
    sub.unsubscribe(delete_consumer=not ordered)  # a named durable stays unless asked
    if not finished:
        fail(f"jss push (fc={flow_control}, ordered={ordered}): {count} of {n} in {CASE_TIMEOUT:.0f}s "
             f"(errors {problems!r})")
    if problems:
        fail(f"jss push (fc={flow_control}, ordered={ordered}): error_handler got {problems!r}")
    return result


def crossing_us(client: jss.Client, n: int = 2000) -> float:
    """Median of a bare thread -> loop -> thread round trip (a no-op coroutine run on the loop)."""
    lt = client._conn.loop_thread

    async def noop() -> None:
        return None

    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        lt.run(noop(), 5.0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server = None if args.server else NatsServer()
    if server is not None:
        server.start()
    url = args.server or server.url  # type: ignore[union-attr]
    loop = asyncio.new_event_loop()
    nc = loop.run_until_complete(nats.connect(url))
    njs = nc.jetstream()
    client = jss.connect(url, name="bench-push")
    try:
        js = client.jetstream()
        try:
            js.delete_stream(STREAM)
        except jss.StreamNotFoundError:
            pass
        js.create_stream(name=STREAM, subjects=[SUBJECT], storage="memory")
        payload = b"x" * args.size
        for _ in range(args.count):
            js.publish_async(SUBJECT, payload)
        js.publish_async_complete(timeout=120)

        cases: list[tuple[str, Callable[[], Result]]] = []
        for label, fc, ordered in (("push+ack, flow control off", False, False),
                                   ("push+ack, flow control on", True, False),
                                   ("ordered push", False, True)):
            cases.append((f"nats-py  {label}",
                          lambda fc=fc, o=ordered: loop.run_until_complete(nats_push(njs, args.count, fc, o))))
            cases.append((f"jss      {label}", lambda fc=fc, o=ordered: jss_push(js, args.count, fc, o)))
        results: dict[str, list[Result]] = {name: [] for name, _ in cases}
        print(f"{args.count:,} messages x {args.size} B per case, {args.rounds} rounds; load {load()}")
        for r in range(args.rounds):
            for name, run in rotated(cases, r):
                res = run()
                results[name].append(res)
                print(f"  round {r + 1}: {name:<40} {args.count / res.seconds:>10,.0f} msgs/s "
                      f"{res.cpu / args.count * 1e6:6.1f} us CPU/msg", flush=True)
        print()
        print(f"{'case':<42}{'median msgs/s':>14}{'CPU us/msg':>12}")
        medians = {}
        for name, rs in results.items():
            rate = statistics.median(args.count / x.seconds for x in rs)
            cpu = statistics.median(x.cpu / args.count * 1e6 for x in rs)
            medians[name] = rate
            print(f"{name:<42}{rate:>14,.0f}{cpu:>12.1f}")
        print()
        for label in ("push+ack, flow control off", "push+ack, flow control on", "ordered push"):
            ratio = medians[f"jss      {label}"] / medians[f"nats-py  {label}"]
            verdict = "PASS" if ratio >= 1.0 else "BELOW"
            print(f"{label:<28} jss / nats-py: {ratio:5.2f}x  (target >= 1.0x)  {verdict}")
        print(f"bare thread -> loop -> thread crossing: {crossing_us(client):.0f} us (median)")
        print(f"load average at end: {load()}")
        js.delete_stream(STREAM)
    finally:
        client.close()
        loop.run_until_complete(nc.close())
        loop.close()
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
