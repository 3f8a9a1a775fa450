# The NATS and JetStream wire rules the rest of the package builds on: argument checks for
# subjects, payloads and timeouts; PUB/HPUB and ack commands; the $JS.ACK reply-subject parser;
# status messages and what they mean for a pull.
#
# Rule 1: pure. No I/O, no threads, no `nats` import: strings and bytes in, values or errors out.
#         Every function here is unit tested without a server.
# Rule 2: one of each. A check, a command or a parser written here is not written again in an
#         engine, a handle or the Spark reader (they import it).
# Rule 3: a check raises before anything is sent: TypeError/ValueError naming the argument.
from __future__ import annotations

import datetime as _dt
import enum
from collections.abc import Mapping
from typing import Any, Union

from . import errors
from ._headers import Headers, decode_headers, encode_headers

__all__ = [
    "DEFAULT", "Timeout",
    "ACK", "ACK_CONSUMER_SEQ", "ACK_DELIVERED", "ACK_PENDING", "ACK_STREAM_SEQ", "ACK_TIMESTAMP_NS", "NAK", "TERM",
    "WPI", "AckFields", "Status", "ack_command", "check_count", "check_int", "check_seconds", "check_subject",
    "check_timeout", "classify_status",
    "SMALL_PAYLOAD", "encode_payload", "parse_ack_subject", "pin_id_of", "prepare_pub", "pub_command",
    "pub_command_parts", "pull_request", "single_valued", "spelled", "status_of",
]

# -- arguments -----------------------------------------------------------------------------------


class _Default(enum.Enum):
    """The type of :data:`DEFAULT` (one member, so type checkers can tell it from a float or None)."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "jetstream_sync.DEFAULT"


DEFAULT = _Default.DEFAULT
"""The default of every ``timeout=``: the timeout of the context or client the call belongs to.

Pass a number of seconds to override it for one call, or ``None`` to wait without a limit."""

#: What a ``timeout=`` argument accepts.
Timeout = Union[float, None, _Default]


def check_timeout(timeout: Any, name: str = "timeout", allow_none: bool = True) -> float | None:
    """``timeout`` as float seconds (> 0), or None when ``allow_none``; else TypeError/ValueError naming ``name``."""
    if timeout is None and allow_none:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{name} must be a number of seconds{' or None' if allow_none else ''}, got {timeout!r}")
    if not timeout > 0:
        raise ValueError(f"{name} must be > 0 seconds, got {timeout!r}")
    return float(timeout)


def check_int(value: Any, name: str, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum`` (bool is not), else TypeError/ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def check_count(value: Any, name: str) -> int | None:
    """None, or an int >= 1 (a number of messages or bytes)."""
    return None if value is None else check_int(value, name, 1)


def check_seconds(value: Any, name: str) -> float | None:
    """None, or a duration > 0 as float seconds (a number or a ``timedelta``)."""
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (a number or timedelta), got {value!r}")
    if not value > 0:
        raise ValueError(f"{name} must be > 0 seconds, got {value!r}")
    return float(value)


def encode_payload(data: Any, name: str = "data") -> bytes:
    """Bytes for a payload: bytes-like as is, str as UTF-8; anything else is a TypeError."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    raise TypeError(f"{name} must be bytes or str, got {type(data).__name__}")


#: Subjects :func:`check_subject` found valid (a bounded memo for hot publishing loops).
VALID_SUBJECTS: dict[str, bool] = {}


def check_subject(subject: Any, name: str = "subject") -> str:
    """Return ``subject`` if it is a valid NATS subject, else raise TypeError/ValueError naming ``name``."""
    if type(subject) is str and subject in VALID_SUBJECTS:
        return subject
    if not isinstance(subject, str):
        raise TypeError(f"{name} must be a str, got {type(subject).__name__}")
    if not subject or any(c in subject for c in " \t\r\n") or subject.startswith(".") or subject.endswith(".") \
            or ".." in subject:
        raise ValueError(f"{name} must be a non-empty NATS subject without whitespace or empty tokens, got {subject!r}")
    if len(VALID_SUBJECTS) < 4096:  # a small memo for hot publishing loops; bounded
        VALID_SUBJECTS[subject] = True
    return subject


def single_valued(headers: Mapping[str, Any]) -> dict[str, str]:
    """Headers as nats-py's request() takes them: one str per key (several values joined by ',')."""
    return {k: v if isinstance(v, str) else ",".join(v) for k, v in headers.items()}


# -- commands ------------------------------------------------------------------------------------


def pub_command(subject: str, reply: str, payload: bytes, hdr: bytes) -> bytes:
    """The PUB (or, with a header block, HPUB) protocol command. No validation: check first."""
    if hdr:
        return (f"HPUB {subject} {reply} {len(hdr)} {len(hdr) + len(payload)}\r\n".encode()
                + hdr + payload + b"\r\n")
    return f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n"


#: Payloads above this many bytes are copied into a command once (a join); smaller ones by "+", faster there.
SMALL_PAYLOAD = 4096


def pub_command_parts(subject: str, payload: bytes, hdr: bytes) -> tuple[bytes, bytes]:
    """A PUB/HPUB command in two parts, before and after its reply subject: a request picks its
    reply inbox late (at write time), so the rest is encoded once on the calling thread."""
    if hdr:
        return (b"HPUB " + subject.encode() + b" ",
                b"".join((b" %d %d\r\n" % (len(hdr), len(hdr) + len(payload)), hdr, payload, b"\r\n")))
    if len(payload) > SMALL_PAYLOAD:  # one copy of a large payload, not one per "+"
        return b"PUB " + subject.encode() + b" ", b"".join((b" %d\r\n" % len(payload), payload, b"\r\n"))
    return b"PUB " + subject.encode() + b" ", b" %d\r\n" % len(payload) + payload + b"\r\n"


def prepare_pub(subject: Any, data: Any, headers: Mapping[str, Any] | None, max_payload: int) -> tuple[str, bytes, bytes]:
    """Check a publish on the calling thread; return (subject, payload, header block).

    Raises TypeError/ValueError naming ``subject``, ``data`` or the header, or ``data`` when payload
    and headers exceed the server's ``max_payload``.
    """
    check_subject(subject)
    payload = encode_payload(data)
    if headers is not None and not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping of str to str (or list of str), got {type(headers).__name__}")
    hdr = encode_headers(headers) if headers else b""
    if len(payload) + len(hdr) > max_payload:
        raise ValueError(f"data: {len(payload) + len(hdr)} bytes exceed the server's max_payload of {max_payload}")
    return subject, payload, hdr


def pull_request(batch: int, *, max_bytes: int | None = None, expires: float | None = None,
                 idle_heartbeat: float | None = None, no_wait: bool = False,
                 priority: Mapping[str, Any] | None = None, pin_id: str | None = None) -> dict[str, Any]:
    """The body of a ``CONSUMER.MSG.NEXT`` pull request (ADR-37), durations in integer nanoseconds:
    the one builder for fetch, next and the continuous pull. ``no_wait`` replaces ``expires``.

    ``priority``: the priority-group fields of the pull (ADR-42: ``group``, and ``min_pending``,
    ``min_ack_pending`` or ``priority`` where given), checked by the caller; ``pin_id``: the id a pinned
    group gave this client, sent back as ``id``."""
    req: dict[str, Any] = {"batch": batch}
    if max_bytes is not None:
        req["max_bytes"] = max_bytes
    if no_wait:
        req["no_wait"] = True
    elif expires is not None:
        req["expires"] = int(expires * 1e9)
    if idle_heartbeat is not None:
        req["idle_heartbeat"] = int(idle_heartbeat * 1e9)
    if priority:
        req.update(priority)
        if pin_id:
            req["id"] = pin_id
    return req


#: How the server names a pinned client's id in the messages it delivers to it (ADR-42).
_PIN_HEADER = b"\r\nNats-Pin-Id:"


def pin_id_of(raw_headers: bytes) -> str | None:
    """The ``Nats-Pin-Id`` of a delivered message's raw header block, or None. No full header parse:
    pulls of a pinned group look at every message."""
    i = raw_headers.find(_PIN_HEADER)
    if i < 0:
        return None
    start = i + len(_PIN_HEADER)
    end = raw_headers.find(b"\r\n", start)
    return raw_headers[start:end if end >= 0 else len(raw_headers)].strip().decode() or None


#: Acknowledgement payloads (ADR-15 / nats.go jetstream ``ackType``).
ACK = b"+ACK"
NAK = b"-NAK"
WPI = b"+WPI"
TERM = b"+TERM"


def ack_command(reply: bytes, payload: bytes) -> bytes:
    """The PUB of an acknowledgement ``payload`` to a message's ``$JS.ACK`` reply subject."""
    return b"PUB " + reply + b" %d\r\n" % len(payload) + payload + b"\r\n"


# -- the $JS.ACK reply subject -------------------------------------------------------------------

#: The fields of an ack subject in order: (stream, consumer, delivered, stream sequence, consumer
#: sequence, timestamp in ns, pending, domain or None).
AckFields = tuple[Any, Any, int, int, int, int, int, Any]
#: Positions in :data:`AckFields` of the numbers readers use.
ACK_DELIVERED, ACK_STREAM_SEQ, ACK_CONSUMER_SEQ, ACK_TIMESTAMP_NS, ACK_PENDING = 2, 3, 4, 5, 6


def parse_ack_subject(reply: str | bytes) -> AckFields:
    """The fields of a JetStream ack subject as a plain tuple (:data:`AckFields`): the one parser.

    Two formats (ADR-15): ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``
    (9 tokens) and ``$JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>...]``
    (11 or more tokens; a domain of ``_`` means none). Names come back as ``str`` for a ``str``
    reply and as ``bytes`` for a ``bytes`` one (the loop thread reads the wire form). A tuple,
    not ``MsgMetadata``: the pull engines and the Spark reader parse every message and need
    only the numbers. Raises ``ValueError`` for anything else.
    """
    if not reply:
        raise ValueError("not a JetStream message: it has no reply subject")
    if isinstance(reply, str):
        tokens = reply.split(".")
        js, ack, none = "$JS", "ACK", ("_", "")
    else:
        tokens = reply.split(b".")
        js, ack, none = b"$JS", b"ACK", (b"_", b"")
    n = len(tokens)
    if n < 9 or n == 10 or tokens[0] != js or tokens[1] != ack:
        raise ValueError(f"not a JetStream ack subject: {reply!r}")
    try:
        if n == 9:
            return (tokens[2], tokens[3], int(tokens[4]), int(tokens[5]), int(tokens[6]), int(tokens[7]),
                    int(tokens[8]), None)
        domain = None if tokens[2] in none else tokens[2]
        return (tokens[4], tokens[5], int(tokens[6]), int(tokens[7]), int(tokens[8]), int(tokens[9]),
                int(tokens[10]), domain)
    except ValueError:
        raise ValueError(f"not a JetStream ack subject (non-numeric field): {reply!r}") from None



def wire_consumer_seq(reply: bytes) -> int:
    """The consumer sequence of an ack subject as it comes off the wire, read without parsing the
    rest: the one number the loop thread checks on every pushed message. The same value as
    ``parse_ack_subject(reply)[ACK_CONSUMER_SEQ]`` for every format, at a third of its cost for the
    9- and 11-token forms, whose consumer sequence is the third token from the end. Raises ``ValueError``
    when it is not a number (the caller has checked the ``$JS.ACK.`` prefix)."""
    dots = reply.count(b".")
    if dots == 8 or dots == 10:
        return int(reply.rsplit(b".", 3)[1])
    return parse_ack_subject(reply)[ACK_CONSUMER_SEQ]

# -- status messages -----------------------------------------------------------------------------


class Status(enum.Enum):
    """What a status message means for the consumer that received it."""

    HEARTBEAT = "heartbeat"        # 100 Idle Heartbeat: resets the timer, nothing else
    FLOW_CONTROL = "flow_control"  # 100 FlowControl Request: a push consumer must answer its reply subject
    END = "end"                    # the pull finished quietly (404, 408, 409 batch completed / max bytes)
    WARNING = "warning"            # the pull was refused but the consumer is fine (409 Exceeded ...)
    TERMINAL = "terminal"          # stop for good (409 Consumer Deleted, 409 push based, 400, ...)


def status_of(raw_headers: bytes, data: bytes) -> tuple[str, Headers] | None:
    """(code, headers) when a delivered message is a status (no payload, ``NATS/1.0 <code>``), else None."""
    if raw_headers and not data and raw_headers.startswith(b"NATS/1.0 "):
        hdrs = decode_headers(raw_headers)
        if hdrs is not None:
            code = hdrs.get("Status")
            if code:
                return code, hdrs
    return None


def classify_status(code: str, description: str, stream: str | None = None,
                    consumer: str | None = None) -> tuple[Status, BaseException | None]:
    """Sort a status message (ADR-37 "Status handling"); return the kind and the error to report,
    naming the consumer and stream the pull was for when given."""
    desc = description.lower()
    if code == "100":
        if "flowcontrol" in desc.replace(" ", ""):
            return Status.FLOW_CONTROL, None
        return Status.HEARTBEAT, None
    if code in ("404", "408"):
        return Status.END, None
    who = f"consumer {consumer!r} of stream {stream!r}" if consumer and stream else "the consumer"
    about = {"stream": stream, "consumer": consumer,
             "operation": f"pull request to consumer {consumer!r} on stream {stream!r}" if consumer else None}
    if code == "409":
        if "consumer deleted" in desc:
            return Status.TERMINAL, errors.ConsumerDeletedError(f"{who} was deleted (409 Consumer Deleted)",
                                                                stream, consumer)
        if "push based" in desc:
            return Status.TERMINAL, errors.APIError(409, None, description or "Consumer is push based", **about)
        if "message size exceeds maxbytes" in desc or "batch completed" in desc:
            return Status.END, None
        # exceeded max ..., leadership change
        return Status.WARNING, errors.APIError(409, None, description, **about)
    if code == "503":
        return Status.TERMINAL, errors.NoRespondersError(f"no responders for the pull request to {who} (503)")
    if code == "423":  # ADR-42: the pull sent a pin id the group no longer holds ("Nats-Pin-Id mismatch")
        return Status.WARNING, errors.PinIdMismatchError(423, None, description, stream=stream, consumer=consumer)
    return Status.TERMINAL, errors.APIError(int(code) if code.isdigit() else None, None,
                                            description or f"pull failed with status {code}", **about)


def spelled(error: BaseException, subject: str) -> BaseException:
    """A permission error naming ``subject`` as we spelled it (the server's text comes lower-cased)."""
    respell = getattr(error, "spelled", None)
    return respell(subject) if respell is not None else error
