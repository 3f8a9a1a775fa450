# The Stream handle (ADR-37 "Streams"): info, purge, message get/delete, batch
# direct gets (ADR-31) and the consumer calls scoped to one stream.
#
# Rule 1: a handle is cheap and holds no server resources; ``cached_info`` is
#         what the last round trip said, ``info()`` makes a new one.
# Rule 2: fetching and consuming live on Consumer, not here.
from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Iterable, Iterator, Mapping

from . import errors
from ._protocol import DEFAULT, Timeout, check_subject
from .config import ConsumerConfig, ConsumerInfo, StoredMsg, StreamInfo, format_time
from .consumer import Consumer
from .events import EventStream, open_events
from .push_consumer import PushConsumer
from .ranges import RangeSpec, iter_batches, to_arrow, to_pandas

__all__ = ["Stream"]


def _check_seq(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_time(value: Any, name: str) -> str:
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a timezone-aware datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {value!r} "
                         f"(e.g. {name}.replace(tzinfo=timezone.utc))")
    return format_time(value)


def _check_subjects(subjects: Any) -> list[str]:
    if isinstance(subjects, str):
        return [check_subject(subjects, "subjects")]
    if not isinstance(subjects, Iterable):
        raise TypeError(f"subjects must be a subject or a list of subjects, got {type(subjects).__name__}")
    out = [check_subject(s, "subjects") for s in subjects]
    if not out:
        raise ValueError("subjects must name at least one subject (wildcards allowed)")
    return out


#: The server's "message delete failed" err_code (its description says why).
_DELETE_FAILED = 10057


class Stream:
    """A handle on one stream. Thread-safe; every method but ``cached_info`` blocks on one request."""

    def __init__(self, js: Any, info: StreamInfo) -> None:  # js: its JetStream context, a layer above
        self._js = js
        self._info = info
        self._lock = threading.Lock()
        self.name: str = info.config.name

    @property
    def cached_info(self) -> StreamInfo:
        """The info from the last server round trip. No I/O."""
        return self._info

    def info(self, *, timeout: Timeout = DEFAULT) -> StreamInfo:
        """Fetch fresh info from the server (retried) and cache it. Raises ``StreamNotFoundError``."""
        info = self._js.stream_info(self.name, timeout=timeout)
        self._info = info
        return info

    def purge(self, subject: str | None = None, sequence: int | None = None, keep: int | None = None, *,
              timeout: Timeout = DEFAULT) -> int:
        """Remove messages: all, those on ``subject``, those below ``sequence``, or all but the last ``keep``.

        ``sequence`` and ``keep`` are exclusive (ValueError, nothing sent).
        Blocks on one request. Returns the number purged.
        """
        payload: dict[str, Any] = {}
        if subject is not None:
            payload["filter"] = check_subject(subject)
        if sequence is not None and keep is not None:
            raise ValueError("sequence and keep are exclusive: give one or the other")
        if sequence is not None:
            payload["seq"] = _check_seq(sequence, "sequence")
        if keep is not None:
            payload["keep"] = _check_seq(keep, "keep", minimum=0)
        resp = self._js._jsapi.request(self._js._api.stream_purge(self.name), payload or None, timeout, idempotent=False)
        return int(resp.get("purged", 0))

    def get_msg(self, seq: int, *, timeout: Timeout = DEFAULT) -> StoredMsg:
        """Return the stored message at stream sequence ``seq`` (retried).

        Uses the direct get API when the stream allows it (served by any
        replica), else ``STREAM.MSG.GET``. Raises ``MessageNotFoundError``.
        """
        return self._get(timeout, seq=_check_seq(seq, "seq"))

    def get_last_msg(self, subject: str, *, timeout: Timeout = DEFAULT) -> StoredMsg:
        """Return the last stored message on ``subject`` (retried). Raises ``MessageNotFoundError``."""
        return self._get(timeout, last_by_subj=check_subject(subject))

    def _get(self, timeout: Timeout, *, seq: int | None = None, last_by_subj: str | None = None) -> StoredMsg:
        get = self._js._jsapi.direct_get if self._info.config.allow_direct else self._js._jsapi.msg_get
        return get(self.name, seq=seq, last_by_subj=last_by_subj, timeout=timeout)

    def get_batch(self, batch: int, *, seq: int | None = None, subject: str | None = None,
                  start_time: datetime | None = None, max_bytes: int | None = None,
                  timeout: Timeout = DEFAULT) -> Iterator[StoredMsg]:
        """Read up to ``batch`` stored messages in stream order, without a consumer: an iterator of
        ``StoredMsg`` (batch direct gets; the stream needs ``allow_direct``).

        From ``seq``, or from the first message stored at or after ``start_time`` (an aware
        ``datetime``), else from the first message; only those on ``subject`` (wildcards allowed) when
        given. Deleted messages are skipped. ``max_bytes`` stops it once the messages read add up to
        that many bytes (subject, stored headers and payload of each, as the server counts them; the
        message that reaches the limit is the last). Messages stored while it reads are read too
        when the iterator gets to them.

        Each request asks the server for up to 20,000 messages (2 MiB), which it sends at once; the
        next one goes out at the end of the last while the iterator has at most one request's worth
        unread, so memory stays bounded however many are read. Nothing is sent until iteration
        starts. Iterating blocks the calling thread, at
        most ``timeout`` per wait for the server (Ctrl-C lands within 0.25 s); no callbacks. The
        iterator has ``close()`` and is a context manager, to stop early.

        Raises, before anything is sent: ``ValueError``/``TypeError`` naming a bad argument
        (``seq`` and ``start_time`` are exclusive), ``ValueError`` when the stream's cached info says
        it does not allow direct gets (``allow_direct``), ``FeatureNotSupportedError`` on a server
        before 2.11. While iterating: ``TimeoutError`` (not retried), ``ClientClosedError``,
        ``APIError`` for an error status. Nothing matched is an empty iterator.
        """
        first: dict[str, Any] = {"next_by_subj": ">" if subject is None else check_subject(subject)}
        total = _check_seq(batch, "batch")
        if seq is not None and start_time is not None:
            raise ValueError("seq and start_time are exclusive: give one or the other")
        if seq is not None:
            first["seq"] = _check_seq(seq, "seq")
        if start_time is not None:
            first["start_time"] = _check_time(start_time, "start_time")
        if max_bytes is not None:
            max_bytes = _check_seq(max_bytes, "max_bytes")
        return self._batch("a batch direct get (get_batch)", first, multi=False, total=total, max_bytes=max_bytes,
                           timeout=timeout)

    def iter_batches(self, start: int | None = None, end: int | None = None, *, subject: str | None = None,
                     start_time: datetime | None = None, end_time: datetime | None = None,
                     batch_size: int = 10_000, decode: str | None = None,
                     timeout: Timeout = DEFAULT) -> Iterator[Any]:
        """The stored messages with ``start <= seq < end``, as ``pyarrow.RecordBatch`` es of up to
        ``batch_size`` rows, in stream order (needs the ``jetstream-sync[arrow]`` extra).

        ``start`` None is the first message, ``end`` None the last sequence when this call is made
        (``end`` is exclusive, as the Spark source's ``endingOffsets``). ``start_time`` /
        ``end_time`` (aware datetimes) keep the messages stored at ``start_time <= t < end_time``
        (``start_time`` instead of ``start``; the read ends at the first message stored at or after
        ``end_time``, as stream order is time order); ``subject`` keeps those on that subject
        (wildcards allowed). Deleted messages and gaps are skipped.

        Columns: ``subject`` string, ``data`` binary, ``headers`` map<string, list<string>> (empty when
        none), ``stream`` string, ``seq`` int64, ``timestamp`` timestamp[ns, UTC] (the server's exact
        time), ``msg_id`` string (null when none). ``decode="utf-8"`` makes ``data`` a string column;
        ``decode="json"`` adds the top-level keys of each payload (a JSON object) as columns (a key
        named like a column above becomes ``data.<key>``; the keys of each batch are those its rows have).

        Blocks on one request now (the stream's info: it fixes an open ``end``); iterating blocks the
        calling thread on batch direct gets (no consumer) when the stream allows them, else on one
        ordered consumer deleted when the read ends; nothing is left on the server. Memory is bounded
        by ``batch_size`` whatever the range. No callbacks.

        Raises, before anything is sent: ``ValueError``/``TypeError`` naming a bad argument,
        ``ImportError`` naming the extra without pyarrow. While iterating: ``ValueError`` naming the
        sequence of a payload ``decode`` cannot read, ``TimeoutError``, ``ClientClosedError``,
        ``APIError``.
        """
        spec = RangeSpec.checked(start, end, subject=subject, start_time=start_time, end_time=end_time,
                                 batch_size=batch_size, decode=decode)
        self._js._jsapi.resolve_timeout(timeout)
        return iter_batches(self, spec, timeout)

    def to_arrow(self, start: int | None = None, end: int | None = None, *, subject: str | None = None,
                 start_time: datetime | None = None, end_time: datetime | None = None,
                 batch_size: int = 10_000, decode: str | None = None, timeout: Timeout = DEFAULT) -> Any:
        """:meth:`iter_batches` read whole into one ``pyarrow.Table`` (an empty range is an empty table
        with the same columns). Blocks until the range is read; raises as :meth:`iter_batches` does."""
        spec = RangeSpec.checked(start, end, subject=subject, start_time=start_time, end_time=end_time,
                                 batch_size=batch_size, decode=decode)
        self._js._jsapi.resolve_timeout(timeout)
        return to_arrow(self, spec, timeout)

    def to_pandas(self, start: int | None = None, end: int | None = None, *, subject: str | None = None,
                  start_time: datetime | None = None, end_time: datetime | None = None,
                  batch_size: int = 10_000, decode: str | None = None, timeout: Timeout = DEFAULT) -> Any:
        """:meth:`to_arrow` as a ``pandas.DataFrame`` (``timestamp`` as ``datetime64[ns, UTC]``,
        ``headers`` as dicts). Blocks until the range is read; raises as :meth:`iter_batches` does, and
        ``ImportError`` naming the extra without pandas."""
        spec = RangeSpec.checked(start, end, subject=subject, start_time=start_time, end_time=end_time,
                                 batch_size=batch_size, decode=decode)
        self._js._jsapi.resolve_timeout(timeout)
        return to_pandas(self, spec, timeout)

    def get_last_for(self, subjects: str | Iterable[str], *, up_to_seq: int | None = None,
                     up_to_time: datetime | None = None, batch: int | None = None,
                     timeout: Timeout = DEFAULT) -> Iterator[StoredMsg]:
        """The last stored message of each subject matching ``subjects`` (one subject or a list;
        wildcards allowed), in stream-sequence order: an iterator of ``StoredMsg`` (batch direct gets;
        the stream needs ``allow_direct``).

        ``up_to_seq`` reads the stream as it was at that sequence (included), ``up_to_time`` as it
        was just before that time (an aware ``datetime``; a message stored at that very time is not
        included); they are exclusive. ``batch`` stops after that many messages. The server answers
        for at most 1,024 matching subjects (more is an ``APIError`` with code 413). A read that
        takes more than one request keeps the point in time of the first.

        Nothing is sent until iteration starts; iterating blocks the calling thread as
        :meth:`get_batch` does and raises the same errors. Nothing matched is an empty iterator.
        """
        first: dict[str, Any] = {"multi_last": _check_subjects(subjects)}
        if up_to_seq is not None and up_to_time is not None:
            raise ValueError("up_to_seq and up_to_time are exclusive: give one or the other")
        if up_to_seq is not None:
            first["up_to_seq"] = _check_seq(up_to_seq, "up_to_seq")
        if up_to_time is not None:
            first["up_to_time"] = _check_time(up_to_time, "up_to_time")
        total = None if batch is None else _check_seq(batch, "batch")
        return self._batch("a batch direct get (get_last_for)", first, multi=True, total=total, max_bytes=None,
                           timeout=timeout)

    def _batch(self, what: str, first: dict[str, Any], *, multi: bool, total: int | None, max_bytes: int | None,
               timeout: Timeout) -> Iterator[StoredMsg]:
        jsapi = self._js._jsapi
        jsapi.resolve_timeout(timeout)  # a bad timeout is refused here, before anything is sent
        jsapi.require(what, 1, "2.11")
        if not self._info.config.allow_direct:
            raise ValueError(f"{what} reads with direct gets, and stream {self.name!r} does not allow them: create "
                             f"or update it with allow_direct=True (its cached info says allow_direct is false; "
                             f"stream.info() refreshes that)")
        return jsapi.direct_batch(self.name, first, multi=multi, total=total, max_bytes=max_bytes, timeout=timeout)

    def delete_msg(self, seq: int, *, erase: bool = False, timeout: Timeout = DEFAULT) -> None:
        """Delete the message at ``seq``; ``erase=True`` overwrites it on disk.

        Blocks on one request (not retried). Raises ``MessageNotFoundError``
        when there is no message at ``seq`` (never stored, or already deleted).
        """
        payload: dict[str, Any] = {"seq": _check_seq(seq, "seq")}
        if not isinstance(erase, bool):
            raise TypeError(f"erase must be a bool, got {erase!r}")
        if not erase:
            payload["no_erase"] = True
        # A sequence never stored comes back as 10043, mapped to MessageNotFoundError by errors.py; one
        # purged or deleted as 10057 (delete failed) with the store's "no message found".
        try:
            self._js._jsapi.request(self._js._api.msg_delete(self.name), payload, timeout, idempotent=False)
        except errors.APIError as exc:
            if exc.err_code == _DELETE_FAILED and "no message found" in (exc.description or ""):
                raise errors.MessageNotFoundError(exc.code, exc.err_code, exc.description, stream=exc.stream,
                                                  operation=exc.operation) from exc
            raise

    # -- consumers on this stream ------------------------------------------------

    def create_consumer(self, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                        timeout: Timeout = DEFAULT, **fields: Any) -> "Consumer":
        """See ``JetStream.create_consumer``."""
        return self._js.create_consumer(self.name, config, timeout=timeout, **fields)

    def update_consumer(self, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                        timeout: Timeout = DEFAULT, **fields: Any) -> "Consumer":
        """See ``JetStream.update_consumer``."""
        return self._js.update_consumer(self.name, config, timeout=timeout, **fields)

    def create_or_update_consumer(self, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                                  timeout: Timeout = DEFAULT, **fields: Any) -> "Consumer":
        """See ``JetStream.create_or_update_consumer``."""
        return self._js.create_or_update_consumer(self.name, config, timeout=timeout, **fields)

    def create_push_consumer(self, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                             timeout: Timeout = DEFAULT, **fields: Any) -> "PushConsumer":
        """See ``JetStream.create_push_consumer``."""
        return self._js.create_push_consumer(self.name, config, timeout=timeout, **fields)

    def update_push_consumer(self, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                             timeout: Timeout = DEFAULT, **fields: Any) -> "PushConsumer":
        """See ``JetStream.update_push_consumer``."""
        return self._js.update_push_consumer(self.name, config, timeout=timeout, **fields)

    def create_or_update_push_consumer(self, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                                       timeout: Timeout = DEFAULT, **fields: Any) -> "PushConsumer":
        """See ``JetStream.create_or_update_push_consumer``."""
        return self._js.create_or_update_push_consumer(self.name, config, timeout=timeout, **fields)

    def push_consumer(self, name: str, *, timeout: Timeout = DEFAULT) -> "PushConsumer":
        """See ``JetStream.push_consumer``."""
        return self._js.push_consumer(self.name, name, timeout=timeout)

    def consumer(self, name: str, *, timeout: Timeout = DEFAULT) -> "Consumer":
        """See ``JetStream.consumer``."""
        return self._js.consumer(self.name, name, timeout=timeout)

    def delete_consumer(self, name: str, *, timeout: Timeout = DEFAULT) -> None:
        """See ``JetStream.delete_consumer``."""
        self._js.delete_consumer(self.name, name, timeout=timeout)

    def unpin_consumer(self, name: str, group: str, *, timeout: Timeout = DEFAULT) -> None:
        """See ``JetStream.unpin_consumer``."""
        self._js.unpin_consumer(self.name, name, group, timeout=timeout)

    def consumers(self, *, timeout: Timeout = DEFAULT) -> Iterator[ConsumerInfo]:
        """See ``JetStream.consumers``."""
        return self._js.consumers(self.name, timeout=timeout)

    def consumer_names(self, *, timeout: Timeout = DEFAULT) -> Iterator[str]:
        """See ``JetStream.consumer_names``."""
        return self._js.consumer_names(self.name, timeout=timeout)

    def events(self, *, types: Any = None) -> EventStream:
        """This stream's events (its consumers' too): see ``JetStream.events``. Blocks only to subscribe."""
        return open_events(self._js._conn, ">", types, stream=self.name)

    def ordered_consumer(self, config: Any = None, **fields: Any) -> Any:
        """See ``JetStream.ordered_consumer``."""
        return self._js.ordered_consumer(self.name, config, **fields)

    def __repr__(self) -> str:
        return f"<Stream {self.name!r}>"
