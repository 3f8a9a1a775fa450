# Reading a range of a stream (by sequence, by time, by subject) into Arrow record batches, without
# durable state: ``Stream.iter_batches`` / ``to_arrow`` / ``to_pandas`` and the Spark source's
# executors all read a range here.
#
# Rule 1: one request before anything is read (the stream's info, which fixes the range's end when
#         none is given); then batch direct gets (ADR-31) where the stream allows them, else one
#         ordered consumer, deleted when the read ends. Nothing is left on the server either way.
# Rule 2: memory is bounded by ``batch_size`` rows plus the direct gets' look-ahead, for any range:
#         messages become columns a run at a time (no object per message) and a record batch once
#         ``batch_size`` rows are there.
# Rule 3: pyarrow and pandas are the ``[arrow]`` extra, imported when a read builds its first batch;
#         without them the call raises ``ImportError`` naming the extra. User-thread only.
from __future__ import annotations

import contextlib
import json
import numbers
import time
from datetime import datetime
from typing import Any, Iterator

import attrs

from . import errors
from ._protocol import check_subject
from ._header_columns import header_columns
from ._headers import Headers
from ._jsapi import ColumnRun
from ._time import format_time

__all__ = ["ARROW_EXTRA", "DECODINGS", "RangeSpec", "arrow_schema", "iter_batches", "read_batches", "read_mode",
           "require_pandas", "require_pyarrow", "to_arrow", "to_pandas"]

#: The extra that brings pyarrow and pandas.
ARROW_EXTRA = "jetstream-sync[arrow]"
#: What ``decode=`` takes.
DECODINGS = (None, "utf-8", "json")
#: Messages asked for by the first no-wait pull when the stream does not allow direct gets; the next
#: pulls ask for as many as _PULL_BYTES holds at the sizes seen so far, up to _FETCH_MAX (fewer round
#: trips for small messages, a bounded pull for large ones, and no max_bytes a message could exceed).
_FETCH = 1000
_FETCH_MAX = 10_000
_PULL_BYTES = 4 * 1024 * 1024
#: The ordered consumer of a read without direct gets is removed by the server this long after a read
#: that was killed (a read that ends deletes it at once).
_INACTIVE = 10.0
#: A read that ends before the range's last sequence on a replicated stream asks again after these
#: pauses (seconds): a replica that had not yet stored the range's tail may have answered.
_SHORT_READ_RETRIES = (0.05, 0.25)
#: After those, the stream's leader is asked whether the rest of the range holds a message; while it
#: does, the read goes on from it every _SETTLE_PAUSE s, for at most _REPLICA_SETTLE s (then a
#: TimeoutError: a message is never skipped because a replica had not stored it yet).
_SETTLE_PAUSE = 0.25
_REPLICA_SETTLE = 10.0


def require_pyarrow() -> Any:
    """The ``pyarrow`` module, or ``ImportError`` naming the extra that brings it."""
    try:
        import pyarrow
    except ImportError as exc:
        raise ImportError(f"reading a stream into Arrow needs pyarrow: pip install '{ARROW_EXTRA}'") from exc
    return pyarrow


def require_pandas() -> Any:
    """The ``pandas`` module, or ``ImportError`` naming the extra that brings it."""
    require_pyarrow()
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(f"reading a stream into pandas needs pandas: pip install '{ARROW_EXTRA}'") from exc
    return pandas


def arrow_schema() -> Any:
    """The columns of every read (as the Spark source's read schema, with the server's nanoseconds):
    ``subject``, ``data``, ``headers``, ``stream``, ``seq``, ``timestamp``, ``msg_id``."""
    pa = require_pyarrow()
    return pa.schema([
        pa.field("subject", pa.string()),
        pa.field("data", pa.binary()),
        pa.field("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
        pa.field("stream", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("timestamp", pa.timestamp("ns", tz="UTC")),
        pa.field("msg_id", pa.string()),
    ])


def _seq(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a stream sequence (an int >= 1) or None, got {value!r}")
    return int(value)


def _time(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be an aware datetime or None, got {type(value).__name__}")
    if value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (with a timezone, e.g. datetime.now(timezone.utc)), "
                         f"got the naive {value!r}")
    return value


def _ns(value: datetime) -> int:
    exact = getattr(value, "timestamp_ns", None)
    if exact is not None:
        return int(exact())
    return round(value.timestamp() * 1e6) * 1000


@attrs.frozen
class RangeSpec:
    """What a range read reads: sequences ``start <= seq < end`` (None: from the first / to the last
    when the read began), stored at ``start_time <= t < end_time``, on ``subject`` (wildcards
    allowed), ``batch_size`` rows per record batch, payloads decoded as ``decode`` says."""

    start: int | None = None
    end: int | None = None
    subject: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    batch_size: int = 10_000
    decode: str | None = None

    @classmethod
    def checked(cls, start: Any = None, end: Any = None, *, subject: Any = None, start_time: Any = None,
                end_time: Any = None, batch_size: Any = 10_000, decode: Any = None) -> "RangeSpec":
        """The spec, or ``ValueError``/``TypeError`` naming the bad argument (nothing is sent)."""
        s, e = _seq(start, "start"), _seq(end, "end")
        if s is not None and e is not None and e < s:
            raise ValueError(f"end ({e}) must be >= start ({s}): the range is start <= seq < end")
        if s is not None and start_time is not None:
            raise ValueError("start and start_time are exclusive: give one or the other")
        st, et = _time(start_time, "start_time"), _time(end_time, "end_time")
        if st is not None and et is not None and et < st:
            raise ValueError(f"end_time ({et.isoformat()}) must not be before start_time ({st.isoformat()})")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1 (rows per record batch), got {batch_size!r}")
        if decode not in DECODINGS:
            raise ValueError(f"decode must be None, 'utf-8' or 'json', got {decode!r}")
        return cls(s, e, None if subject is None else check_subject(subject), st, et, batch_size, decode)


# -- reading runs of messages ------------------------------------------------------------------


def _direct_runs(js: Any, stream: str, spec: RangeSpec, start: int, end: int, timeout: Any) -> Iterator[ColumnRun]:
    """Runs of ``[start, end)`` (or from ``spec.start_time`` when ``start`` is 0) by batch direct gets."""
    first: dict[str, Any] = {"next_by_subj": spec.subject or ">"}
    if start:
        first["seq"] = start
    else:
        first["start_time"] = spec.start_time
    total = end - start if start else None
    batch = js._jsapi.direct_batch(stream, _wire(first), multi=False, total=total, max_bytes=None, timeout=timeout)
    try:
        yield from batch.column_runs()
    finally:
        batch.close()


def _wire(first: dict[str, Any]) -> dict[str, Any]:
    if "start_time" in first:
        first["start_time"] = format_time(first["start_time"])
    return first


def _ordered_runs(js: Any, stream: str, spec: RangeSpec, start: int, end: int, timeout: Any) -> Iterator[ColumnRun]:
    """Runs of ``[start, end)`` through one ordered consumer, pulled with no-wait requests (a range
    with nothing more in it ends at once); deleted when the read ends."""
    fields: dict[str, Any] = {"inactive_threshold": _INACTIVE}
    if spec.subject is not None:
        fields["filter_subject"] = spec.subject
    if start:
        fields.update(deliver_policy="by_start_sequence", opt_start_seq=start)
    else:
        fields.update(deliver_policy="by_start_time", opt_start_time=spec.start_time)
    oc = js.ordered_consumer(stream, **fields)
    nxt = start
    empty = 0
    ask = _FETCH
    try:
        while True:
            seqs: list[int] = []
            subjects: list[str] = []
            datas: list[bytes] = []
            times: list[int] = []
            headers: list[bytes | None] = []
            with_headers = False
            done = False
            with oc.fetch_no_wait(max(1, min(ask, end - nxt)) if nxt else ask) as batch:
                for msg in batch:  # per message: the header block kept raw, decoded a batch at a time
                    seq, _, pending, ts_ns = msg.metadata_numbers()
                    seqs.append(seq)
                    subjects.append(msg.subject)
                    datas.append(msg.data)
                    times.append(ts_ns)
                    raw = msg._raw_headers
                    if raw:
                        with_headers = True
                        headers.append(raw)
                    else:
                        headers.append(None)
                    nxt = seq + 1
                    if nxt >= end or pending == 0:
                        done = True
                        break
            run = ColumnRun(seqs, subjects, datas, times, headers if with_headers else None)
            if seqs:
                size = sum(map(len, datas)) // len(datas) + 64  # + subject, reply and framing, roughly
                ask = max(1, min(_FETCH_MAX, _PULL_BYTES // size))
                empty = 0
                yield run
            else:
                # A reset of the ordered consumer can end a batch before its first message: only a
                # second empty answer in a row means the range holds nothing more.
                empty += 1
            if done or empty >= 2:
                return
    finally:
        oc.close(wait=True)


def _runs(js: Any, stream: str, direct: bool, replicated: bool, spec: RangeSpec, start: int, end: int,
          timeout: Any) -> Iterator[ColumnRun]:
    """The runs of the range, cut at ``end`` and ``end_time``: every stored message in it once, in order."""
    end_ns = None if spec.end_time is None else _ns(spec.end_time)
    read = _direct_runs if direct else _ordered_runs
    last = 0
    retries = iter(_SHORT_READ_RETRIES if replicated else ())
    deadline: float | None = None
    while True:
        with contextlib.closing(read(js, stream, spec, start, end, timeout)) as runs:
            for run in runs:
                seqs = run.seqs
                cut = len(seqs)
                if seqs[-1] >= end:
                    cut = next(i for i, s in enumerate(seqs) if s >= end)
                if end_ns is not None and cut and run.times_ns[cut - 1] >= end_ns:
                    cut = next(i for i, t in enumerate(run.times_ns) if t >= end_ns)
                if cut < len(seqs):
                    if cut:
                        yield _slice(run, 0, cut)
                    return
                last = seqs[-1]
                yield run
        if last >= end - 1 or not replicated:
            return
        # Ended short of the range's last sequence: its tail may be deleted, or a replica that had not
        # stored it yet answered (an ordered consumer placed on a follower still catching up after a
        # restart finds nothing pending there). Ask again from there, a couple of times; then ask the
        # leader whether the rest of the range holds a message, and read on from it while it does.
        if last:
            start = last + 1
        if start >= end:
            return
        pause = next(retries, None)
        if pause is None:
            if not start:  # read by time and nothing found: no sequence to ask the leader about
                return
            stored = _next_stored(js, stream, spec.subject, start, timeout)
            if stored is None or stored >= end:
                return
            now = time.monotonic()
            if deadline is None:
                deadline = now + _REPLICA_SETTLE
            elif now >= deadline:
                raise errors.TimeoutError.after(
                    f"reading stream {stream!r}", _REPLICA_SETTLE,
                    f"sequence {stored} is stored (its leader says) but the replicas answering the read have not "
                    f"stored it yet")
            start, pause = stored, _SETTLE_PAUSE
        time.sleep(pause)


def _next_stored(js: Any, stream: str, subject: str | None, seq: int, timeout: Any) -> int | None:
    """The sequence of the first message on ``subject`` (any when None) stored at or after ``seq``, as
    the stream's leader says (one message get), or None."""
    try:
        return js._jsapi.msg_get(stream, seq=seq, next_by_subj=subject or ">", timeout=timeout).seq
    except errors.MessageNotFoundError:
        return None


# -- columns into record batches ---------------------------------------------------------------


class _Builder:
    """Rows collected column by column until a record batch's worth is there."""

    def __init__(self, stream: str, spec: RangeSpec) -> None:
        self.pa = require_pyarrow()
        self.schema = arrow_schema()
        self.stream = stream
        self.decode = spec.decode
        self.size = spec.batch_size
        self._clear()

    def _clear(self) -> None:
        self.rows = 0
        self.seqs: list[int] = []
        self.subjects: list[str] = []
        self.datas: list[bytes] = []
        self.times: list[int] = []
        self.headers: list[bytes | Headers | None] | None = None  # None while no row has headers
        self.decoded = False  # a row's headers came decoded (else all are raw blocks or None)

    def add(self, run: ColumnRun) -> Iterator[Any]:
        """Take ``run``; yield the record batches it completes."""
        taken = 0
        n = len(run.seqs)
        while taken < n:
            room = self.size - self.rows
            part = run if taken == 0 and n <= room else _slice(run, taken, taken + room)
            k = len(part.seqs)
            self.seqs += part.seqs
            self.subjects += part.subjects
            self.datas += part.datas
            self.times += part.times_ns
            if part.headers is not None and self.headers is None:
                self.headers = [None] * self.rows
            if self.headers is not None:
                self.headers += part.headers if part.headers is not None else [None] * k
                self.decoded = self.decoded or part.decoded
            self.rows += k
            taken += k
            if self.rows >= self.size:
                yield self.flush()

    def flush(self) -> Any:
        pa = self.pa
        n = self.rows
        if self.headers is None:
            headers = pa.MapArray.from_arrays(pa.array([0] * (n + 1), pa.int32()), pa.array([], pa.string()),
                                              pa.array([], pa.list_(pa.string())))
            msg_id = pa.nulls(n, pa.string())
        else:
            headers, msg_id = header_columns(pa, self.headers, self.schema.field("headers").type, raw=not self.decoded)
        arrays = [
            pa.array(self.subjects, pa.string()),
            pa.array(self.datas, pa.binary()),
            headers,
            pa.repeat(pa.scalar(self.stream, pa.string()), n),
            pa.array(self.seqs, pa.int64()),
            pa.array(self.times, pa.timestamp("ns", tz="UTC")),
            msg_id,
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        if self.decode is not None:
            batch = _decoded(pa, batch, self.decode, self.seqs, self.datas)
        self._clear()
        return batch


def _slice(run: ColumnRun, lo: int, hi: int) -> ColumnRun:
    """The messages ``lo`` to ``hi`` (exclusive) of ``run``."""
    return ColumnRun(run.seqs[lo:hi], run.subjects[lo:hi], run.datas[lo:hi], run.times_ns[lo:hi],
                     None if run.headers is None else run.headers[lo:hi], run.decoded)


def _decoded(pa: Any, batch: Any, decode: str, seqs: list[int], datas: list[bytes]) -> Any:
    """``batch`` with ``data`` as text (``utf-8``), or with the top-level keys of each JSON object
    payload added as columns (``json``)."""
    if decode == "utf-8":
        try:
            text = batch.column("data").cast(pa.string())
        except pa.ArrowInvalid:
            seq = _first_not_utf8(seqs, datas)
            raise ValueError(f"decode='utf-8': the payload of the message at sequence {seq} is not UTF-8 text "
                             f"(read it with decode=None for bytes)") from None
        return batch.set_column(batch.schema.get_field_index("data"), pa.field("data", pa.string()), text)
    objects = []
    for seq, data in zip(seqs, datas):
        try:
            obj = json.loads(data)
        except ValueError as exc:
            raise ValueError(f"decode='json': the payload of the message at sequence {seq} is not JSON ({exc})") \
                from None
        if not isinstance(obj, dict):
            raise ValueError(f"decode='json': the payload of the message at sequence {seq} is a JSON "
                             f"{type(obj).__name__}, not an object (its top-level keys become columns)")
        objects.append(obj)
    keys: dict[str, None] = {}
    for obj in objects:
        keys.update(dict.fromkeys(obj))
    taken = set(batch.schema.names)
    for key in keys:
        values = [obj.get(key) for obj in objects]
        try:
            column = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed kinds: each value as its JSON text
            column = pa.array([None if v is None else json.dumps(v) for v in values], pa.string())
        name = key if key not in taken else f"data.{key}"
        taken.add(name)
        batch = batch.append_column(name, column)
    return batch


def _first_not_utf8(seqs: list[int], datas: list[bytes]) -> int:
    for seq, data in zip(seqs, datas):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return seq
    return seqs[0]


# -- the reads ---------------------------------------------------------------------------------


def read_batches(js: Any, stream: str, spec: RangeSpec, *, start: int, end: int, direct: bool,
                 replicated: bool, timeout: Any) -> Iterator[Any]:
    """Record batches of the messages of ``stream`` with ``start <= seq < end`` (``start`` 0: from
    ``spec.start_time``), as ``spec`` narrows them: the read itself, for callers that know the range
    (the Spark source's executors). ``direct``: read with batch direct gets, else an ordered consumer.
    No request before iteration starts; blocks the calling thread while iterating."""
    if end <= start or (not start and spec.start_time is None):
        return
    builder = _Builder(stream, spec)
    for run in _runs(js, stream, direct, replicated, spec, start, end, timeout):
        yield from builder.add(run)
    if builder.rows:
        yield builder.flush()


def _plan(stream: Any, spec: RangeSpec, timeout: Any) -> tuple[int, int, bool, bool]:
    """(start, end, direct, replicated) of a read of ``stream`` as ``spec`` says, from one stream info
    request (the stream's state now fixes an open end)."""
    require_pyarrow()
    info = stream.info(timeout=timeout)
    state, config = info.state, info.config
    last = state.last_seq or 0
    end = last + 1 if spec.end is None else min(spec.end, last + 1)
    if spec.start_time is not None:
        start = 0
    else:
        start = max(spec.start or 1, state.first_seq or 1)
    return (start, end, *read_mode(stream._js, config))


def read_mode(js: Any, config: Any) -> tuple[bool, bool]:
    """(direct, replicated) for :func:`read_batches` of a stream with ``config``: batch direct gets
    where the stream allows direct gets and the server has them (API level 1), and whether the
    stream has replicas. No I/O."""
    return bool(config.allow_direct) and js._jsapi.supports(1), (config.num_replicas or 1) > 1


def iter_batches(stream: Any, spec: RangeSpec, timeout: Any) -> Iterator[Any]:
    """``Stream.iter_batches``: the plan now (one request), the read as the iterator is consumed."""
    start, end, direct, replicated = _plan(stream, spec, timeout)
    return read_batches(stream._js, stream.name, spec, start=start, end=end, direct=direct,
                        replicated=replicated, timeout=timeout)


def to_arrow(stream: Any, spec: RangeSpec, timeout: Any) -> Any:
    """``Stream.to_arrow``: every batch of the read in one ``pyarrow.Table`` (the schema of
    :func:`arrow_schema`, plus the JSON keys with ``decode="json"``)."""
    pa = require_pyarrow()
    batches = list(iter_batches(stream, spec, timeout))
    if not batches:
        schema = arrow_schema()
        if spec.decode == "utf-8":
            schema = schema.set(schema.get_field_index("data"), pa.field("data", pa.string()))
        return schema.empty_table()
    if spec.decode == "json":
        return pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="permissive")
    return pa.Table.from_batches(batches)


def to_pandas(stream: Any, spec: RangeSpec, timeout: Any) -> Any:
    """``Stream.to_pandas``: :func:`to_arrow` as a ``pandas.DataFrame`` (``timestamp`` as
    ``datetime64[ns, UTC]``, ``headers`` as dicts)."""
    require_pandas()
    return to_arrow(stream, spec, timeout).to_pandas(maps_as_pydicts="strict")

