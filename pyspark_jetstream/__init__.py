# PySpark finds Python data sources by itself in top-level packages named pyspark_* that
# expose DefaultSource: this package makes spark.read.format("jetstream") work with no
# registration call. The data source lives in jetstream_sync.spark.datasource.
"""Auto-registration of the ``jetstream`` PySpark data source (see :mod:`jetstream_sync.spark.datasource`)."""

from jetstream_sync.spark.datasource import JetStreamDataSource as DefaultSource

__all__ = ["DefaultSource"]
