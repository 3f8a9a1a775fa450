# _parser: the connection's wire-protocol parser. Without a server, against a recording stand-in for
# the client: for the same byte stream it makes the calls nats-py's own Parser makes, in the same
# order, with the same arguments, however the stream is cut into reads; messages of a raw
# subscription go to their handler (counted as Nats._process_msg counts them) instead of an awaited
# _process_msg; a malformed line raises ProtocolError. Then against a real server: messages of 0 B to
# 1 MiB, with and without headers and reply, come back exactly through a raw subscription and a
# nats-py subscription on one connection.
from __future__ import annotations

import asyncio
import json
import logging
import random
import uuid

import pytest
from nats.errors import ProtocolError
from nats.protocol.parser import AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD
from nats.protocol.parser import Parser as NatsPyParser

from conftest import wait_for
from jetstream_sync._headers import encode_headers
from jetstream_sync._parser import Parser

RAW = 1  # the sid with a raw handler in these streams; every other sid goes through _process_msg


class Recorder:
    """A stand-in for the client: records every call a parser makes on it, in order."""

    def __init__(self, raw_sids: tuple[int, ...] = ()) -> None:
        self.calls: list[tuple] = []
        self.paths: list[str] = []
        self.stats = {"in_msgs": 0, "in_bytes": 0}
        self._raw_handlers = {sid: self._raw_handler(sid) for sid in raw_sids}

    def _raw_handler(self, sid: int):
        def handler(subject: bytes, reply: bytes, data: bytes, headers: bytes) -> None:
            assert type(headers) is bytes
            self._record(sid, subject, reply, data, headers or None)
            self.paths.append("raw")
        return handler

    def _record(self, sid, subject, reply, data, hdr) -> None:
        for value in (subject, reply, data) + ((hdr,) if hdr is not None else ()):
            assert type(value) is bytes, f"{value!r} is a {type(value).__name__}"
        self.calls.append(("msg", sid, subject, reply, data, hdr))

    async def _process_msg(self, sid, subject, reply, data, headers) -> None:
        self._record(sid, subject, reply, data, headers)
        self.paths.append("awaited")

    async def _process_ping(self) -> None:
        self.calls.append(("ping",))

    async def _process_pong(self) -> None:
        self.calls.append(("pong",))

    async def _process_err(self, err: str) -> None:
        self.calls.append(("err", err))

    async def _process_info(self, info: dict) -> None:
        self.calls.append(("info", info))


def msg(subject: str, sid: int, payload: bytes, reply: str = "") -> bytes:
    return f"MSG {subject} {sid} {reply + ' ' if reply else ''}{len(payload)}\r\n".encode() + payload + b"\r\n"


def hmsg(subject: str, sid: int, hdr: bytes, payload: bytes, reply: str = "") -> bytes:
    head = f"HMSG {subject} {sid} {reply + ' ' if reply else ''}{len(hdr)} {len(hdr) + len(payload)}\r\n"
    return head.encode() + hdr + payload + b"\r\n"


ACK = "$JS.ACK.S.C.1.123.123.1700000000000000000.0"
HDR = b"NATS/1.0\r\nX-Key: v1\r\nX-Key: v2\r\n\r\n"
STATUS_408 = b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 10\r\nNats-Pending-Bytes: 0\r\n\r\n"
STATUS_100 = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
TRICKY = b"MSG x 1 5\r\nhello\r\n" + b"\r\n" + b"PING\r\n"  # a payload that looks like protocol

STREAM = b"".join([
    b'INFO {"server_id":"S1","max_payload":1048576,"headers":true}\r\n',
    msg("a.b", RAW, b"hello", ACK),
    msg("a.b", 2, b"hello", ACK),
    msg("a.c", RAW, b"no reply"),
    msg("a.c", 2, b"no reply"),
    msg("empty", RAW, b""),
    msg("empty", 2, b"", "_INBOX.r"),
    hmsg("h.1", RAW, HDR, b"with headers", ACK),
    hmsg("h.1", 2, HDR, b"with headers"),
    hmsg("_INBOX.x", RAW, STATUS_408, b""),  # header only: a status message
    hmsg("_INBOX.x", 2, STATUS_100, b"", "$JS.FC.S.C.1"),
    b"PING\r\n",
    msg("t", RAW, TRICKY, ACK),
    msg("t", 3, TRICKY),
    hmsg("t", RAW, HDR, TRICKY + b"MSG ", ACK),
    b"PONG\r\n",
    b"+OK\r\n",
    b"-ERR 'Permissions Violation for Publish to \"denied.x\"'\r\n",
    msg("b", RAW, bytes(range(256)) * 3, "r"),
    b'INFO {"server_id":"S1","connect_urls":["127.0.0.1:4223"]}\r\n',
    msg("tail", 2, b"last\r\n"),
])

SMALL = b"".join([
    msg("a", RAW, b"xy\r\n", "r"),
    b"PING\r\n",
    hmsg("h", 2, b"NATS/1.0\r\n\r\n", b""),
    msg("a", 2, b""),
    hmsg("h", RAW, b"NATS/1.0\r\nK: v\r\n\r\n", b"z"),
    b"+OK\r\n",
])


def run(coro):
    return asyncio.run(coro)


async def _feed(parser, chunks) -> None:
    for chunk in chunks:
        await parser.parse(chunk)


def reference(stream: bytes) -> list[tuple]:
    """What nats-py's own Parser makes of ``stream``, fed whole."""
    nc = Recorder()
    run(_feed(NatsPyParser(nc), [stream]))
    return nc.calls


def ours(chunks, raw_sids=(RAW,)) -> Recorder:
    """Our parser fed ``chunks``, beside nats-py's: after every read both have made the same calls."""
    nc, theirs = Recorder(raw_sids), Recorder()
    parser, reference_parser = Parser(nc), NatsPyParser(theirs)

    async def feed() -> None:
        for i, chunk in enumerate(chunks):
            await reference_parser.parse(chunk)
            await parser.parse(chunk)
            assert nc.calls == theirs.calls, f"after read {i}"

    run(feed())
    assert parser.buf == b"" and parser.state == AWAITING_CONTROL_LINE, "a complete stream leaves nothing unparsed"
    return nc


def _check(nc: Recorder, expected: list[tuple]) -> None:
    assert nc.calls == expected
    raw = [c for c in expected if c[0] == "msg" and c[1] == RAW]
    assert nc.paths == ["raw" if c[1] == RAW else "awaited" for c in expected if c[0] == "msg"]
    assert nc.stats == {"in_msgs": len(raw), "in_bytes": sum(len(c[4]) for c in raw)}


def test_the_reference_stream_holds_every_case():
    calls = reference(STREAM)
    assert [c[0] for c in calls].count("msg") == 15
    assert {c[0] for c in calls} == {"msg", "ping", "pong", "err", "info"}
    assert ("msg", RAW, b"_INBOX.x", b"", b"", STATUS_408) in calls
    assert ("msg", 2, b"empty", b"_INBOX.r", b"", None) in calls


def test_a_stream_fed_whole_makes_the_calls_nats_py_makes():
    _check(ours([STREAM]), reference(STREAM))


def test_a_stream_fed_one_byte_at_a_time_makes_the_calls_nats_py_makes():
    _check(ours([STREAM[i:i + 1] for i in range(len(STREAM))]), reference(STREAM))


def test_a_stream_cut_at_any_point_makes_the_calls_nats_py_makes():
    expected = reference(SMALL)
    for i in range(len(SMALL) + 1):
        _check(ours([SMALL[:i], SMALL[i:]]), expected)
    for i in range(1, len(SMALL)):  # and in three reads, the middle one short
        for j in range(i, min(i + 12, len(SMALL))):
            _check(ours([SMALL[:i], SMALL[i:j], SMALL[j:]]), expected)


def test_a_stream_in_reads_of_random_sizes_makes_the_calls_nats_py_makes():
    expected = reference(STREAM)
    rng = random.Random(7)
    for _ in range(50):
        chunks, pos = [], 0
        while pos < len(STREAM):
            n = rng.choice([1, 2, 3, 7, 30, 100, 500, 4096])
            chunks.append(STREAM[pos:pos + n])
            pos += n
        _check(ours(chunks), expected)


def test_without_raw_handlers_every_message_is_awaited_as_nats_py_does():
    nc = ours([STREAM], raw_sids=())
    assert nc.calls == reference(STREAM)
    assert set(nc.paths) == {"awaited"} and nc.stats == {"in_msgs": 0, "in_bytes": 0}


def test_a_large_payload_arriving_in_many_reads_is_delivered_once_it_is_complete():
    payload = random.Random(3).randbytes(1 << 20)
    stream = hmsg("big", RAW, HDR, payload, ACK) + msg("big", 2, payload) + b"PING\r\n"
    nc = Recorder((RAW,))
    parser = Parser(nc)

    async def feed() -> None:
        cut = 32768
        await parser.parse(stream[:cut])
        assert nc.calls == [] and parser.state == AWAITING_MSG_PAYLOAD and parser.buf
        for pos in range(cut, len(stream), cut):
            await parser.parse(stream[pos:pos + cut])

    run(feed())
    _check(nc, reference(stream))
    assert nc.calls[0][4] == payload and nc.calls[1][4] == payload


@pytest.mark.parametrize("line", [
    b"MSG foo bar 5\r\nhello\r\n",  # the sid is not a number
    b"HMSG foo 1 x 5\r\nhello\r\n",  # nor the header size
    b"FOO bar\r\n",  # no such operation
    b"\r\n",
])
def test_a_malformed_line_raises_protocol_error_as_nats_py_does(line):
    stream = msg("ok", RAW, b"before") + line + msg("ok", RAW, b"after")
    for parser_class, nc in ((NatsPyParser, Recorder()), (Parser, Recorder((RAW,)))):
        with pytest.raises(ProtocolError):
            run(_feed(parser_class(nc), [stream]))
        assert [c[4] for c in nc.calls] == [b"before"], parser_class


def test_a_failing_raw_handler_is_logged_and_the_next_message_still_arrives(caplog):
    nc = Recorder((RAW,))
    good = nc._raw_handlers[RAW]

    def flaky(subject, reply, data, headers):
        if data == b"boom":
            raise RuntimeError("handler bug")
        good(subject, reply, data, headers)

    nc._raw_handlers[RAW] = flaky
    with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
        run(_feed(Parser(nc), [msg("s", RAW, b"boom") + msg("s", RAW, b"next")]))
    assert [c[4] for c in nc.calls] == [b"next"]
    assert nc.stats == {"in_msgs": 2, "in_bytes": 8}
    assert [r.getMessage() for r in caplog.records] == ["jetstream_sync: inbox handler failed"]


def test_reset_drops_the_unparsed_tail():
    stream = msg("s", RAW, b"payload")
    nc = Recorder((RAW,))
    parser = Parser(nc)

    async def feed() -> None:
        await parser.parse(stream[:-3])
        parser.reset()
        assert parser.buf == b"" and parser.state == AWAITING_CONTROL_LINE
        await parser.parse(stream)

    run(feed())
    assert [c[4] for c in nc.calls] == [b"payload"]


@pytest.mark.parametrize("parser_class", [NatsPyParser, Parser])
def test_a_reset_during_an_awaited_call_ends_that_parse(parser_class):
    # A reconnect resets the parser from inside the client's handling of a PING or an -ERR: nothing
    # after it in the same read is delivered, the next read starts afresh.
    nc = Recorder()
    parser = parser_class(nc)

    async def ping_then_reset() -> None:
        nc.calls.append(("ping",))
        parser.reset()

    nc._process_ping = ping_then_reset
    run(_feed(parser, [msg("s", 2, b"one") + b"PING\r\n" + msg("s", 2, b"two"), msg("s", 2, b"three")]))
    assert [c[4] if c[0] == "msg" else c[0] for c in nc.calls] == [b"one", "ping", b"three"]


def test_info_is_handed_over_decoded():
    info = {"server_id": "S", "connect_urls": ["127.0.0.1:%d" % p for p in range(4222, 4500)]}  # a long line
    stream = b"INFO " + json.dumps(info).encode() + b"\r\n"
    _check(ours([stream[i:i + 100] for i in range(0, len(stream), 100)]), [("info", info)])


# --- against a real server -----------------------------------------------------------------------

SIZES = [0, 1, 2, 127, 128, 1000, 4095, 4096, 32767, 32768, 32769, 65536, 100_000, 500_000, 1 << 20]


@pytest.mark.timeout(60)
def test_messages_of_0_b_to_1_mib_come_back_exactly_through_raw_and_nats_py_subscriptions(client):
    conn = client._conn
    nc = conn._nc
    assert isinstance(nc._ps, Parser)
    prefix = f"parser_{uuid.uuid4().hex[:10]}"
    raw_got: list[tuple] = []
    plain_got: list[tuple] = []

    async def on_msg(m) -> None:
        plain_got.append((m.subject, m.reply, m.data, m.headers))

    raw_sub = conn.call(conn.subscribe_raw(f"{prefix}.raw.>", lambda s, r, d, h: raw_got.append((s, r, d, h))), 5.0)
    plain_sub = conn.call(nc.subscribe(f"{prefix}.plain.>", cb=on_msg), 5.0)
    try:
        rng = random.Random(11)
        expected_raw, expected_plain = [], []
        for i, size in enumerate(SIZES * 2):
            headers = {"X-Idx": str(i), "X-Multi": ["a", "b"]} if i % 2 else None
            hdr = encode_headers(headers) if headers else b""
            size = min(size, client.max_payload - len(hdr))
            # random bytes, with protocol-looking bytes at the start where there is room
            data = (b"\r\nMSG x 1 2\r\n" + rng.randbytes(size))[:size] if size % 3 else rng.randbytes(size)
            reply = f"{prefix}.reply.{i}" if i % 3 else None
            for kind, expected in (("raw", expected_raw), ("plain", expected_plain)):
                subject = f"{prefix}.{kind}.{i}"
                client.publish(subject, data, reply=reply, headers=headers)
                expected.append((subject, reply or "", data, hdr, headers))
        client.flush(timeout=30.0)
        wait_for(lambda: len(raw_got) >= len(expected_raw) and len(plain_got) >= len(expected_plain), timeout=30.0,
                 what="every message at both subscriptions")
        assert len(raw_got) == len(expected_raw) and len(plain_got) == len(expected_plain)
        for (subject, reply, data, hdr, _), got in zip(expected_raw, raw_got):
            assert got == (subject.encode(), reply.encode(), data, hdr), subject
        for (subject, reply, data, _, headers), got in zip(expected_plain, plain_got):
            want = {k: v if isinstance(v, str) else v[-1] for k, v in headers.items()} if headers else None
            assert got == (subject, reply, data, want), subject
    finally:
        conn.call(conn.unsubscribe_raw(raw_sub), 5.0)
        conn.call(plain_sub.unsubscribe(), 5.0)
