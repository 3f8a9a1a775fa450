# NATS message headers: the `Headers` mapping and the wire codec for header blocks.
# Rule 1: pure. No I/O, no `nats` import, no threads: bytes in, `Headers` out, and back.
# Rule 2: decoding sits on the hot path (every pulled message and status goes through it), so it
#         builds the dict directly and allocates the multi-value table only for repeated keys.
# Rule 3: a status line ("NATS/1.0 404 No Messages") becomes the pseudo-headers STATUS and
#         DESCRIPTION, as nats.go does; the pull engine decides what a status means, not this file.
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["DESCRIPTION", "STATUS", "Headers", "decode_headers", "encode_headers"]

STATUS = "Status"
"""Pseudo-header holding the 3-digit status code of a status line (``"404"``)."""
DESCRIPTION = "Description"
"""Pseudo-header holding the text after the status code (``"No Messages"``), when there is one."""

_VERSION = "NATS/1.0"
_CRLF = "\r\n"
# A header name is a non-empty run of printable ASCII other than ':' (0x21-0x39, 0x3B-0x7E);
# this also rules out space, which nats-server would read as the end of the name.
_NAME = re.compile(r"[!-9;-~]+")


class Headers(dict):
    """Message headers: a ``dict[str, str]`` of each key's *first* value, keeping every value.

    Reading it as a plain dict gives what nats.go's ``Header.Get`` gives; ``get_all(key)`` and
    ``multi()`` give every value of a repeated key. Keys are case-sensitive, as sent.

    ``Headers({"a": "1"})`` and ``Headers({"a": ["1", "2"]})`` (a list is several values) build
    one. Assigning ``h[key] = value`` replaces every value of ``key``; ``add()`` appends one.
    Not thread-safe for concurrent mutation (like ``dict``); sharing a finished one is fine.
    """

    __slots__ = ("_multi",)

    _multi: dict[str, list[str]] | None
    # Every value of the keys that have more than one, in arrival order (the first equals the
    # dict value). None until a key repeats: most messages have no repeated header.

    def __init__(self, data: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None, /, **kwargs: Any):
        dict.__init__(self)
        self._multi = None
        if data is not None:
            self.update(data)
        if kwargs:
            self.update(kwargs)

    @classmethod
    def from_multi(cls, mapping: Mapping[str, str | Sequence[str]]) -> Headers:
        """Build from ``{key: [values...]}`` (a plain ``str`` value counts as one value)."""
        return cls(mapping)

    def get_all(self, key: str) -> list[str]:
        """Every value of ``key`` in order; an empty list when the key is absent."""
        multi = self._multi
        if multi is not None and key in multi:
            return list(multi[key])
        value = dict.get(self, key)
        return [] if value is None else [value]

    def multi(self) -> dict[str, list[str]]:
        """A new ``{key: [every value]}`` dict, in key order."""
        multi = self._multi or {}
        return {k: list(multi[k]) if k in multi else [v] for k, v in dict.items(self)}

    def add(self, key: str, value: str) -> None:
        """Append one more value for ``key`` (nats.go ``Header.Add``)."""
        if dict.__contains__(self, key):
            self._put(key, [*self.get_all(key), value])
        else:
            self._put(key, value)

    # -- keeping the multi-value table in step with dict mutation --------------------------------

    def _put(self, key: str, value: Any) -> None:
        if type(key) is not str:
            if not isinstance(key, str):
                raise TypeError(f"header name must be a str, got {type(key).__name__}: {key!r}")
            key = str.__str__(key)  # e.g. nats-py's `Header` str-enum keys: store the plain name
        if isinstance(value, str):
            values = None
        elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
            values = list(value)
            for v in values:
                if not isinstance(v, str):
                    raise TypeError(f"header {key!r}: values must be str, got {type(v).__name__}")
            if not values:  # a key with no values is no key at all
                self.pop(key, None)
                return
            value = values[0]
            if len(values) == 1:
                values = None
        else:
            raise TypeError(f"header {key!r}: value must be a str or a list of str, got {type(value).__name__}")
        dict.__setitem__(self, key, value)
        if values is not None:
            if self._multi is None:
                self._multi = {}
            self._multi[key] = values
        elif self._multi:
            self._multi.pop(key, None)

    def _forget(self, key: object) -> None:
        if self._multi:
            self._multi.pop(key, None)  # type: ignore[call-overload]

    def __setitem__(self, key: str, value: str | Sequence[str]) -> None:
        self._put(key, value)

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        self._forget(key)

    def pop(self, key: str, *default: Any) -> Any:
        self._forget(key)
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[str, str]:
        key, value = dict.popitem(self)
        self._forget(key)
        return key, value

    def clear(self) -> None:
        dict.clear(self)
        self._multi = None

    def setdefault(self, key: str, default: str | Sequence[str] = "") -> str:  # type: ignore[override]
        if not dict.__contains__(self, key):
            self._put(key, default)
        return dict.__getitem__(self, key)

    def update(self, other: Any = (), /, **kwargs: Any) -> None:  # type: ignore[override]
        if isinstance(other, Headers):
            items: Iterable[tuple[str, Any]] = other.multi().items()
        elif isinstance(other, Mapping):
            items = other.items()
        elif hasattr(other, "keys"):
            items = ((k, other[k]) for k in other.keys())
        else:
            items = other
        for key, value in items:
            self._put(key, value)
        for key, value in kwargs.items():
            self._put(key, value)

    def __ior__(self, other: Any) -> Headers:  # type: ignore[override,misc]
        self.update(other)
        return self

    def __or__(self, other: Any) -> Headers:  # type: ignore[override]
        new = self.copy()
        new.update(other)
        return new

    def copy(self) -> Headers:
        return Headers(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return dict.__eq__(self, other) and (self._multi or {}) == (other._multi or {})
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        # dict subclasses with __slots__ would pickle the slot by name; rebuilding from the
        # multi-value form keeps pickles independent of the internal layout.
        return (Headers, (self.multi(),))

    def __repr__(self) -> str:
        multi = self._multi or {}
        body = ", ".join(f"{k!r}: {multi[k] if k in multi else v!r}" for k, v in dict.items(self))
        return f"Headers({{{body}}})"


def decode_headers(raw: bytes | bytearray | memoryview | None) -> Headers | None:
    """Parse a header block as it arrives on the wire; ``None`` for empty input.

    ``b"NATS/1.0 408 Request Timeout\\r\\nNats-Pending-Messages: 10\\r\\n\\r\\n"`` gives
    ``{"Status": "408", "Description": "Request Timeout", "Nats-Pending-Messages": "10"}``.
    Keys are kept as sent, values are stripped, repeated keys become multi-values and bytes
    that are not UTF-8 are replaced (never an error). Lines without ':' are skipped.
    Raises ``ValueError`` when the block does not start with ``NATS/``.
    """
    if not raw:
        return None
    lines = str(raw, "utf-8", "replace").split(_CRLF)
    first = lines[0]
    if not first.startswith("NATS/"):
        raise ValueError(f"not a NATS header block (expected {_VERSION!r}): {first[:40]!r}")
    headers = Headers()
    put = dict.__setitem__
    # "NATS/1.0 404 No Messages": what follows the version is "<code> <description>".
    status = first.partition(" ")[2].strip()
    if status:
        code, _, description = status.partition(" ")
        put(headers, STATUS, code)
        description = description.strip()
        if description:
            put(headers, DESCRIPTION, description)
    for line in lines[1:]:
        if not line:
            break  # the empty line that ends the block
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or not key:
            continue
        value = value.strip()
        if key in headers:
            multi = headers._multi
            if multi is None:
                multi = headers._multi = {}
            values = multi.get(key)
            if values is None:
                multi[key] = [headers[key], value]
            else:
                values.append(value)
        else:
            put(headers, key, value)
    return headers


def encode_headers(headers: Mapping[str, str | Sequence[str]] | None) -> bytes:
    """Encode headers for publishing: ``NATS/1.0\\r\\n`` + ``Key: Value\\r\\n`` per value + ``\\r\\n``.

    An empty mapping (or ``None``) encodes to ``b""``, which callers send as "no headers".
    A ``Headers`` encodes every value of a repeated key; so does a list value.
    Raises ``ValueError`` naming the key for a bad name (empty, whitespace, ':' or not printable
    ASCII) or a value containing CR/LF, and ``TypeError`` naming the key for a non-str value.
    """
    if not headers:
        return b""
    items = headers.multi().items() if isinstance(headers, Headers) else headers.items()
    parts = [_VERSION, _CRLF]
    for key, value in items:
        if not isinstance(key, str):
            raise TypeError(f"header name must be a str, got {type(key).__name__}: {key!r}")
        if not _NAME.fullmatch(key):
            raise ValueError(
                f"invalid header name {key!r}: must be non-empty printable ASCII without whitespace or ':'"
            )
        if isinstance(value, str):
            values: Sequence[Any] = (value,)
        elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
            values = value
        else:
            raise TypeError(f"header {key!r}: value must be a str or a list of str, got {type(value).__name__}")
        for v in values:
            if not isinstance(v, str):
                raise TypeError(f"header {key!r}: value must be a str, got {type(v).__name__}")
            if "\r" in v or "\n" in v:
                raise ValueError(f"header {key!r}: value must not contain CR or LF: {v!r}")
            parts += (key, ": ", v, _CRLF)
    parts.append(_CRLF)
    return "".join(parts).encode("utf-8")
