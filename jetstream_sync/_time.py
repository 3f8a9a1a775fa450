# Times and durations as the server writes them, and as Python reads them.
#
# Rule 1: pure. No I/O, no `nats` import; config.py and message.py build on this.
# Rule 2: nothing the server sent is lost. The server speaks integer nanoseconds and RFC 3339 with
#         nine fractional digits; Python's datetime stops at microseconds and a float of seconds at
#         2**53 ns. ``Timestamp`` (a datetime) and ``Seconds`` (a float) are the friendly views and
#         carry the exact value beside it, so a config read from the server goes back unchanged.
# Rule 3: a value the user computes (arithmetic, replace(), a plain float) is a new value and is
#         written as such; only an untouched value from the server is written back verbatim.
from __future__ import annotations

import math
import numbers
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

__all__ = [
    "Seconds",
    "Timestamp",
    "format_time",
    "nanos_from_parts",
    "nanos_to_seconds",
    "parse_time",
    "seconds_to_nanos",
    "time_from_parts",
    "times_from_parts",
    "to_seconds",
]

_NANOS = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)


class Seconds(float):
    """A duration in float seconds that remembers the server's exact nanoseconds.

    Durations read from the server are ``Seconds``: use them as any ``float``. A float cannot hold
    every nanosecond count above 2**53 ns (about 104 days); ``nanos`` can, and it is what goes back
    to the server when the value is written unchanged. Arithmetic gives a plain ``float``.
    """

    __slots__ = ("_nanos",)

    def __new__(cls, nanos: int) -> "Seconds":
        if isinstance(nanos, bool) or not isinstance(nanos, numbers.Integral):
            raise TypeError(f"Seconds takes integer nanoseconds, got {type(nanos).__name__}")
        self = super().__new__(cls, int(nanos) / _NANOS)
        self._nanos = int(nanos)
        return self

    @property
    def nanos(self) -> int:
        """The exact duration in integer nanoseconds, as the server sent it."""
        return self._nanos

    def __reduce__(self) -> Any:
        return (Seconds, (self._nanos,))

    def __repr__(self) -> str:
        return float.__repr__(self)


class Timestamp(datetime):
    """An aware UTC ``datetime`` that keeps the server's nanoseconds.

    Every time read from the server is a ``Timestamp``: use it as any ``datetime`` (it compares,
    hashes and formats like one). ``nanosecond`` holds the digits past the microsecond (0-999),
    :meth:`timestamp_ns` the exact integer nanoseconds since the Unix epoch. Written back unchanged
    it keeps the server's exact text; adding a ``timedelta`` keeps the nanoseconds; ``replace()``
    and ``astimezone()`` give a value without them.
    """

    __slots__ = ("_nanosecond", "_text")

    @classmethod
    def from_ns(cls, ns: int) -> "Timestamp":
        """The UTC time ``ns`` integer nanoseconds after the Unix epoch."""
        if isinstance(ns, bool) or not isinstance(ns, numbers.Integral):
            raise TypeError(f"ns must be integer nanoseconds, got {type(ns).__name__}")
        micros, nanosecond = divmod(int(ns), 1000)
        return cls._make(_EPOCH + timedelta(microseconds=micros), nanosecond)

    @classmethod
    def _make(cls, dt: datetime, nanosecond: int, text: str | None = None) -> "Timestamp":
        self = cls(dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond, tzinfo=dt.tzinfo,
                   fold=dt.fold)
        self._nanosecond = nanosecond
        self._text = text
        return self

    @property
    def nanosecond(self) -> int:
        """Nanoseconds past the microsecond, 0-999 (``datetime`` stops at microseconds)."""
        return getattr(self, "_nanosecond", 0)

    def timestamp_ns(self) -> int:
        """Integer nanoseconds since the Unix epoch, exact (as ``time.time_ns()`` counts)."""
        return (self - _EPOCH) // _US * 1000 + self.nanosecond

    def _key(self, other: Any) -> int | None:
        if isinstance(other, Timestamp):
            return other.timestamp_ns()
        if isinstance(other, datetime) and other.utcoffset() is not None:
            return (other - _EPOCH) // _US * 1000
        return None

    def __eq__(self, other: Any) -> bool:
        key = self._key(other)
        return super().__eq__(other) if key is None else self.timestamp_ns() == key

    def __ne__(self, other: Any) -> bool:
        key = self._key(other)
        return super().__ne__(other) if key is None else self.timestamp_ns() != key

    def __lt__(self, other: Any) -> bool:
        key = self._key(other)
        return super().__lt__(other) if key is None else self.timestamp_ns() < key

    def __le__(self, other: Any) -> bool:
        key = self._key(other)
        return super().__le__(other) if key is None else self.timestamp_ns() <= key

    def __gt__(self, other: Any) -> bool:
        key = self._key(other)
        return super().__gt__(other) if key is None else self.timestamp_ns() > key

    def __ge__(self, other: Any) -> bool:
        key = self._key(other)
        return super().__ge__(other) if key is None else self.timestamp_ns() >= key

    def __hash__(self) -> int:
        # Equal to a plain datetime only when there are no extra nanoseconds: then the hashes agree.
        return super().__hash__() ^ self.nanosecond

    def __add__(self, other: Any) -> Any:
        result = super().__add__(other)
        if isinstance(other, timedelta) and isinstance(result, datetime):
            return Timestamp._make(result, self.nanosecond)
        return result

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, timedelta):
            return Timestamp._make(super().__sub__(other), self.nanosecond)
        return super().__sub__(other)

    def __reduce__(self) -> Any:
        return (_restore_timestamp, (self.timestamp_ns(), self.utcoffset() or timedelta(0),
                                     getattr(self, "_text", None)))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__reduce__()

    def __repr__(self) -> str:
        base = super().__repr__()
        if not self.nanosecond:
            return base
        return f"{base[:-1]}, nanosecond={self.nanosecond})"


def _restore_timestamp(ns: int, offset: timedelta, text: str | None) -> Timestamp:
    ts = Timestamp.from_ns(ns)
    if offset:
        ts = Timestamp._make(ts.astimezone(timezone(offset)), ts.nanosecond)
    ts._text = text
    return ts


def to_seconds(value: float | int | timedelta | None, field: str) -> float | None:
    """Normalise a duration given as seconds (int/float) or a ``timedelta`` to float seconds.

    ``None`` stays ``None``; a :class:`Seconds` stays itself (with its exact nanoseconds). Raises
    ``TypeError`` (naming ``field``) for bool or non-numbers and ``ValueError`` for negative, NaN or
    infinite values.
    """
    if value is None:
        return None
    if type(value) is Seconds:
        if value._nanos < 0:
            raise ValueError(f"{field} must be >= 0 seconds, got {value!r}")
        return value
    if isinstance(value, bool):
        raise TypeError(f"{field} must be seconds (int/float) or a datetime.timedelta, not bool")
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, numbers.Real):
        seconds = float(value)
    else:
        raise TypeError(f"{field} must be seconds (int/float) or a datetime.timedelta, got {type(value).__name__}")
    if not math.isfinite(seconds):
        raise ValueError(f"{field} must be a finite number of seconds, got {value!r}")
    if seconds < 0:
        raise ValueError(f"{field} must be >= 0 seconds, got {value!r}")
    return seconds


def seconds_to_nanos(s: float) -> int:
    """Float seconds to the integer nanoseconds the server expects (rounded to the nearest ns).

    A :class:`Seconds` read from the server gives back its exact nanoseconds.
    """
    if type(s) is Seconds:
        return s._nanos
    return round(s * _NANOS)


def nanos_to_seconds(ns: int) -> Seconds:
    """Integer nanoseconds from the server to float seconds that keep the exact value."""
    return Seconds(ns)


_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\s*(?:([Zz])|([+-])(\d\d):?(\d\d))"
)


def parse_time(s: str | None) -> Timestamp | None:
    """Parse an RFC 3339 timestamp (Go ``RFC3339Nano``) into an aware UTC :class:`Timestamp`.

    Every digit is kept: microseconds in the ``datetime``, the rest in ``nanosecond`` (digits past
    the ninth are dropped), and the text itself, which :func:`format_time` writes back for an
    unchanged value. ``None`` and Go's zero time ``"0001-01-01T00:00:00Z"`` (the server's "unset")
    give ``None``. Raises ``ValueError``.
    """
    if s is None:
        return None
    if not isinstance(s, str):
        raise TypeError(f"timestamp must be an RFC 3339 str, got {type(s).__name__}")
    m = _RFC3339.fullmatch(s.strip())
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {s!r}")
    year, month, day, hour, minute, second, frac, zulu, sign, off_h, off_m = m.groups()
    digits = (frac or "0")[:9].ljust(9, "0")
    micros, nanosecond = int(digits[:6]), int(digits[6:])
    if zulu:
        tz = timezone.utc
    else:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        tz = timezone(-offset if sign == "-" else offset)
    try:
        dt = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tzinfo=tz)
        if dt.year == 1 and dt.replace(tzinfo=None) == datetime(1, 1, 1) and dt.utcoffset() == timedelta(0):
            return None  # Go's time.Time{} on the wire means "not set"
        return Timestamp._make(dt.astimezone(timezone.utc), nanosecond, s)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"not a valid timestamp: {s!r} ({exc})") from None


#: Dates and times to the second (b"2026-05-01T10:11:12") that time_from_parts has read, and their fields.
_SECONDS: dict[bytes, tuple[int, int, int, int, int, int]] = {}
_SECONDS_MAX = 256
_UTC = timezone.utc
#: What a fraction of n digits is multiplied by to give nanoseconds.
_SCALE = tuple(10 ** (9 - n) for n in range(10))


def time_from_parts(seconds: bytes, fraction: bytes = b"") -> Timestamp | None:
    """The time the server writes as ``<seconds>[.<fraction>]Z``, given as its two parts
    (``b"2026-05-01T10:11:12"`` and ``b"123456789"``, or ``b""`` for none): a fast
    :func:`parse_time` for messages read in bulk.

    Those share their time up to the second: that part is read once (by :func:`parse_time`, in full)
    and remembered, and the fraction on its own. The same value as :func:`parse_time` gives for the
    whole text; :func:`format_time` writes it back in the server's form (the fraction without trailing
    zeros, as Go writes it). Raises ``ValueError``.
    """
    fields = _SECONDS.get(seconds)
    if fields is not None:
        if not fraction:
            return Timestamp(*fields, 0, _UTC)
        if len(fraction) <= 9 and fraction.isdigit():
            micros, nanosecond = divmod(int(fraction) * _SCALE[len(fraction)], 1000)
            ts = Timestamp(*fields, micros, _UTC)
            if nanosecond:
                ts._nanosecond = nanosecond
            return ts
    text = seconds.decode("utf-8", "replace")
    ts = parse_time(f"{text}.{fraction.decode('utf-8', 'replace')}Z" if fraction else f"{text}Z")
    if ts is not None and fields is None and len(seconds) == 19 and seconds[10:11] == b"T":
        if len(_SECONDS) >= _SECONDS_MAX:
            _SECONDS.clear()
        _SECONDS[seconds] = (ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second)
    return ts


def times_from_parts(seconds: Sequence[bytes], fractions: Sequence[bytes]) -> list[Timestamp | None]:
    """:func:`time_from_parts` of each pair of ``seconds`` and ``fractions``, in one loop: the times of
    a run of messages read in bulk, most of them in the same second (looked up once for all of them)."""
    out: list[Timestamp | None] = []
    append = out.append
    last = fields = None
    for second, fraction in zip(seconds, fractions):
        if second != last:
            fields = _SECONDS.get(second)
            if fields is None:
                append(time_from_parts(second, fraction))  # read in full, and the second remembered
                continue
            last = second
        if not fraction:
            append(Timestamp(*fields, 0, _UTC))
        elif len(fraction) <= 9 and fraction.isdigit():
            micros, nanosecond = divmod(int(fraction) * _SCALE[len(fraction)], 1000)
            ts = Timestamp(*fields, micros, _UTC)
            if nanosecond:
                ts._nanosecond = nanosecond
            append(ts)
        else:
            append(time_from_parts(second, fraction))
    return out


def nanos_from_parts(seconds: Sequence[bytes], fractions: Sequence[bytes]) -> list[int]:
    """The integer nanoseconds since the Unix epoch of each time given as :func:`time_from_parts` takes
    it (``b"2026-05-01T10:11:12"``, ``b"123456789"``), in one loop: the times of a run of messages read
    in bulk, most of them in the same second (converted once for all of them). Raises ``ValueError``."""
    out: list[int] = []
    append = out.append
    last = b""
    base = 0
    scale = _SCALE
    for second, fraction in zip(seconds, fractions):
        if second != last:
            ts = time_from_parts(second)
            if ts is None:
                raise ValueError(f"not a server time: {second!r}")
            base = ts.timestamp_ns()
            last = second
        if not fraction:
            append(base)
        elif len(fraction) <= 9 and fraction.isdigit():
            append(base + int(fraction) * scale[len(fraction)])
        else:
            raise ValueError(f"not a server time: {second!r}.{fraction!r}")
    return out


def format_time(dt: datetime) -> str:
    """Format an aware ``datetime`` as RFC 3339 in UTC with a ``Z`` (as Go writes it).

    A :class:`Timestamp` read from the server gives back the server's exact text; one with
    nanoseconds writes all nine digits. Raises ``ValueError`` for a naive datetime: whether it
    meant local time or UTC differs between a notebook and a Spark executor, so the caller must say.
    """
    if not isinstance(dt, datetime):
        raise TypeError(f"expected a datetime, got {type(dt).__name__}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"naive datetime {dt!r}: attach a timezone, e.g. dt.replace(tzinfo=timezone.utc)")
    nanosecond = 0
    if isinstance(dt, Timestamp):
        text = getattr(dt, "_text", None)
        if text is not None:
            return text
        nanosecond = dt.nanosecond
    u = dt.astimezone(timezone.utc)
    if nanosecond:
        frac = f".{u.microsecond:06d}{nanosecond:03d}".rstrip("0")
    else:
        frac = f".{u.microsecond:06d}".rstrip("0") if u.microsecond else ""
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}{frac}Z"
