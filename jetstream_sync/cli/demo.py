# ``jetstream-sync demo``: the main job end to end (create ORDERS, publish, deduplicate, fetch,
# ack, read state back, delete ORDERS), against -s URL or an embedded server.
# Rule: this module uses only the public API, as a user's script would. The embedded server is
# imported when the demo starts one (start-up time of the other commands).
from __future__ import annotations

import argparse
import collections
import json
import time
from typing import Any

import jetstream_sync as jss

from ._args import UsageError, int_at_least, opt
from ._output import Output, progress_bar
from ._session import Session

__all__ = ["demo", "register"]

MIN_COUNT = 32  # the demo fetches 3 x 10 orders and then one more with next()


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``demo`` command to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser(
        "demo", parents=[common], help="run the ORDERS demo end to end",
        description="Create a stream ORDERS, publish orders, show deduplication, fetch and ack with a durable "
                    "consumer, print the state, delete ORDERS. Runs against -s/--server when given, else against "
                    "an embedded nats-server ($NATS_URL is not used: the demo deletes a stream named ORDERS).")
    p.add_argument("--count", type=int_at_least(MIN_COUNT), default=300, metavar="N",
                   help=f"orders to publish (default 300, at least {MIN_COUNT})")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace, session: Session, out: Output) -> int:
    """Run :func:`demo` with the session's connection options; human output only."""
    if out.json:
        raise UsageError("demo: --json is not supported (the demo prints a walkthrough)")
    return demo(opt(args, "server"), args.count, progress=args.progress, connect_options=session.connect_options(),
                timeout=session.timeout)


def _print(title: str, value: object) -> None:
    print(f"{title:<28} {value}")


def demo(server_url: str | None, count: int, *, progress: bool | None = None,
         connect_options: dict[str, Any] | None = None, timeout: float = 5.0) -> int:
    """Create ORDERS, publish ``count`` orders, read some back, show state, delete ORDERS.

    Starts (and stops) an embedded nats-server when ``server_url`` is None. Blocks for the
    whole run; prints to stdout, the progress bar to stderr. Returns 0; raises what the
    client raises (NoServersError, JetStreamError, ...).
    """
    if count < MIN_COUNT:
        raise ValueError(f"count must be at least {MIN_COUNT}, got {count}")
    embedded = None
    if server_url is None:
        from ..server import NatsServer  # late: only a demo without -s starts a server

        embedded = NatsServer().start()
        server_url = embedded.url
        print(f"started an embedded nats-server at {server_url}")
    try:
        with jss.connect(server_url, name="jetstream-sync-demo", timeout=timeout, **(connect_options or {})) as client:
            js = client.jetstream()
            try:
                js.delete_stream("ORDERS")
            except jss.StreamNotFoundError:
                pass
            stream = js.create_stream(name="ORDERS", subjects=["ORDERS.*"], storage="file",
                                      duplicate_window=120.0)
            print(f"created stream {stream.name} capturing {stream.cached_info.config.subjects}")

            started = time.perf_counter()
            last = _publish_orders(js, count, progress)
            elapsed = time.perf_counter() - started
            print(f"published {count} orders (last seq {last}) in {elapsed * 1000:.0f} ms")
            dup = js.publish("ORDERS.new", b"again", msg_id="order-0")
            print(f"republished order-0: duplicate={dup.duplicate} (deduplicated by Nats-Msg-Id)")

            consumer = stream.create_consumer(durable_name="billing", ack_policy="explicit")
            _bill(consumer)
            _report(js, stream, consumer)
            js.delete_stream("ORDERS")
        print("closed the client")
    finally:
        if embedded is not None:
            embedded.stop()
            print("stopped the embedded nats-server")
    return 0


def _bill(consumer: Any) -> None:
    """Read 31 orders back: three fetches of 10, then one next() with its ack confirmed."""
    total = 0
    for _ in range(3):
        batch = consumer.fetch(max_messages=10, expires=2.0)
        for msg in batch:
            order = json.loads(msg.data)
            total += order["amount"]
            msg.ack()
    one = consumer.next(timeout=2.0)
    md = one.metadata
    print(f"next(): order {json.loads(one.data)['order']} stream seq {md.sequence.stream}, "
          f"delivered {md.num_delivered}x, {md.num_pending} pending")
    one.double_ack()
    print(f"billed 31 orders, total amount {total + json.loads(one.data)['amount']}")


def _report(js: Any, stream: Any, consumer: Any) -> None:
    """Print what the server now says of the stream and the consumer."""
    info = stream.info()
    cinfo = consumer.info()
    _print("stream messages", info.state.messages)
    _print("stream bytes", info.state.bytes)
    _print("stream first..last seq", f"{info.state.first_seq}..{info.state.last_seq}")
    _print("consumer delivered", cinfo.delivered.stream_seq)
    _print("consumer ack floor", cinfo.ack_floor.stream_seq)
    _print("consumer pending", cinfo.num_pending)
    _print("consumer ack pending", cinfo.num_ack_pending)
    last_paid = stream.get_last_msg("ORDERS.paid")
    _print("last paid order", f"seq {last_paid.seq}: {last_paid.data.decode()}")
    _print("streams on the server", ", ".join(js.stream_names()))


def _publish_orders(js: jss.JetStream, count: int, progress: bool | None) -> int:
    """Publish orders 0..count-1 (order 0 synchronously, the rest async); return the last sequence."""
    with progress_bar(count, progress, desc="publishing orders", unit="order") as bar:
        ack = js.publish("ORDERS.new", json.dumps({"order": 0, "amount": 10}).encode(), msg_id="order-0")
        bar.update(1)
        last = ack.seq
        pending: collections.deque = collections.deque()
        for i in range(1, count):
            pending.append(js.publish_async(f"ORDERS.{'new' if i % 3 else 'paid'}",
                                            json.dumps({"order": i, "amount": 10 + i % 90}).encode(),
                                            msg_id=f"order-{i}"))
            while pending and pending[0].done():
                last = max(last, pending.popleft().result().seq)
                bar.update(1)
        js.publish_async_complete()
        for fut in pending:
            last = max(last, fut.result().seq)
            bar.update(1)
    return last
