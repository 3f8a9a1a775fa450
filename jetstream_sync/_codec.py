# The wire codec under every JetStream type: str-valued enums, the name rules, the field building
# blocks (converters normalise, validators enforce invariants) and the serializer that walks attrs
# fields steered by metadata["kind"].
# Rule 1: pure. No I/O, no `nats` import, no threads.
# Rule 2: the Python side speaks float seconds and aware datetimes; the wire speaks integer
#         nanoseconds and RFC 3339. The conversion happens only in the serializer here.
# Rule 3: never lose what the server sent: unknown keys land in `extra` and go back out; a value read
#         as None (Go's zero time, -1 for "never") keeps its wire form in `extra` too.
from __future__ import annotations

import base64
import copy
import enum
import functools
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from . import errors
from ._headers import decode_headers, encode_headers
from ._time import Timestamp, format_time, nanos_to_seconds, parse_time, seconds_to_nanos, to_seconds

__all__ = ["check_priority_group", "validate_consumer_name", "validate_stream_name"]


class _WireEnum(str, enum.Enum):
    # str() and f-strings give the JSON value on every Python version (3.11 changed format()).
    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> Any:
        allowed = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"{value!r} is not a valid {cls.__name__}; allowed: {allowed}")


# ---------------------------------------------------------------------------------------------
# Name rules (shared with callers that look streams and consumers up by name)
# ---------------------------------------------------------------------------------------------

_BAD_NAME_CHARS = frozenset(".*>/\\")


def _check_name(name: object, field: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{field} must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError(f"{field} must be a non-empty name")
    bad = sorted({c for c in name if c in _BAD_NAME_CHARS or c.isspace()})
    if bad:
        raise ValueError(
            f"{field} {name!r} is invalid: names must not contain whitespace or any of "
            f"'.', '*', '>', '/', '\\' (found {', '.join(map(repr, bad))})"
        )
    return name


def _check_subject_field(subject: object, field: str) -> None:
    """Raise ValueError naming ``field`` unless ``subject`` is a valid NATS subject (wildcards allowed)."""
    if not isinstance(subject, str):
        raise TypeError(f"{field} must be a str, got {type(subject).__name__}")
    tokens = subject.split(".")
    if (not subject or any(c in subject for c in " \t\r\n") or "" in tokens
            or any(">" in t and (t != ">" or i != len(tokens) - 1) for i, t in enumerate(tokens))
            or any("*" in t and t != "*" for t in tokens)):
        raise ValueError(f"{field}: {subject!r} is not a valid subject (no spaces or empty tokens; '*' and '>' "
                         f"only as whole tokens, '>' only last)")


def validate_stream_name(name: object, field: str = "stream") -> str:
    """Check a stream name as nats-server does; return it. ``TypeError``/``ValueError`` name ``field``."""
    return _check_name(name, field)


_BUCKET = re.compile(r"\A[a-zA-Z0-9_-]+\Z")


def check_bucket(bucket: object, name: str = "bucket") -> str:
    """A key-value bucket or object store name, checked (letters, digits, ``_`` and ``-``); return it."""
    if not isinstance(bucket, str):
        raise TypeError(f"{name} must be a str, got {type(bucket).__name__}")
    if not _BUCKET.match(bucket):
        raise ValueError(f"{name} {bucket!r} is not a valid bucket name: use letters, digits, '_' and '-'")
    return bucket


_KEY = re.compile(r"\A[-/_=.a-zA-Z0-9]+\Z")
_KEY_FILTER = re.compile(r"\A[-/_=.a-zA-Z0-9*>]+\Z")


def check_key(key: Any, *, wildcards: bool = False, name: str = "key") -> str:
    """A key (``wildcards``: a watch or keys filter, ``*`` tokens and a trailing ``>`` allowed); return it.

    Raises ``InvalidKeyError`` (a ValueError) naming the key and the rule, TypeError for a non-str. Pure.
    """
    if not isinstance(key, str):
        raise TypeError(f"{name} must be a str, got {type(key).__name__}")
    rule = (_KEY_FILTER if wildcards else _KEY).match(key)
    if not rule or key.startswith(".") or key.endswith(".") or ".." in key:
        allowed = "letters, digits and -/_=." + (", '*' tokens and a trailing '>'" if wildcards else "")
        raise errors.InvalidKeyError(f"{name} {key!r} is not a valid key: use {allowed}; no leading or trailing "
                                     f"'.' and no '..'")
    if wildcards:
        tokens = key.split(".")
        for i, token in enumerate(tokens):
            if ("*" in token or ">" in token) and token not in ("*", ">") or token == ">" and i != len(tokens) - 1:
                raise errors.InvalidKeyError(f"{name} {key!r} is not a valid key filter: '*' stands for one whole "
                                             f"token and '>' only for the last")
    return key


def optional_seconds(value: Any, name: str, minimum: float = 0.0) -> float | None:
    """A duration option (seconds or a timedelta) of at least ``minimum``; None (or 0) for unset."""
    seconds = to_seconds(value, name)
    if seconds is not None and seconds < minimum:
        raise ValueError(f"{name} must be at least {minimum:g} seconds, got {value!r}")
    return seconds or None


def optional_limit(value: Any, name: str) -> int | None:
    """A size limit option: a positive int, or -1 / None for unlimited (None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1 and value != -1:
        raise ValueError(f"{name} must be a positive int (or -1 or None: unlimited), got {value!r}")
    return None if value == -1 else int(value)


def validate_consumer_name(name: object, field: str = "name") -> str:
    """Check a consumer (or durable) name as nats-server does; return it."""
    return _check_name(name, field)


_PRIORITY_GROUP = re.compile(r"\A[A-Za-z0-9/_=-]{1,16}\Z")


def check_priority_group(group: object, field: str = "group") -> str:
    """A priority group name (ADR-42: 1 to 16 letters, digits, ``-``, ``_``, ``/`` or ``=``), checked as
    nats-server does; return it. ``TypeError``/``ValueError`` name ``field``. Pure."""
    if not isinstance(group, str):
        raise TypeError(f"{field} must be a str, got {type(group).__name__}")
    if not _PRIORITY_GROUP.match(group):
        raise ValueError(f"{field} {group!r} is not a valid priority group name: 1 to 16 letters, digits, "
                         f"'-', '_', '/' or '='")
    return group


# ---------------------------------------------------------------------------------------------
# Field building blocks: converters normalise, validators enforce invariants (STYLE rule 8).
# Converters need the field's name for their messages, but attrs.field() does not know it yet,
# so each one sits in metadata["convert"] and `_bind_names` (a field_transformer, attrs >= 20.3)
# binds it with the name when the class is built.
# ---------------------------------------------------------------------------------------------

_Conv = Callable[..., Any]


def _bind_names(cls: type, fields: list[attrs.Attribute]) -> list[attrs.Attribute]:
    out = []
    for f in fields:
        conv = f.metadata.get("convert")
        out.append(f.evolve(converter=functools.partial(conv, field=f.name)) if conv else f)
    return out


def _field(convert: _Conv | None = None, *, kind: str | None = None, cls: type | None = None,
           validator: Any = None, default: Any = None, wire: str | None = None,
           negative_is_none: bool = False, **kw: Any) -> Any:
    metadata: dict[str, Any] = {"kind": kind, "cls": cls, "negative_is_none": negative_is_none}
    if wire:
        metadata["wire"] = wire
    if convert:
        metadata["convert"] = convert
    if "factory" not in kw:
        kw["default"] = default
    return attrs.field(validator=validator, metadata=metadata, **kw)


def _as_int(value: Any, *, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field} must be an int, got {type(value).__name__}")
    return int(value)


def _int_range(lo: int | None = None, hi: int | None = None, note: str = "") -> Callable[..., None]:
    def check(_inst: Any, attr: attrs.Attribute, value: int | None) -> None:
        if value is None:
            return
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            if hi is None:
                allowed = f">= {lo}"
            elif lo is None:
                allowed = f"<= {hi}"
            else:
                allowed = f"between {lo} and {hi}"
            raise ValueError(f"{attr.name} must be {allowed}{note}, got {value}")

    return check


def _int(lo: int | None = None, hi: int | None = None, note: str = "", **kw: Any) -> Any:
    return _field(_as_int, validator=_int_range(lo, hi, note), **kw)


_UNLIMITED = " (-1 means unlimited)"


def _limit() -> Any:
    """An int limit where -1 means unlimited, as the server spells it."""
    return _int(-1, note=_UNLIMITED)


def _typed(*types: type) -> Callable[..., None]:
    names = " or ".join(t.__name__ for t in types)

    def check(_inst: Any, attr: attrs.Attribute, value: Any) -> None:
        if value is not None and not isinstance(value, types):
            raise TypeError(f"{attr.name} must be a {names}, got {type(value).__name__}")

    return check


def _require_str(value: Any, field: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{field} must not be empty")


def _str(**kw: Any) -> Any:
    return _field(validator=_typed(str), **kw)


def _bool(**kw: Any) -> Any:
    return _field(validator=_typed(bool), **kw)


def _any(**kw: Any) -> Any:
    """A plain value taken as the server sent it (info counters and the like)."""
    return _field(**kw)


def _conv_duration(value: Any, *, field: str) -> float | None:
    return to_seconds(value, field)


def _duration(*, negative_is_none: bool = False) -> Any:
    return _field(_conv_duration, kind="duration", negative_is_none=negative_is_none)


def _conv_durations(value: Any, *, field: str) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{field} must be a list of durations (seconds or timedelta), got {type(value).__name__}")
    return [to_seconds(v, f"{field}[{i}]") for i, v in enumerate(value)]  # type: ignore[misc]


def _conv_time(value: Any, *, field: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_time(value)
        except ValueError as exc:
            raise ValueError(f"{field}: {exc}") from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{field} must be a timezone-aware datetime (got naive {value!r})")
        if isinstance(value, Timestamp):
            if value.utcoffset() == timedelta(0):
                return value  # keeps its nanoseconds and the server's text
            return Timestamp._make(value.astimezone(timezone.utc), value.nanosecond)
        return value.astimezone(timezone.utc)
    raise TypeError(f"{field} must be a datetime or an RFC 3339 str, got {type(value).__name__}")


def _time() -> Any:
    return _field(_conv_time, kind="time")


def _enum(enum_cls: type[_WireEnum], **kw: Any) -> Any:
    def convert(value: Any, *, field: str) -> Any:
        if value is None or isinstance(value, enum_cls):
            return value
        try:
            return enum_cls(value)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in enum_cls)
            raise ValueError(f"{field} must be one of {allowed} (a {enum_cls.__name__}), got {value!r}") from None

    return _field(convert, kind="enum", **kw)


def _strs(**kw: Any) -> Any:
    def convert(value: Any, *, field: str) -> list[str] | None:
        if value is None:
            return None
        if isinstance(value, str):
            raise TypeError(f"{field} must be a list of str, not a bare str: did you mean {field}=[{value!r}]?")
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{field} must be a list of str, got {type(value).__name__}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise TypeError(f"{field}[{i}] must be a str, got {type(item).__name__}")
            if not item:
                raise ValueError(f"{field}[{i}] must not be empty")
        return list(value)

    return _field(convert, **kw)


def _conv_str_map(value: Any, *, field: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a dict of str to str, got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"{field} must be a dict of str to str, got {k!r}: {v!r}")
    return dict(value)


def _str_map() -> Any:
    return _field(_conv_str_map)


def _conv_dict(value: Any, *, field: str) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a dict, got {type(value).__name__}")
    return dict(value)


def _conv_list(value: Any, *, field: str) -> list | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{field} must be a list, got {type(value).__name__}")
    return list(value)


def _nested(target: type, **kw: Any) -> Any:
    """A nested wire type; a plain dict of its field names is accepted and converted."""

    def convert(value: Any, *, field: str) -> Any:
        if value is None or isinstance(value, target):
            return value
        if isinstance(value, Mapping):
            try:
                return target(**value)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{field}: {exc}") from exc
        raise TypeError(f"{field} must be a {target.__name__} (or a dict of its fields), got {type(value).__name__}")

    return _field(convert, kind="nested", cls=target, **kw)


def _nested_list(target: type, **kw: Any) -> Any:
    item = _nested(target).metadata["convert"]

    def convert(value: Any, *, field: str) -> list | None:
        if value is None:
            return None
        if isinstance(value, (str, bytes, Mapping, target)) or not isinstance(value, Sequence):
            raise TypeError(f"{field} must be a list of {target.__name__}, got {type(value).__name__}")
        return [item(v, field=f"{field}[{i}]") for i, v in enumerate(value)]

    return _field(convert, kind="nested_list", cls=target, **kw)


def _extra() -> Any:
    """Keys this client does not know, and values it reads as None (Go's zero time, -1 for "never"),
    exactly as the server sent them (written back out)."""
    return _field(_conv_dict, kind="extra", factory=dict, repr=False)


# ---------------------------------------------------------------------------------------------
# The serializer: one walk over attrs fields, steered by metadata["kind"].
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class _Slot:
    name: str
    wire: str
    kind: str | None
    cls: Any
    negative_is_none: bool


@functools.cache
def _slots(cls: type) -> dict[str, _Slot]:
    """Wire name -> slot for every serialised field of ``cls`` (everything but ``extra``)."""
    out = {}
    for a in attrs.fields(cls):
        md = a.metadata
        if md.get("kind") == "extra":
            continue
        wire = md.get("wire", a.name)
        out[wire] = _Slot(a.name, wire, md.get("kind"), md.get("cls"), md.get("negative_is_none", False))
    return out


class _UnknownKeys(ValueError):
    """Strict mode: the server sent keys no field maps to (``paths`` are dotted, from ``cls``)."""

    def __init__(self, cls: type, paths: list[str]):
        self.paths = paths
        super().__init__(f"{cls.__name__}.from_response: unknown keys from the server: {', '.join(paths)}")


def _decode(slot: _Slot, value: Any, strict: bool) -> Any:
    # Only what the converters cannot tell apart from user input is decoded here: an int is
    # seconds for a user but nanoseconds on the wire. Times and enums go to the converters as is.
    if value is None:
        return None
    kind = slot.kind
    if kind == "duration":
        if slot.negative_is_none and value < 0:
            return None  # the server reports "never" as -1 ns (e.g. a source never active)
        return nanos_to_seconds(value)
    if kind == "durations":
        return [nanos_to_seconds(v) for v in value]
    if kind == "nested":
        try:
            return slot.cls.from_response(value, strict=strict)
        except _UnknownKeys as exc:
            raise _UnknownKeys(slot.cls, [f".{p}" for p in exc.paths]) from None
    if kind == "nested_list":
        items, unknown = [], []
        for i, v in enumerate(value):
            try:
                items.append(slot.cls.from_response(v, strict=strict))
            except _UnknownKeys as exc:
                unknown += [f"[{i}].{p}" for p in exc.paths]
        if unknown:
            raise _UnknownKeys(slot.cls, unknown)
        return items
    if kind == "b64":
        return base64.b64decode(value)
    if kind == "headers":
        return decode_headers(base64.b64decode(value))
    return value


def _encode(kind: str | None, value: Any) -> Any:
    if kind == "duration":
        return seconds_to_nanos(value)
    if kind == "durations":
        return [seconds_to_nanos(v) for v in value]
    if kind == "time":
        return format_time(value)
    if kind == "enum":
        return value.value
    if kind == "nested":
        return _to_wire(value)
    if kind == "nested_list":
        return [_to_wire(v) for v in value]
    if kind == "b64":
        return base64.b64encode(value).decode("ascii")
    if kind == "headers":
        return base64.b64encode(encode_headers(value)).decode("ascii")
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


class _BadField(ValueError):
    """A field whose value cannot be converted; ``path`` is dotted from the top object."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


_GO_ZERO_TIME = "0001-01-01T00:00:00Z"  # how the server writes an unset time.Time


def _from_wire(cls: type, data: Mapping[str, Any], strict: bool) -> Any:
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__}.from_response expects a dict, got {type(data).__name__}")
    slots = _slots(cls)
    envelope = cls._envelope  # type: ignore[attr-defined]
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    nested_unknown: list[str] = []
    kept: dict[str, Any] = {}  # wire values read as None, written back as they came
    for key, value in data.items():
        slot = slots.get(key)
        if slot is not None:
            try:
                decoded = kwargs[slot.name] = _decode(slot, value, strict)
                if decoded is None and value is not None:
                    kept[key] = value
                elif slot.kind == "time" and value == _GO_ZERO_TIME:
                    kept[key] = value
            except _UnknownKeys as exc:  # strict: keep going, report every unknown key at once
                nested_unknown += [f"{key}{p}" for p in exc.paths]
            except _BadField as exc:
                raise _BadField(f"{key}.{exc.path}", exc.reason) from None
            except (TypeError, ValueError, AttributeError, OverflowError) as exc:
                # A nested object's own check already names its field; a plain value is shown.
                reason = str(exc) if isinstance(value, (Mapping, list)) else f"{value!r} is not a valid value ({exc})"
                raise _BadField(key, reason) from None
        elif key not in envelope:
            extra[key] = value
    if strict and (extra or nested_unknown):
        raise _UnknownKeys(cls, sorted([*extra, *nested_unknown]))
    extra.update(kept)
    if extra:
        kwargs["extra"] = extra
    return cls(**kwargs)


def _to_wire(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for slot in _slots(type(obj)).values():
        value = getattr(obj, slot.name)
        if value is not None:  # None = unset: leave it out so the server default applies
            out[slot.wire] = _encode(slot.kind, value)
    for key, value in obj.extra.items():
        out.setdefault(key, copy.deepcopy(value))
    return out


class _Wire:
    """Base of every wire type: ``from_response`` and a repr that skips unset fields."""

    __slots__ = ()
    _envelope: frozenset[str] = frozenset()  # response envelope keys that are not data

    @classmethod
    def from_response(cls, data: Mapping[str, Any], *, strict: bool = False) -> Any:
        """Build from server JSON (already ``json.loads``-ed); nested types convert too.

        Unknown keys are kept in ``extra``; with ``strict=True`` they raise ``ValueError``
        listing them instead (tests use this to catch schema drift).
        """
        try:
            return _from_wire(cls, data, strict)
        except _BadField as exc:
            raise ValueError(f"{cls.__name__}.from_response: field {exc.path}: {exc.reason}") from None

    def to_dict(self) -> dict[str, Any]:
        """The server's JSON for this object (no I/O): durations in nanoseconds, times RFC 3339,
        unset fields left out, unknown server fields (``extra``) kept. ``json.dumps`` takes it as is."""
        return _to_wire(self)

    def __repr__(self) -> str:
        parts = [
            f"{a.name}={getattr(self, a.name)!r}"
            for a in attrs.fields(type(self))
            if a.repr and getattr(self, a.name) is not None
        ]
        return f"{type(self).__name__}({', '.join(parts)})"


class _Config(_Wire):
    """A wire type that is also sent to the server."""

    __slots__ = ()

    def to_request(self) -> dict[str, Any]:
        """The JSON-ready dict for the server: unset (None) fields left out, ``extra`` kept."""
        return _to_wire(self)
