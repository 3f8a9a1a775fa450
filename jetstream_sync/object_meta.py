# What an object store says about an object (ADR-20): ``ObjectInfo`` and ``ObjectLink``, read from and
# written to the meta message's JSON exactly as nats.go writes it, so objects are shared with every
# other client; the subjects and the digest text of an object.
#
# Rule 1: pure: JSON in, JSON out, no I/O. Unknown keys the server or another client wrote survive a
#         read-modify-write (``extra``).
# Rule 2: tolerant on read (a link written without a nuid, as nats.js does; absent fields), exact on
#         write (the field names, ``headers`` as lists, ``options`` only when set).
from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any, Mapping

import attrs

from . import _html
from ._headers import Headers
from ._time import Timestamp, format_time, parse_time

__all__ = ["ObjectInfo", "ObjectLink", "chunk_subject", "digest_of", "meta_subject", "new_nuid"]

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time: what a put writes as mtime (the server's time is the truth)
_KNOWN = frozenset({"name", "description", "headers", "metadata", "options", "bucket", "nuid", "size", "mtime",
                    "chunks", "digest", "deleted"})


def new_nuid() -> str:
    """A fresh 22-character base62 id for an object's chunks (a subject token, unique in practice)."""
    return "".join(secrets.choice(_BASE62) for _ in range(22))


def meta_subject(bucket: str, name: str) -> str:
    """``$O.<bucket>.M.<name, URL-safe base64 of its UTF-8, padded>``."""
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def chunk_subject(bucket: str, nuid: str) -> str:
    return f"$O.{bucket}.C.{nuid}"


def digest_of(sha256: "hashlib._Hash") -> str:
    """The digest text of a finished SHA-256: ``SHA-256=`` and its URL-safe base64."""
    return "SHA-256=" + base64.urlsafe_b64encode(sha256.digest()).decode()


@attrs.frozen
class ObjectLink:
    """Where a link points: an object (``name``) of store ``bucket``, or the whole store (``name`` None)."""

    bucket: str
    name: str | None = None


@attrs.frozen(kw_only=True)
class ObjectInfo:
    """An object as its store describes it (the meta message). Frozen; derive with ``attrs.evolve``."""

    name: str
    bucket: str = ""
    description: str | None = None
    #: Headers stored with the object (reads like ``Msg.headers``; lists of values on the wire).
    headers: Headers = attrs.field(factory=Headers, converter=lambda v: v if isinstance(v, Headers) else Headers(v or {}))
    metadata: dict[str, str] = attrs.field(factory=dict, converter=lambda v: dict(v or {}))
    #: The id of its chunks' subject (``$O.<bucket>.C.<nuid>``); "" for a link written without one.
    nuid: str = ""
    size: int = 0
    chunks: int = 0
    #: ``SHA-256=<URL-safe base64>`` ("" for a link or a deleted object).
    digest: str = ""
    deleted: bool = False
    #: When the meta was stored: the server's time (nanoseconds kept) on an info read back, the client's
    #: clock on the info a put, ``update_meta`` or link returns; None on an info built by hand.
    mtime: Timestamp | None = None
    #: What this object links to (None: it holds data).
    link: ObjectLink | None = None
    #: The chunk size it was written with (0: not said).
    chunk_size: int = 0
    #: Keys of the meta JSON this client does not know, written back unchanged.
    extra: dict[str, Any] = attrs.field(factory=dict, repr=False)

    @property
    def is_link(self) -> bool:
        return self.link is not None

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any], mtime: Timestamp | None = None) -> "ObjectInfo":
        """Read a meta message's JSON (``mtime``: the message's time). Raises ValueError for non-JSON."""
        doc = json.loads(data) if isinstance(data, (bytes, str)) else dict(data)
        if not isinstance(doc, dict):
            raise ValueError("an object's meta must be a JSON object")
        options = doc.get("options") or {}
        link = options.get("link") if isinstance(options, dict) else None
        when = mtime
        if when is None and doc.get("mtime") and doc["mtime"] != _ZERO_TIME:
            try:
                when = parse_time(doc["mtime"])
            except ValueError:
                when = None
        return cls(name=doc.get("name", ""), bucket=doc.get("bucket", ""), description=doc.get("description") or None,
                   headers=Headers.from_multi(doc.get("headers") or {}), metadata=doc.get("metadata") or {},
                   nuid=doc.get("nuid", ""), size=int(doc.get("size", 0) or 0), chunks=int(doc.get("chunks", 0) or 0),
                   digest=doc.get("digest", "") or "", deleted=bool(doc.get("deleted", False)), mtime=when,
                   link=ObjectLink(link.get("bucket", ""), link.get("name") or None) if isinstance(link, dict) else None,
                   chunk_size=int(options.get("max_chunk_size", 0) or 0) if isinstance(options, dict) else 0,
                   extra={k: v for k, v in doc.items() if k not in _KNOWN})

    def to_json(self) -> bytes:
        """The meta message's JSON, as nats.go writes it."""
        doc: dict[str, Any] = {"name": self.name}
        if self.description:
            doc["description"] = self.description
        if self.headers:
            doc["headers"] = self.headers.multi()
        if self.metadata:
            doc["metadata"] = self.metadata
        options: dict[str, Any] = {}
        if self.link is not None:
            options["link"] = {"bucket": self.link.bucket, **({"name": self.link.name} if self.link.name else {})}
        if self.chunk_size:
            options["max_chunk_size"] = self.chunk_size
        if options:
            doc["options"] = options
        doc.update(bucket=self.bucket, nuid=self.nuid, size=self.size,
                   mtime=format_time(self.mtime) if self.mtime is not None else _ZERO_TIME, chunks=self.chunks)
        if self.digest:
            doc["digest"] = self.digest
        if self.deleted:
            doc["deleted"] = True
        doc.update(self.extra)
        return json.dumps(doc, separators=(",", ":")).encode()

    def _repr_html_(self) -> str:
        rows = [("size", _html.size(self.size)), ("chunks", self.chunks), ("digest", self.digest or None),
                ("modified", self.mtime), ("description", self.description), ("deleted", self.deleted or None)]
        if self.link is not None:
            rows.append(("link", f"{self.link.bucket}/{self.link.name or '*'}"))
        return _html.kv_table("Object", self.name, rows)
