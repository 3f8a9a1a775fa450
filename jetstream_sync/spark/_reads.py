# The reads of the "jetstream" data source: planning turns settings into stream sequence ranges, executors
# read exactly those. Rule 1: the stream sequence is the only offset; a partition is a half-open range
# read by the core range reader (jetstream_sync.ranges.read_batches: batch direct gets where the stream
# allows them, else one ordered consumer deleted when the read ends; no durable state); a streaming
# offset is {"<stream>": <last sequence read>}. Rule 2: planning costs one stream info request per call
# (plus one pull for startingTimestamp), which also says how executors read (ranges.read_mode, carried
# in each partition); executors only turn the core's record batches into Spark's with column casts and
# selections (no per-row Python). Rule 3: public jetstream_sync API, plus jetstream_sync.ranges.
# Rule 4: subject filters a batch query pushes down (_pushdown decides which) replace the subject option
# of the read: a partition is read once per pushed filter, and the server sends only matching messages.
"""Readers of the ``jetstream`` data source: ``spark.read`` and ``spark.readStream``."""

from __future__ import annotations

import datetime as _dt
import logging
import math
import os
import time
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

import jetstream_sync as jss
from jetstream_sync.config import RetentionPolicy
from jetstream_sync.ranges import RangeSpec, read_batches, read_mode, require_pyarrow

from . import _pushdown
from ._connections import PLANNING_TRY, drop
from ._options import ReadSettings

try:  # PySpark >= 4.2: read limits (maxMessagesPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0/4.1: latestOffset() takes no arguments
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

log = logging.getLogger(__name__)

READ_SCHEMA = StructType([
    StructField("subject", StringType()),
    StructField("data", BinaryType()),
    StructField("headers", MapType(StringType(), ArrayType(StringType()))),
    StructField("stream", StringType()),
    StructField("seq", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("msg_id", StringType()),
])
"""The schema of every read: one row per stored message; ``seq`` is the stream sequence (the offset)."""

#: Default partition size when minPartitions is not given (sequences per partition).
_SEQS_PER_PARTITION = 10_000
#: Rows per Arrow record batch handed to Spark.
_ARROW_ROWS = 4096
#: The ordered consumer of a startingTimestamp lookup is deleted when the lookup ends; one left behind
#: by a killed driver is removed by the server after this long.
_INACTIVE = 10.0
#: Seconds the planning side asks a replicated stream's info again while it says a last sequence below the
#: checkpointed offset: a leader just elected may answer before it has applied everything stored.
_LEADER_SETTLE = 10.0
#: Seconds between those asks.
_SETTLE_POLL = 0.25
#: Failures of the connection itself: the cached client is dropped so a retried task reconnects.
_TRANSPORT_ERRORS = (jss.ClientClosedError, jss.NotConnectedError, jss.NoServersError, jss.TimeoutError)


class DataLossError(jss.JetStreamError):
    """Messages a query was about to read were already removed (limits, purge) and
    ``failOnDataLoss`` is true."""


# Named by the module it is documented and imported from, as tracebacks on the driver show it.
DataLossError.__module__ = "jetstream_sync.spark.datasource"


def _check_read_schema(schema: StructType) -> StructType:
    """A user-given read schema may pick and reorder the documented columns, nothing else."""
    known = {f.name: f.dataType for f in READ_SCHEMA.fields}
    for field in schema.fields:
        if field.name not in known:
            raise ValueError(f"the jetstream source has no column {field.name!r}; its columns are "
                             f"{', '.join(known)}")
        if field.dataType != known[field.name]:
            raise ValueError(f"column {field.name!r} is {known[field.name].simpleString()} in the jetstream source, "
                             f"not {field.dataType.simpleString()}")
    return schema


# -- resolving sequences (driver side) ------------------------------------------------------------


def refuse_work_queue(config: Any, stream: str) -> None:
    """ValueError naming the consumer mode when ``config`` (a stream's) is a work-queue stream: a replay
    read neither may create its ordered consumers there nor would it take the jobs off the queue."""
    if config.retention is RetentionPolicy.WORKQUEUE:
        raise ValueError(
            f"stream {stream!r} is a work-queue stream (retention 'workqueue'): its messages are jobs to be taken "
            f"once and removed when acknowledged, which a replay read does not do. Read it with "
            f".option('mode', 'consumer').option('durable', '<consumer name>') on spark.readStream")


def _bounds(js: jss.JetStream, stream: str) -> tuple[int, int, tuple[bool, bool]]:
    """(first stored sequence, last sequence, how executors read it: ``ranges.read_mode``); first is
    last + 1 when nothing is stored. One request (asked again every ``PLANNING_TRY`` s while unanswered)."""
    info = js.stream_info(stream, timeout=PLANNING_TRY)
    refuse_work_queue(info.config, stream)
    last = info.state.last_seq or 0
    first = info.state.first_seq or 0
    return (first if first else last + 1), last, read_mode(js, info.config)


def _ordered(js: jss.JetStream, settings: ReadSettings, **fields: Any) -> jss.OrderedConsumer:
    if settings.subject is not None:
        fields["filter_subject"] = settings.subject
    return js.ordered_consumer(settings.stream, inactive_threshold=_INACTIVE, **fields)


def _seq_at_time(js: jss.JetStream, settings: ReadSettings, when: _dt.datetime) -> int | None:
    """Sequence of the first (matching) message stored at or after ``when``, or None."""
    oc = _ordered(js, settings, deliver_policy="by_start_time", opt_start_time=when)
    try:
        for _ in range(2):  # an empty answer may be an ordered-consumer reset: ask once more
            with oc.fetch_no_wait(1) as batch:
                for msg in batch:
                    return msg.metadata.sequence.stream
        return None
    finally:
        oc.close(wait=True)


def _first_to_read(js: jss.JetStream, settings: ReadSettings, first: int, last: int) -> int:
    """The first sequence a read starts at (inclusive), from startingTimestamp/startingOffsets."""
    if settings.starting_timestamp is not None:
        seq = _seq_at_time(js, settings, settings.starting_timestamp)
        return last + 1 if seq is None else seq
    if settings.starting == "earliest":
        return first
    if settings.starting == "latest":
        return last + 1
    return int(settings.starting)


def _data_loss(stream: str, wanted: int, first: int) -> DataLossError:
    return DataLossError(
        f"stream {stream!r}: messages from sequence {wanted} to {first - 1} are no longer stored (the stream's "
        f"first sequence is {first}: removed by its limits or a purge) and failOnDataLoss is true. Set the "
        f"option failOnDataLoss=false to skip ahead to sequence {first}, or read from startingOffsets='earliest'")


def split_range(start: int, end: int, parts: int | None) -> list[tuple[int, int]]:
    """Split the sequences ``[start, end)`` into contiguous half-open ranges.

    Exactly ``parts`` ranges when the span holds at least that many sequences (else one per
    sequence); with ``parts=None``, one range per 10,000 sequences. Sizes differ by at most one.
    """
    span = end - start
    if span <= 0:
        return []
    n = parts if parts is not None else math.ceil(span / _SEQS_PER_PARTITION)
    n = max(1, min(n, span))
    size, extra = divmod(span, n)
    out = []
    lo = start
    for i in range(n):
        hi = lo + size + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


class SequenceRange(InputPartition):
    """One partition: the stream sequences ``start <= seq < end``, read by batch direct gets when
    ``direct`` (else one ordered consumer); ``replicated``: the stream has replicas (a read that ends
    short of ``end`` asks again, as a replica may lag)."""

    def __init__(self, start: int, end: int, direct: bool = False, replicated: bool = False) -> None:
        self.start = start
        self.end = end
        self.direct = direct
        self.replicated = replicated


def default_partitions(span: int, cores: int | None = None) -> int:
    """Partitions of a read of ``span`` sequences without ``minPartitions``: one per 10,000 sequences,
    at most one per core (``os.cpu_count()`` where the read is planned: the parallelism of a
    ``local[*]`` session). Every partition costs a task and a read; more than the cores can run at
    once only adds that cost. On a cluster, set ``minPartitions`` to its number of executor cores."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, min(math.ceil(span / _SEQS_PER_PARTITION), cores))


def _partitions(settings: ReadSettings, start: int, end: int, mode: tuple[bool, bool]) -> list[InputPartition]:
    parts = settings.min_partitions
    if parts is None:
        parts = default_partitions(end - start)
    return [SequenceRange(lo, hi, *mode) for lo, hi in split_range(start, end, parts)]


# -- reading a range (executor side) -------------------------------------------------------------


def _check_loss(js: jss.JetStream, settings: ReadSettings, start: int) -> None:
    first, _, _ = _bounds(js, settings.stream)
    if first > start:
        raise _data_loss(settings.stream, start, first)


def _arrow_schema(schema: StructType) -> Any:
    # The very schema PySpark checks returned record batches against (records_to_arrow_batches).
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # pragma: no cover - older PySpark without the timezone argument
        return to_arrow_schema(schema)


class _Columns:
    """The core reader's record batches (``ranges.arrow_schema()``) as the ones Spark expects: the
    read schema's columns in its order, ``timestamp`` cast to microseconds, ``headers`` null without
    includeHeaders. Whole columns are cast or replaced, never a row at a time."""

    def __init__(self, schema: StructType, settings: ReadSettings) -> None:
        self.pa = require_pyarrow()
        self.arrow_schema = _arrow_schema(schema)
        self.names = schema.fieldNames()
        self.include_headers = settings.include_headers

    def batch(self, core: Any) -> Any:
        pa = self.pa
        arrays = []
        for name, field in zip(self.names, self.arrow_schema):
            if name == "headers" and not self.include_headers:
                arrays.append(pa.nulls(core.num_rows, field.type))
                continue
            column = core.column(name)
            # safe=False: nanoseconds to Spark's microseconds truncate, as Spark keeps them.
            arrays.append(column if column.type == field.type else column.cast(field.type, safe=False))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)


def _read_range(settings: ReadSettings, schema: StructType, partition: InputPartition,
                subjects: tuple[str, ...] | None = None) -> Iterator[Any]:
    """Arrow record batches of the partition's messages (runs on an executor): those on ``subjects``
    (filters pushed down from the query: one read of the range per filter) or else on the ``subject``
    option."""
    if not isinstance(partition, SequenceRange):  # Spark's placeholder for an empty read
        return
    columns = _Columns(schema, settings)
    js = settings.js()
    checked = not settings.fail_on_data_loss
    for subject in (settings.subject,) if subjects is None else subjects:
        spec = RangeSpec(subject=subject, batch_size=_ARROW_ROWS)
        batches = read_batches(js, settings.stream, spec, start=partition.start, end=partition.end,
                               direct=partition.direct, replicated=partition.replicated, timeout=jss.DEFAULT)
        try:
            for core in batches:
                if not checked:
                    checked = True
                    if core.column("seq")[0].as_py() > partition.start:
                        _check_loss(js, settings, partition.start)  # a gap at the start: removed, or never there?
                yield columns.batch(core)
        except _TRANSPORT_ERRORS:
            drop(settings.conn)  # the retried task connects afresh
            raise
        finally:  # also when the task fails or Spark stops reading early: leave no consumer behind
            batches.close()
    if not checked:
        _check_loss(js, settings, partition.start)


# -- batch read ----------------------------------------------------------------------------------


class JetStreamBatchReader(DataSourceReader):
    """``spark.read.format("jetstream")``: the sequence range split into parallel partitions.

    ``partitions()`` runs once at planning (one stream info request, plus one pull for
    ``startingTimestamp``); ``read()`` runs on executors: per partition, batch direct gets where the
    stream allows them, else one ordered consumer.
    """

    def __init__(self, settings: ReadSettings, schema: StructType) -> None:
        self._settings = settings
        self._schema = _check_read_schema(schema)
        self._subjects: tuple[str, ...] | None = None  # filters pushed down (None: the subject option)

    def partitions(self) -> list[InputPartition]:
        s = self._settings
        if self._subjects == ():  # the pushed filters match no subject at all
            return []
        js = s.js()
        first, last, mode = _bounds(js, s.stream)
        start = _first_to_read(js, s, first, last)
        if start < first:
            if s.fail_on_data_loss:
                raise _data_loss(s.stream, start, first)
            start = first
        end = last + 1 if s.ending == "latest" else min(int(s.ending), last + 1)
        return _partitions(s, start, end, mode)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_range(self._settings, self._schema, partition, self._subjects)


class JetStreamPushdownReader(JetStreamBatchReader):
    """The batch reader with subject filters pushed down (PySpark >= 4.1 with
    ``spark.sql.python.filterPushdown.enabled``): ``subject = 'x'``, ``subject IN (...)`` and
    ``subject LIKE 'a.b.%'`` become the read's NATS subject filters (intersected with the ``subject``
    option), so the server sends only matching messages; every other filter stays with Spark."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        self._subjects, rest = _pushdown.push(filters, self._settings.subject)
        return iter(rest)


def batch_reader(settings: ReadSettings, schema: StructType) -> JetStreamBatchReader:
    """The reader of a batch read: with pushdown only where PySpark asks for it (it refuses to plan a
    reader with ``pushFilters`` while its pushdown setting is off)."""
    if _pushdown.in_pushdown_planning():
        return JetStreamPushdownReader(settings, schema)
    return JetStreamBatchReader(settings, schema)


# -- streaming read ------------------------------------------------------------------------------


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("jetstream")``: micro-batches of stream sequence ranges.

    The offset is ``{"<stream>": <last sequence read>}``; a micro-batch ``(start, end]`` reads
    ``start + 1 <= seq <= end``, so a query restarted on its checkpoint reads exactly what is new.
    Offset planning runs in one long-lived Python worker per query and costs one stream info
    request per call; ``read()`` runs on executors.
    """

    def __init__(self, settings: ReadSettings, schema: StructType) -> None:
        self._settings = settings
        self._schema = _check_read_schema(schema)
        self._target: int | None = None  # Trigger.AvailableNow: never read past this sequence
        self._mode: tuple[bool, bool] | None = None  # how executors read: from the last stream info
        self._last: int | None = None  # the stream's last sequence at the last stream info

    def _bounds(self) -> tuple[int, int]:
        first, self._last, self._mode = _bounds(self._settings.js(), self._settings.stream)
        return first, self._last

    def _seq(self, offset: Mapping[str, Any] | None, what: str) -> int:
        stream = self._settings.stream
        if not isinstance(offset, Mapping) or set(offset) != {stream} or not isinstance(offset[stream], int):
            raise ValueError(f"the {what} offset {offset!r} is not an offset of stream {stream!r}: was this "
                             f"checkpoint written by a query reading another stream?")
        return int(offset[stream])

    def initialOffset(self) -> dict:
        s = self._settings
        first, last = self._bounds()
        return {s.stream: _first_to_read(s.js(), s, first, last) - 1}

    def getDefaultReadLimit(self) -> Any:
        n = self._settings.max_per_trigger
        if n is not None and ReadMaxRows is not None:
            return ReadMaxRows(n)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        _, self._target = self._bounds()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        s = self._settings
        first, last = self._bounds()
        if start is None:  # PySpark < 4.2 asks without a start: no read limit possible
            return {s.stream: last}
        current = self._seq(start, "start")
        if last < current and s.fail_on_data_loss and self._mode is not None and self._mode[1]:
            first, last = self._settled(current)  # only before failing: lenient, it just waits for more
        if last < current:
            if s.fail_on_data_loss:
                raise DataLossError(
                    f"stream {s.stream!r}: its last sequence {last} is below the checkpointed offset {current} "
                    f"(was the stream deleted and recreated?) and failOnDataLoss is true")
            log.warning("jetstream source: stream %r last sequence %d is below the checkpointed offset %d; "
                        "waiting for new messages past it", s.stream, last, current)
            return {s.stream: current}
        if first > current + 1:
            if s.fail_on_data_loss:
                raise _data_loss(s.stream, current + 1, first)
            log.warning("jetstream source: stream %r sequences %d..%d were removed before being read; skipping "
                        "ahead (failOnDataLoss=false)", s.stream, current + 1, first - 1)
            current = first - 1
        end = last
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            end = min(end, current + limit.max_rows)
        if self._target is not None:
            end = min(end, self._target)
        return {s.stream: max(end, self._seq(start, "start"))}

    def _settled(self, current: int) -> tuple[int, int]:
        """(first, last) of a replicated stream whose info said a last sequence below ``current``, asked
        again every ``_SETTLE_POLL`` s until it is not, for at most ``_LEADER_SETTLE`` s: right after a
        leader election the new leader may answer before it has applied all that was stored."""
        give_up = time.monotonic() + _LEADER_SETTLE
        while True:
            time.sleep(_SETTLE_POLL)
            first, last = self._bounds()
            if last >= current or time.monotonic() >= give_up:
                if last >= current:
                    log.info("jetstream source: stream %r caught up with the checkpointed offset %d after a "
                             "leader change", self._settings.stream, current)
                return first, last

    def reportLatestOffset(self) -> dict | None:
        """The stream's last sequence as the latest ``latestOffset`` saw it (no request: Spark asks
        after every micro-batch, for its progress report)."""
        last = self._bounds()[1] if self._last is None else self._last
        return {self._settings.stream: last}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        mode = self._mode
        if mode is None:  # a batch replayed from the checkpoint, planned before any offset was asked for
            _, _, mode = _bounds(self._settings.js(), self._settings.stream)
        return _partitions(self._settings, self._seq(start, "start") + 1, self._seq(end, "end") + 1, mode)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_range(self._settings, self._schema, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: no server-side state is kept for a read (the checkpoint is the state)."""

