# The writes of the "jetstream" data source: rows published by _publisher's PartitionPublisher, every
# PubAck awaited before a task returns, so a finished task means stored messages.
# Rule 1: options and columns are checked where the write is planned (the driver), and so is the target
#         (a subject to publish to, a reachable server, a stream capturing it), before any job starts.
# Rule 2: derived Nats-Msg-Ids repeat on a retry: the write id is drawn once per batch write on the
#         driver, and derived from the query and batch ids for a streaming write.
"""Writers of the ``jetstream`` data source: ``df.write`` and ``df.writeStream``."""

from __future__ import annotations

import logging
from typing import Any, Iterator, Mapping

import attrs
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

import jetstream_sync as jss
from jetstream_sync.client import redact_url

from ._connections import PLANNING_TRY, jetstream_for
from ._options import (
    WRITE_OPTIONS,
    check_option_names,
    connection_options,
    float_option,
    int_option,
    lower_keys,
    str_option,
)
from ._publisher import PartitionPublisher, derived_write_id, new_write_id

log = logging.getLogger(__name__)


class JetStreamCommitMessage(WriterCommitMessage):
    """What one write task stored: ``rows`` messages from ``partition`` (duplicates dropped by
    the server within its duplicate window are counted too: they are stored, once)."""

    def __init__(self, partition: int, rows: int) -> None:
        self.partition = partition
        self.rows = rows

    def __repr__(self) -> str:
        return f"JetStreamCommitMessage(partition={self.partition}, rows={self.rows})"


def publisher_for(options: Mapping[str, Any], schema: StructType) -> PartitionPublisher:
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


def check_write_target(pub: PartitionPublisher) -> None:
    """Fail here, on the driver, before any job starts, when no task could succeed: a subject one cannot
    publish to, no server, refused credentials, or no stream capturing the ``subject`` option."""
    subject = pub.subject
    if subject is not None:
        tokens = subject.split(".")
        if any(c in subject for c in " \t\r\n") or "" in tokens or any("*" in t or ">" in t for t in tokens):
            raise ValueError(f"option subject {subject!r} is not a subject to publish to (no whitespace, empty "
                             f"tokens or wildcards)")
    js = jetstream_for(pub.options, domain=pub.domain)  # NoServersError, AuthorizationError, ...
    # Asked for every micro-batch of a streaming write: each try waits PLANNING_TRY (no answer during an election).
    if subject is not None and next(iter(js.stream_names(subject=subject, timeout=PLANNING_TRY)), None) is None:
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
