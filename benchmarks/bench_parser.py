"""The wire-protocol parser alone: nats-py's Parser against jetstream_sync's, CPU only, no server.

Both parse the same prepared byte stream of --count JetStream-like messages (MSG and HMSG alternating,
--size B payloads, reply subjects like $JS.ACK.S.C.1.123.123.1700000000000000000.0), fed in --chunk
byte reads as the connection reads them, for one subscription with a raw handler that only counts:

  nats-py    nats.protocol.parser.Parser, each message awaited through Nats._process_msg (the client's
             raw fast path as it is without the new parser)
  jss        jetstream_sync._parser.Parser, the raw handler called as each message is read

Prints msgs/s per round, the medians and the ratio. Fails if a parser delivers other than --count messages.
"""
from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

from nats.protocol.parser import Parser as NatsPyParser

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jetstream_sync._nats import Nats  # noqa: E402
from jetstream_sync._parser import Parser  # noqa: E402

from _common import fail, load, rotated  # noqa: E402

SID = 7
HDR = b"NATS/1.0\r\nNats-Msg-Id: 0123456789abcdef\r\n\r\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=200_000, help="messages in the stream (default 200000)")
    p.add_argument("--size", type=int, default=128, help="payload bytes (default 128)")
    p.add_argument("--chunk", type=int, default=32768, help="bytes per read (default 32768)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported (default 5)")
    args = p.parse_args(argv)
    if args.count < 1 or args.size < 0 or args.chunk < 1 or args.rounds < 1:
        p.error("--count, --chunk and --rounds must be >= 1, --size >= 0")
    return args


def stream(count: int, size: int) -> bytes:
    """``count`` messages as a JetStream push or pull subscription receives them."""
    payload = b"x" * size
    parts = []
    for i in range(1, count + 1):
        reply = b"$JS.ACK.S.C.1.%d.%d.1700000000000000000.%d" % (i, i, count - i)
        if i % 2:
            parts.append(b"MSG orders.new %d %s %d\r\n%s\r\n" % (SID, reply, size, payload))
        else:
            parts.append(b"HMSG orders.new %d %s %d %d\r\n%s%s\r\n" % (SID, reply, len(HDR), len(HDR) + size, HDR,
                                                                        payload))
    return b"".join(parts)


class Client:
    """What a parser needs of the client: the raw handlers, stats and Nats's own ``_process_msg``."""

    _process_msg = Nats._process_msg

    def __init__(self, handler: Callable[..., None]) -> None:
        self._raw_handlers = {SID: handler}
        self.stats = {"in_msgs": 0, "in_bytes": 0}


def run(parser_class: Any, chunks: list[bytes]) -> tuple[float, int]:
    """Seconds to parse ``chunks``, and the messages the handler saw."""
    seen = [0]

    def handler(subject: bytes, reply: bytes, data: bytes, headers: bytes) -> None:
        seen[0] += 1

    parser = parser_class(Client(handler))

    async def feed() -> float:
        parse = parser.parse
        start = time.perf_counter()
        for chunk in chunks:
            await parse(chunk)
        return time.perf_counter() - start

    return asyncio.run(feed()), seen[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = stream(args.count, args.size)
    chunks = [data[i:i + args.chunk] for i in range(0, len(data), args.chunk)]
    cases = {"nats-py    Parser + Nats._process_msg": NatsPyParser, "jss        _parser.Parser": Parser}
    print(f"CPython {platform.python_version()}, nats-py {version('nats-py')}; {args.count:,} messages x "
          f"{args.size} B in {len(chunks):,} reads of {args.chunk:,} B, {args.rounds} rounds; load {load()}")
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        for name in rotated(list(cases), r):
            seconds, seen = run(cases[name], chunks)
            if seen != args.count:
                fail(f"{name.split()[0]} delivered {seen:,} of {args.count:,} messages")
            rates[name].append(args.count / seconds)
    print()
    print(f"{'case':<40}" + "".join(f"{'r' + str(r + 1):>12}" for r in range(args.rounds)) + f"{'median':>12}")
    print("-" * (40 + 12 * (args.rounds + 1)))
    medians = {}
    for name, values in rates.items():
        medians[name] = statistics.median(values)
        print(f"{name:<40}" + "".join(f"{v:>12,.0f}" for v in values) + f"{medians[name]:>12,.0f}")
    ours, theirs = medians["jss        _parser.Parser"], medians["nats-py    Parser + Nats._process_msg"]
    print()
    print(f"jss parser vs nats-py parser: {ours / theirs:.2f}x msgs/s ({1e6 / ours:.2f} vs {1e6 / theirs:.2f} us/msg)")
    print(f"load average at end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
