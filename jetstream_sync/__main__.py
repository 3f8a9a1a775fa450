# The command line: ``jetstream-sync demo`` runs the main job end to end.
#
# Rule: this module uses only the public API, as a user's script would.
"""``jetstream-sync`` / ``python -m jetstream_sync``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Sequence

import jetstream_sync as jss


def _print(title: str, value: object) -> None:
    print(f"{title:<28} {value}")


def demo(server_url: str | None, count: int, out=print) -> int:
    """Create ORDERS, publish ``count`` orders, read some back, show state. Returns an exit code."""
    embedded = None
    if server_url is None:
        from jetstream_sync.server import NatsServer

        embedded = NatsServer().start()
        server_url = embedded.url
        print(f"started an embedded nats-server at {server_url}")
    try:
        with jss.connect(server_url, name="jetstream-sync-demo") as client:
            js = client.jetstream()
            try:
                js.delete_stream("ORDERS")
            except jss.StreamNotFoundError:
                pass
            stream = js.create_stream(name="ORDERS", subjects=["ORDERS.*"], storage="file",
                                      duplicate_window=120.0)
            print(f"created stream {stream.name} capturing {stream.cached_info.config.subjects}")

            started = time.perf_counter()
            ack = js.publish("ORDERS.new", json.dumps({"order": 0, "amount": 10}).encode(), msg_id="order-0")
            futures = [
                js.publish_async(f"ORDERS.{'new' if i % 3 else 'paid'}",
                                 json.dumps({"order": i, "amount": 10 + i % 90}).encode(), msg_id=f"order-{i}")
                for i in range(1, count)
            ]
            js.publish_async_complete()
            last = max(f.result().seq for f in futures) if futures else ack.seq
            elapsed = time.perf_counter() - started
            print(f"published {count} orders (last seq {last}) in {elapsed * 1000:.0f} ms")
            dup = js.publish("ORDERS.new", b"again", msg_id="order-0")
            print(f"republished order-0: duplicate={dup.duplicate} (deduplicated by Nats-Msg-Id)")

            consumer = stream.create_consumer(durable_name="billing", ack_policy="explicit")
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
            js.delete_stream("ORDERS")
        print("closed the client")
    finally:
        if embedded is not None:
            embedded.stop()
            print("stopped the embedded nats-server")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jetstream-sync", description="jetstream_sync command line")
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="run the ORDERS demo end to end")
    p_demo.add_argument("--server", metavar="URL", default=None,
                        help="NATS server URL (default: start an embedded nats-server)")
    p_demo.add_argument("--count", type=int, default=300, help="orders to publish (default 300)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.count < 32:
            parser.error("--count must be at least 32")
        return demo(args.server, args.count)
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
