# The PySpark >= 4.0 data source "jetstream" (docs/spark.md): the class PySpark registers, its options
# documented in one place, and the import path of its readers, writers and errors (pyspark_jetstream
# imports it). Rule 1: this module only turns options into settings and hands them to a reader (_reads)
# or a writer (_writes); parsing options is _options'. Rule 2: only picklable settings cross processes;
# connections come from _connections' per-process cache. Rule 3: public jetstream_sync API only.
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
(default true; false leaves ``headers`` null); ``mode`` (``replay``, the default, or ``consumer``:
streaming reads through the durable consumer ``durable``, each message acked once Spark has committed
its micro-batch, for work-queue and interest streams; ``ackWait``, seconds, default 60, is the ack wait
of a durable the source creates; ``maxMessagesPerTrigger`` counts deliveries there, default 10,000).
The replay mode refuses a work-queue stream. Batch reads also take the query's filters
``subject = 'x'``, ``subject IN (...)`` and ``subject LIKE 'a.b.%'`` as their subject filters (PySpark
>= 4.1 with ``spark.sql.python.filterPushdown.enabled``, which :func:`register` sets). Read schema::

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

from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from ._consumer_reads import ConsumerSettings, ConsumerStreamReader, consumer_mode
from ._options import ReadSettings
from ._pushdown import PUSHDOWN_CONF, supported
from ._reads import (
    READ_SCHEMA,
    DataLossError,
    JetStreamBatchReader,
    JetStreamPushdownReader,
    JetStreamStreamReader,
    SequenceRange,
    batch_reader,
    default_partitions,
    split_range,
)
from ._writes import JetStreamCommitMessage, JetStreamStreamWriter, JetStreamWriter, check_write_target, publisher_for

__all__ = [
    "READ_SCHEMA",
    "ConsumerStreamReader",
    "DataLossError",
    "JetStreamBatchReader",
    "JetStreamCommitMessage",
    "JetStreamDataSource",
    "JetStreamPushdownReader",
    "JetStreamStreamReader",
    "JetStreamStreamWriter",
    "JetStreamWriter",
    "SequenceRange",
    "default_partitions",
    "register",
    "split_range",
]


def register(spark: Any) -> None:
    """Register the ``jetstream`` data source on ``spark`` (a SparkSession). Idempotent.

    On PySpark >= 4.1 it also sets ``spark.sql.python.filterPushdown.enabled`` to true, so subject
    filters of batch reads are pushed down to the server. Not needed when the ``pyspark_jetstream``
    package is importable where Spark's Python workers run: PySpark registers the source by itself
    then (and pushdown waits for that setting).
    """
    spark.dataSource.register(JetStreamDataSource)
    if supported():
        spark.conf.set(PUSHDOWN_CONF, "true")


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
        if consumer_mode(self.options):
            raise ValueError("option mode='consumer' is for streaming reads (spark.readStream): a batch read "
                             "has no commit to acknowledge its messages on")
        return batch_reader(ReadSettings.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> JetStreamStreamReader | ConsumerStreamReader:
        if consumer_mode(self.options):
            return ConsumerStreamReader(ConsumerSettings.parse(self.options), schema)
        return JetStreamStreamReader(ReadSettings.parse(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> JetStreamWriter:
        if overwrite:
            raise ValueError("mode('overwrite') is not supported by jetstream: a stream is append-only; "
                             "use mode('append')")
        publisher = publisher_for(self.options, schema)
        check_write_target(publisher)
        return JetStreamWriter(publisher)

    def streamWriter(self, schema: StructType, overwrite: bool) -> JetStreamStreamWriter:
        # Complete/update output modes publish every row Spark emits for the micro-batch.
        publisher = publisher_for(self.options, schema)
        check_write_target(publisher)
        return JetStreamStreamWriter(publisher)
