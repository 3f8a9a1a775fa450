# Enriching a Spark DataFrame from a key-value bucket: kv_lookup() adds the current value of each row's key,
# read on the executors.
# Rule 1: batches, never a row at a time: each Arrow batch Spark hands mapInArrow is looked up with
#         KeyValue.get_many (one batch direct get per 1,024 distinct keys), on the worker's cached connection.
# Rule 2: a key with no value (never written, deleted, purged, null, or no valid key at all) gives null;
#         arguments are checked on the driver, before any job runs.
# Rule 3: pyspark and pyarrow are imported where used; public jetstream_sync API only.
"""``kv_lookup``: the values of a bucket's keys as a new column of a DataFrame."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import jetstream_sync as jss
from jetstream_sync.kv import check_bucket, check_key

from ._connections import ConnectionOptions, drop, jetstream_for
from ._publisher import _options

#: Failures of the connection itself: the cached client is dropped so a retried task reconnects.
_TRANSPORT_ERRORS = (jss.ClientClosedError, jss.NotConnectedError, jss.NoServersError, jss.TimeoutError)


def _valid(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    try:
        check_key(key)
    except ValueError:
        return False
    return True


class KeyValueLookup:
    """The picklable function ``kv_lookup`` hands to ``mapInArrow``: Arrow batches in, the same batches
    with the value column appended out."""

    def __init__(self, *, options: ConnectionOptions, bucket: str, key: str, value: str, decode: str | None,
                 timeout: float | None, domain: str | None, api_prefix: str | None) -> None:
        self.options = options
        self.bucket = bucket
        self.key = key
        self.value = value
        self.decode = decode
        self.timeout = timeout
        self.domain = domain
        self.api_prefix = api_prefix

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        kind = pa.string() if self.decode == "utf-8" else pa.binary()
        timeout = jss.DEFAULT if self.timeout is None else self.timeout
        kv = None
        try:
            for batch in batches:
                keys = batch.column(self.key).to_pylist()
                wanted = [k for k in dict.fromkeys(keys) if _valid(k)]
                found: dict[str, Any] = {}
                if wanted:
                    if kv is None:  # one lookup of the bucket per partition, on the worker's connection
                        kv = jetstream_for(self.options, domain=self.domain, api_prefix=self.api_prefix) \
                            .key_value(self.bucket, timeout=timeout)
                    found = kv.get_many(wanted, timeout=timeout)
                values = [found[k].value if k in found else None for k in keys]
                if self.decode == "utf-8":
                    values = [None if v is None else v.decode("utf-8", errors="replace") for v in values]
                yield batch.append_column(pa.field(self.value, kind), pa.array(values, kind))
        except _TRANSPORT_ERRORS:
            drop(self.options)  # the retried task connects afresh
            raise


def kv_lookup(df: Any, key: str, *, bucket: str, servers: str | Sequence[str] | None = None,
              options: ConnectionOptions | None = None, value: str = "value", decode: str | None = None,
              timeout: float | None = None, domain: str | None = None, api_prefix: str | None = None,
              **connect_options: Any) -> Any:
    """``df`` with a column ``value`` holding the current value in ``bucket`` of the key in column ``key``.

    Call it on the driver; nothing is read until an action runs. The executors read: each Arrow
    batch of rows (``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000 by default) costs one
    batch direct get per 1,024 distinct keys (:meth:`jetstream_sync.KeyValue.get_many`), plus one
    bucket lookup per partition, on the worker's cached connection (see ``client_for``). A key
    with no value (never written, deleted, purged), a null key and a string that is no valid key
    give null. ``value`` is binary, or a string with ``decode="utf-8"`` (invalid UTF-8 replaced).
    Connection: ``servers`` plus any :meth:`ConnectionOptions.from_paths` keyword, or
    ``options=ConnectionOptions(...)``, as for :func:`publisher`; ``timeout`` bounds each wait for
    the server (default: the connection's).

    Raises on the driver, before any job: ``ValueError`` when ``key`` is no string column of
    ``df``, ``value`` is already a column, ``bucket`` is no valid bucket name or ``decode`` is not
    None or ``"utf-8"``; ``TypeError`` for arguments of the wrong type. A task fails with
    ``BucketNotFoundError`` when the bucket does not exist, ``TimeoutError`` when the server does
    not answer (the worker's connection is dropped, so Spark's retry connects afresh).
    """
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    if not isinstance(key, str) or not isinstance(value, str):
        raise TypeError(f"key and value must be column names (str), got {key!r} and {value!r}")
    check_bucket(bucket)
    if decode not in (None, "utf-8"):
        raise ValueError(f"decode must be None (binary values) or 'utf-8' (strings), got {decode!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
    schema = df.schema
    names = schema.fieldNames()
    if key not in names:
        raise ValueError(f"key: df has no column {key!r}; its columns are {', '.join(names)}")
    if not isinstance(schema[key].dataType, StringType):
        raise ValueError(f"key: column {key!r} is {schema[key].dataType.simpleString()}, not a string: cast it "
                         f"(df.withColumn({key!r}, df[{key!r}].cast('string')))")
    if value in names:
        raise ValueError(f"value: df already has a column {value!r}; name the new column with value=")
    lookup = KeyValueLookup(options=_options(servers, options, connect_options), bucket=bucket, key=key, value=value,
                            decode=decode, timeout=timeout, domain=domain, api_prefix=api_prefix)
    out = StructType([*schema.fields, StructField(value, StringType() if decode else BinaryType())])
    return df.mapInArrow(lookup, out)
