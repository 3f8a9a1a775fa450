# jetstream_sync.spark: moving data between JetStream and Spark DataFrames (docs/spark.md).
#
# Rule 1: importing this package must work without pyspark: pyspark is imported
#         lazily, and the data source (datasource with its _reads and _writes, the
#         modules that need pyspark at import time) is loaded only when
#         JetStreamDataSource or register() is used.
# Rule 2: re-exports only; the code lives in _connections, _publisher, _progress, _lookup, and
#         datasource with _options, _reads and _writes.
"""Spark (PySpark) integration for jetstream_sync.

Publishing a DataFrame from ``foreachPartition`` (one connection per Python
worker, every PubAck awaited, retried tasks deduplicated)::

    import jetstream_sync.spark as jss_spark

    df.repartition(8).foreachPartition(
        jss_spark.publisher(servers="nats://nats:4222", subject="ORDERS.new"))

Progress on the driver, while an action writes to a stream::

    with jss_spark.progress("nats://nats:4222", stream="ORDERS", total=df.count()) as p:
        df.foreachPartition(jss_spark.publisher(servers="nats://nats:4222", subject="ORDERS.new"))
    print(p.summary)

Values of a key-value bucket as a new column, looked up on the executors in batches::

    enriched = jss_spark.kv_lookup(orders, "customer_id", bucket="customers", servers="nats://nats:4222")

The ``jetstream`` data source (``spark.read.format("jetstream")``, ``readStream``,
``write``, ``writeStream``) is registered automatically through the
``pyspark_jetstream`` package, or explicitly with ``register(spark)``.
"""

from __future__ import annotations

from typing import Any

from ._connections import ConnectionOptions, client_for, drop, drop_all, jetstream_for, worker_identity
from ._lookup import KeyValueLookup, kv_lookup
from ._progress import PublishProgress, PublishSummary, progress
from ._publisher import (
    PartitionPublisher,
    PublishError,
    derived_write_id,
    new_write_id,
    publish_partition,
    publisher,
    task_write_id,
)

__all__ = [
    "ConnectionOptions",
    "JetStreamDataSource",
    "KeyValueLookup",
    "PartitionPublisher",
    "PublishError",
    "PublishProgress",
    "PublishSummary",
    "client_for",
    "derived_write_id",
    "drop",
    "drop_all",
    "jetstream_for",
    "kv_lookup",
    "new_write_id",
    "progress",
    "publish_partition",
    "publisher",
    "register",
    "task_write_id",
    "worker_identity",
]


def register(spark: Any) -> None:
    """Register the ``jetstream`` data source with ``spark`` (a SparkSession). Needs pyspark >= 4.0.

    Not needed when the ``pyspark_jetstream`` package is importable (PySpark
    registers it by itself); harmless to call twice. On PySpark >= 4.1 it also
    sets ``spark.sql.python.filterPushdown.enabled`` to true, so subject filters
    of batch reads are pushed down to the server.
    """
    from . import datasource

    datasource.register(spark)


def __getattr__(name: str) -> Any:
    # The data source subclasses pyspark classes, so it is imported only when asked for.
    if name == "JetStreamDataSource":
        from .datasource import JetStreamDataSource

        return JetStreamDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
