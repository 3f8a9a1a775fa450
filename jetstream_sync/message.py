# Msg: one delivered message, its ADR-15 metadata, and its acknowledgements.
#
# Rule 1: acks are fire-and-forget writes through the client's Outbox (one
#         loop crossing per batch, never a network wait), except double_ack.
# Rule 2: headers are kept raw and decoded on first use: most consumers never
#         look at them, and the raw size is what the server counts.
# Rule 3: the ack subject is parsed by one pure function (_protocol.parse_ack_subject), once per
#         message, unit tested; MsgMetadata is built from it on first access.
from __future__ import annotations

import datetime as _dt
import threading
from typing import TYPE_CHECKING

import attrs

from ._headers import Headers, decode_headers
from ._protocol import ACK, DEFAULT, NAK, TERM, WPI, AckFields, Timeout, ack_command, parse_ack_subject
from ._time import Timestamp
from .errors import JetStreamError, MessageAlreadyAckedError, TimeoutError

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["Msg", "MsgMetadata", "SequencePair", "parse_metadata"]

# One lock for every message's ack flag: a lock per message would cost an
# allocation on the hot path, and contention on acks of one message is rare.
_ACK_LOCK = threading.Lock()



@attrs.frozen(kw_only=True)
class SequencePair:
    """The message's position: ``stream`` sequence and ``consumer`` (delivery) sequence."""

    stream: int
    consumer: int


@attrs.frozen(kw_only=True)
class MsgMetadata:
    """What the ``$JS.ACK`` reply subject says about a delivered message (ADR-15)."""

    stream: str
    consumer: str
    sequence: SequencePair
    num_delivered: int
    num_pending: int
    #: When the message was stored, in exact integer nanoseconds since the Unix epoch.
    timestamp_ns: int
    #: The JetStream domain, or None.
    domain: str | None = None

    @property
    def timestamp(self) -> Timestamp:
        """When the message was stored: a timezone-aware UTC datetime (a :class:`Timestamp`, so it also
        keeps the nanoseconds). Built on access (no I/O): most readers only need the sequences."""
        return Timestamp.from_ns(self.timestamp_ns)


def _metadata_of(fields: AckFields) -> MsgMetadata:
    stream, consumer, delivered, sseq, cseq, ts, pending, domain = fields
    return MsgMetadata(stream=stream, consumer=consumer, sequence=SequencePair(stream=sseq, consumer=cseq),
                       num_delivered=delivered, num_pending=pending, timestamp_ns=ts, domain=domain)


def parse_metadata(reply: str) -> MsgMetadata:
    """Parse a JetStream ack subject into :class:`MsgMetadata` (formats: :func:`parse_ack_subject`).

    Raises ``ValueError`` when ``reply`` is not an ack subject.
    """
    return _metadata_of(parse_ack_subject(reply))


class Msg:
    """A message delivered by NATS or JetStream. Don't subclass.

    Attributes ``subject``, ``reply``, ``data`` (bytes) and ``headers``
    (:class:`Headers`, a ``dict`` of first values with ``get_all()`` for
    multi-valued keys; empty when the message has none). Ack methods are
    thread-safe and never block on the network, except :meth:`double_ack`.
    """

    __slots__ = ("_client", "subject", "reply", "data", "_raw_headers", "_headers", "_metadata", "_ack", "_acked",
                 "_reply_b")

    def __init__(self, client: "Connection | None", subject: str, reply: str, data: bytes,
                 raw_headers: bytes = b"", headers: Headers | None = None, reply_b: bytes | None = None) -> None:
        self._client = client
        self.subject = subject
        self.reply = reply
        self.data = data
        self._raw_headers = raw_headers
        self._headers = headers
        self._metadata: MsgMetadata | None = None
        self._ack: AckFields | None = None
        self._acked = False
        self._reply_b = reply_b  # the reply as it came off the wire, so an ack need not re-encode it

    @property
    def headers(self) -> Headers:
        """Message headers (decoded on first access). No I/O."""
        h = self._headers
        if h is None:
            h = decode_headers(self._raw_headers) if self._raw_headers else None
            if h is None:
                h = Headers()
            self._headers = h
        return h

    @property
    def size(self) -> int:
        """The message size as the server counts it: subject + reply + headers + data."""
        return len(self.subject) + len(self.reply) + len(self._raw_headers) + len(self.data)

    @property
    def metadata(self) -> MsgMetadata:
        """JetStream metadata parsed from the reply subject. No I/O.

        Raises ``ValueError`` when this is not a JetStream message.
        """
        md = self._metadata
        if md is None:
            md = self._metadata = _metadata_of(self._ack_fields())
        return md

    def metadata_numbers(self) -> tuple[int, int, int, int]:
        """``(stream sequence, num_delivered, num_pending, timestamp_ns)`` of a JetStream message: the
        numbers of :attr:`metadata` as a plain tuple, for loops over many messages. No I/O; the reply
        subject is parsed once per message (shared with :attr:`metadata`) and no :class:`MsgMetadata`
        is built, so each call costs one small tuple.

        Raises ``ValueError`` when this is not a JetStream message.
        """
        fields = self._ack  # _ack_fields() inlined: a Spark read calls this once per row
        if fields is None:
            fields = self._ack = parse_ack_subject(self.reply)
        _, _, delivered, seq, _, ts_ns, pending, _ = fields  # the AckFields order
        return seq, delivered, pending, ts_ns

    def _ack_fields(self) -> AckFields:
        """The reply subject parsed once (:func:`parse_ack_subject`), shared by :attr:`metadata`,
        :meth:`metadata_numbers` and the engines. Raises ``ValueError`` when it is not an ack subject."""
        fields = self._ack
        if fields is None:
            fields = self._ack = parse_ack_subject(self.reply)
        return fields

    # -- acknowledgements --------------------------------------------------------

    def _send_ack(self, payload: bytes, terminal: bool) -> None:
        client = self._client
        if client is None or not self.reply:
            raise JetStreamError("this message cannot be acknowledged: it has no reply subject "
                                 "(a direct get or a core NATS message)")
        lt = client.loop_thread
        if lt.closed:
            # Checked here, not left to the Outbox: a flush scheduled just before
            # the loop stopped never runs, and later puts would then queue silently.
            lt.check_usable()
        if terminal:
            with _ACK_LOCK:
                if self._acked:
                    raise MessageAlreadyAckedError(f"message on {self.subject!r} was already acknowledged")
                self._acked = True
        try:
            client.write(ack_command(self._reply_b or self.reply.encode(), payload))
        except BaseException:
            if terminal:
                self._acked = False
            raise

    def ack(self) -> None:
        """Acknowledge the message. Fire-and-forget: never blocks on the network.

        Raises ``MessageAlreadyAckedError`` after a previous ack/nak/term,
        ``ClientClosedError`` when the client is closed.
        """
        self._send_ack(ACK, True)

    def nak(self, delay: float | _dt.timedelta | None = None) -> None:
        """Negatively acknowledge: ask for redelivery, after ``delay`` seconds if given. Never blocks."""
        if delay is None:
            self._send_ack(NAK, True)
            return
        if isinstance(delay, _dt.timedelta):
            delay = delay.total_seconds()
        if isinstance(delay, bool) or not isinstance(delay, (int, float)):
            raise TypeError(f"delay must be seconds (a number or timedelta), got {delay!r}")
        if delay < 0:
            raise ValueError(f"delay must be >= 0 seconds, got {delay!r}")
        self._send_ack(NAK + b' {"delay": %d}' % int(delay * 1e9), True)

    def in_progress(self) -> None:
        """Tell the server work is in progress (resets the ack wait). Allowed any number of times."""
        self._send_ack(WPI, False)

    def term(self, reason: str | None = None) -> None:
        """Terminate: the server never redelivers this message. Never blocks."""
        if reason is None:
            self._send_ack(TERM, True)
            return
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, got {type(reason).__name__}")
        self._send_ack(TERM + b" " + reason.replace("\r", " ").replace("\n", " ").encode(), True)

    def double_ack(self, timeout: Timeout = DEFAULT) -> None:
        """Acknowledge and block until the server confirms it (at most ``timeout`` seconds).

        Raises ``MessageAlreadyAckedError``, ``TimeoutError`` (the ack may or
        may not have landed; the message stays marked unacked so it can be
        retried), ``ClientClosedError``.
        """
        client = self._client
        if client is None or not self.reply:
            raise JetStreamError("this message cannot be acknowledged: it has no reply subject")
        t = client.timeout_or_default(timeout)
        with _ACK_LOCK:
            if self._acked:
                raise MessageAlreadyAckedError(f"message on {self.subject!r} was already acknowledged")
            self._acked = True
        try:
            client.call(client.request(self.reply, ACK, t), t)
        except TimeoutError as exc:
            self._acked = False
            raise TimeoutError.after(f"double_ack of {self._describe()}", t, "no confirmation from the server; "
                                     "the ack may or may not have landed") from exc
        except BaseException:
            self._acked = False
            raise

    def _describe(self) -> str:
        try:
            md = self.metadata
        except ValueError:
            return f"the message on {self.subject!r}"
        return (f"message {md.sequence.stream} of stream {md.stream!r} "
                f"(consumer {md.consumer!r}, subject {self.subject!r})")

    @property
    def acked(self) -> bool:
        """True once ack/nak/term (or a successful double_ack) was sent."""
        return self._acked

    def __repr__(self) -> str:
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={self.data[:32]!r}{'...' if len(self.data) > 32 else ''}>"
