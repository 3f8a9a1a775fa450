# The PySpark >= 4.0 data source "jetstream" (SPEC section 7): reads of stream sequence ranges, writes
# deduplicated by Nats-Msg-Id. Rule 1: the stream sequence is the only offset; planning turns options
# into half-open ranges and executors read exactly those with ordered consumers (no durable state).
# Rule 2: only picklable settings cross processes; connections come from _connections' per-process
# cache. Rule 3: public jetstream_sync API only; publishing is _publisher's PartitionPublisher.
"""``spark.read.format("jetstream")``, ``readStream``, ``write`` and ``writeStream``.

Register it with :func:`register` (``jss.spark.register(spark)``), or let PySpark find it through the
top-level ``pyspark_jetstream`` package. Options (names are case-insensitive, like Spark's):

Connection (all reads and writes): ``servers`` (comma-separated URLs, default
``nats://127.0.0.1:4222``), ``connectionName``, ``timeout`` (seconds, default 5), ``domain``
(JetStream domain), ``user``/``password``, ``token``, ``credsFile`` (a ``.creds`` file),
``nkeysSeedFile``, ``tlsCaFile``/``tlsCertFile``/``tlsKeyFile``, ``tlsHostname``. Credential files
are read where the query is planned (the driver) and shipped to executors as contents.

Reading: ``stream`` (required); ``subject`` (a filter, wildcards allowed, applied by the server);
``startingOffsets`` (inclusive: ``earliest``, ``latest`` or ``{"ORDERS": 42}``; ``-2``/``-1`` mean
earliest/latest as in Spark's Kafka source; default ``earliest`` for batch, ``latest`` for
streaming); ``endingOffsets`` (batch only, exclusive: ``latest`` or ``{"ORDERS": 100}``);
``startingTimestamp`` (milliseconds since the epoch, or ISO 8601; wins over ``startingOffsets``;
with no message at or after it, reading starts after the last message); ``minPartitions`` (exactly
that many partitions when the range spans at least that many sequences; default one per 10,000
sequences, at most one per core of the planning machine: the parallelism of ``local[*]``);
``maxMessagesPerTrigger`` (streaming: at most this many *stream sequences* per micro-batch; with a
``subject`` filter a micro-batch may hold fewer rows, since sequences of other subjects count too);
``failOnDataLoss`` (default true: fail when messages to be read were already removed by the stream's
limits or a purge; false skips ahead to the first one still stored); ``includeHeaders``
(default true; false leaves ``headers`` null). Read schema::

    subject string, data binary, headers map<string,array<string>>, stream string,
    seq long, timestamp timestamp, msg_id string

Writing: columns ``data`` (binary or string, required), ``subject`` (string; the ``subject`` option
overrides it, as Kafka's ``topic`` option does), ``headers`` (map<string,string> or
map<string,array<string>>) and ``msg_id`` (string) are used, other columns are ignored, so a
DataFrame read from another stream can be written as it is. Options ``subject``, ``maxPending``
(in-flight publishes per task, default 1000) and ``ackTimeout`` (seconds per PubAck, default the
connection ``timeout``). Rows are published by :class:`jetstream_sync.spark.PartitionPublisher`: a
task returns only after every PubAck arrived, so a finished task means stored messages. Rows
without a ``msg_id`` get a deterministic ``Nats-Msg-Id``: ``<write id>-<partition>-<row>`` (partition
and row in hex) where the write id (8 characters) is made once on the driver for a batch write, so a
retried task repeats its ids, and derived from the query id and batch id for a streaming write
(stable across restarts from the same checkpoint). The server drops a repeated id only within the stream's ``duplicate_window``
(2 minutes by default): size it to cover task retries and query restarts.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator, Mapping

import attrs
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

import jetstream_sync as jss
from jetstream_sync.client import redact_url

from ._connections import jetstream_for
from ._options import (
    WRITE_OPTIONS,
    ReadSettings,
    check_option_names,
    connection_options,
    float_option,
    int_option,
    lower_keys,
    str_option,
)
from ._publisher import PartitionPublisher, derived_write_id, new_write_id
from ._reads import (
    READ_SCHEMA,
    DataLossError,
    JetStreamBatchReader,
    JetStreamStreamReader,
    SequenceRange,
    default_partitions,
    split_range,
)

__all__ = [
    "READ_SCHEMA",
    "DataLossError",
    "JetStreamBatchReader",
    "JetStreamCommitMessage",
    "JetStreamDataSource",
    "JetStreamStreamReader",
    "JetStreamStreamWriter",
    "JetStreamWriter",
    "SequenceRange",
    "default_partitions",
    "register",
    "split_range",
]

log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register the ``jetstream`` data source on ``spark`` (a SparkSession). Idempotent.

    Not needed when the ``pyspark_jetstream`` package is importable where Spark's Python workers
    run: PySpark registers it by itself then.
    """
    spark.dataSource.register(JetStreamDataSource)


# -- writing -------------------------------------------------------------------------------------


class JetStreamCommitMessage(WriterCommitMessage):
    """What one write task stored: ``rows`` messages from ``partition`` (duplicates dropped by
    the server within its duplicate window are counted too: they are stored, once)."""

    def __init__(self, partition: int, rows: int) -> None:
        self.partition = partition
        self.rows = rows

    def __repr__(self) -> str:
        return f"JetStreamCommitMessage(partition={self.partition}, rows={self.rows})"


def _publisher_for(options: Mapping[str, Any], schema: StructType) -> PartitionPublisher:
    """The row publisher of a write, with its columns checked against ``schema`` here, on the driver."""
    opts = lower_keys(options)
    check_option_names(opts, WRITE_OPTIONS, "write")
    names = schema.fieldNames()
    types = {f.name: f.dataType for f in schema.fields}

    def column(name: str, allowed: tuple[Any, ...], what: str) -> str | None:
        if name not in types:
            return None
        if types[name] not in allowed:
            raise ValueError(f"column {name!r} must be {what} to write to jetstream, "
                             f"got {types[name].simpleString()}")
        return name

    subject = str_option(opts, "subject")
    subject_col = column("subject", (StringType(),), "a string")
    if subject is None and subject_col is None:
        raise ValueError("writing to jetstream needs a subject: a 'subject' column or .option('subject', ...)")
    if column("data", (BinaryType(), StringType()), "binary or string") is None:
        raise ValueError(f"writing to jetstream needs a 'data' column (binary or string); the columns are "
                         f"{', '.join(names)}")
    ack_timeout = opts.get("acktimeout")
    return PartitionPublisher(
        options=connection_options(opts), write_id=new_write_id(), subject=subject, subject_column=subject_col,
        data_column="data",
        headers_column=column("headers", (MapType(StringType(), StringType()),
                                          MapType(StringType(), ArrayType(StringType()))),
                              "map<string,string> or map<string,array<string>>"),
        msg_id_column=column("msg_id", (StringType(),), "a string"),
        max_pending=int_option(opts, "maxPending", 1) or 1000,
        timeout=None if ack_timeout is None else float_option(opts, "ackTimeout", 0.0),
        domain=str_option(opts, "domain"),
    )


def _check_write_target(pub: PartitionPublisher) -> None:
    """Fail here, on the driver, before any job starts, when no task could succeed: a subject one cannot
    publish to, no server, refused credentials, or no stream capturing the ``subject`` option."""
    subject = pub.subject
    if subject is not None:
        tokens = subject.split(".")
        if any(c in subject for c in " \t\r\n") or "" in tokens or any("*" in t or ">" in t for t in tokens):
            raise ValueError(f"option subject {subject!r} is not a subject to publish to (no whitespace, empty "
                             f"tokens or wildcards)")
    js = jetstream_for(pub.options, domain=pub.domain)  # NoServersError, AuthorizationError, ...
    if subject is not None and next(iter(js.stream_names(subject=subject)), None) is None:
        raise jss.NoRespondersError(
            f"no stream captures subject {subject!r} on {', '.join(redact_url(u) for u in pub.options.servers)}: "
            f"every task of the write would fail. Create a stream whose subjects match it, or fix the subject "
            f"option")


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("the jetstream writer runs only inside a Spark task")
    return ctx.partitionId()


def _log_commit(messages: list[Any], what: str) -> None:
    done = [m for m in messages if isinstance(m, JetStreamCommitMessage)]
    log.info("jetstream sink: %s stored %d messages from %d tasks", what, sum(m.rows for m in done), len(done))


class JetStreamWriter(DataSourceWriter):
    """``df.write.format("jetstream")``: each task publishes its rows and waits for every PubAck.

    Made once per write on the driver, where it draws the write id that prefixes derived
    ``Nats-Msg-Id``s (``<write id>-<partition>-<row>``): a retried task repeats its ids and the
    server drops what the failed attempt stored. Publishing is
    :class:`jetstream_sync.spark.PartitionPublisher`'s (one cached connection per worker).
    """

    def __init__(self, publisher: PartitionPublisher) -> None:
        self._publisher = publisher

    @property
    def write_id(self) -> str:
        return self._publisher.write_id

    def write(self, iterator: Iterator[Any]) -> JetStreamCommitMessage:
        partition = _partition_id()
        return JetStreamCommitMessage(partition, self._publisher.publish(iterator, partition_id=partition))

    def commit(self, messages: list[Any]) -> None:
        _log_commit(messages, f"write {self.write_id}")

    def abort(self, messages: list[Any]) -> None:
        """Messages stored by tasks that finished stay stored: rerunning the write with the same
        ``msg_id`` column is deduplicated by the server (within its duplicate window)."""


class JetStreamStreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("jetstream")``: each micro-batch task publishes its rows and waits for
    every PubAck. Derived ``Nats-Msg-Id``s are ``<write id>-<partition>-<row>`` with the write id hashed
    from the query id and the batch id: the query id is kept in the checkpoint, so a micro-batch
    replayed after a restart is deduplicated."""

    def __init__(self, publisher: PartitionPublisher) -> None:
        self._publisher = publisher

    def write(self, iterator: Iterator[Any]) -> JetStreamCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            raise RuntimeError("the jetstream writer runs only inside a Spark task")
        # Spark sets both local properties on every micro-batch job (StreamExecution.QUERY_ID_KEY,
        # MicroBatchExecution.BATCH_ID_KEY); the writer object itself never learns them.
        query = ctx.getLocalProperty("sql.streaming.queryId")
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        if query is None or batch is None:
            raise RuntimeError("the jetstream stream writer found no streaming query id or batch id in its task; "
                               "it needs them for message ids that survive a restart")
        publisher = attrs.evolve(self._publisher, write_id=derived_write_id(query, batch))
        partition = ctx.partitionId()
        return JetStreamCommitMessage(partition, publisher.publish(iterator, partition_id=partition))

    def commit(self, messages: list[Any], batchId: int) -> None:
        _log_commit(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Stored messages stay; the replayed micro-batch repeats their ids and is deduplicated."""


# -- the data source -----------------------------------------------------------------------------


class JetStreamDataSource(DataSource):
    """The ``jetstream`` data source: see the module docstring for options and schemas.

    Every method here runs in Spark's driver-side Python workers, parses options and makes a reader
    or writer; no connection is opened until a reader plans partitions or a task runs.
    """

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> StructType:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> JetStreamBatchReader:
        return JetStreamBatchReader(ReadSettings.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> JetStreamStreamReader:
        return JetStreamStreamReader(ReadSettings.parse(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> JetStreamWriter:
        if overwrite:
            raise ValueError("mode('overwrite') is not supported by jetstream: a stream is append-only; "
                             "use mode('append')")
        publisher = _publisher_for(self.options, schema)
        _check_write_target(publisher)
        return JetStreamWriter(publisher)

    def streamWriter(self, schema: StructType, overwrite: bool) -> JetStreamStreamWriter:
        # Complete/update output modes publish every row Spark emits for the micro-batch.
        publisher = _publisher_for(self.options, schema)
        _check_write_target(publisher)
        return JetStreamStreamWriter(publisher)
