# Publishing a Spark partition to JetStream: publish_partition() and the
# picklable callable publisher() returns for df.foreachPartition.
#
# Rule 1: a task succeeds only once every one of its PubAcks arrived (task
#         success = stored); any failed or missing PubAck raises, so Spark
#         retries the task.
# Rule 2: a retried task re-sends the same Nats-Msg-Id for the same row
#         ("<write_id>-<partition hex>-<row hex>", write_id made on the driver or
#         derived from the task's application and stage), so the stream's
#         duplicate window drops what the failed attempt stored. Ids are short:
#         every byte of one is stored with every message.
# Rule 3: pyspark is imported lazily (TaskContext only); public jetstream_sync API only.
"""Publish the rows of a Spark partition to JetStream.

    import jetstream_sync.spark

    df.repartition(8).foreachPartition(
        jetstream_sync.spark.publisher(servers="nats://nats:4222", subject="ORDERS.new"))

Exactly-once storage through deduplication: every message gets a
``Nats-Msg-Id`` (the ``msg_id`` column, or ``"<write_id>-<partition>-<row>"``
made deterministically, partition and row in hex), and the server drops a repeated id seen within the
stream's ``duplicate_window`` (2 minutes by default). That window must cover
the time between a failed task attempt and its retry (and, to make re-running a
failed job safe, the re-run). It also relies on a retried task seeing the same
rows in the same order, which Spark gives for ``repartition()`` and for
deterministic inputs; for anything else put a stable key in a ``msg_id`` column.
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import hashlib
import json
import logging
import os
import re
import secrets
from typing import Any, Iterable, Mapping, Sequence

import attrs

import jetstream_sync as jss

from . import _connections
from ._connections import ConnectionOptions

__all__ = ["PartitionPublisher", "PublishError", "derived_write_id", "new_write_id", "publish_partition", "publisher",
           "task_write_id"]

log = logging.getLogger(__name__)

_MSG_ID = "Nats-Msg-Id"
#: Seconds a task waits for the answer to "does a stream capture this subject?" (asked once, not retried).
_CHECK_TIMEOUT = 2.0
# Errors that say the connection itself is in trouble: the cached client is dropped so the
# retried task (or the next task in this worker) connects afresh.
_CONNECTION_ERRORS = (jss.TimeoutError, concurrent.futures.TimeoutError, jss.ClientClosedError,
                      jss.NotConnectedError, jss.NoServersError)


class PublishError(jss.JetStreamError):
    """A row of a partition could not be stored: the task fails so Spark retries it.

    ``partition_id``, ``row_index`` and ``subject`` say which row; the cause is
    chained (``__cause__``): ``NoRespondersError`` (no stream captures the
    subject), an ``APIError`` (the stream refused it), ``TimeoutError`` (no
    PubAck in time), ``ClientClosedError``...
    """

    def __init__(self, message: str, *, partition_id: int | None = None, row_index: int | None = None,
                 subject: str | None = None) -> None:
        super().__init__(message)
        self.partition_id = partition_id
        self.row_index = row_index
        self.subject = subject


def new_write_id() -> str:
    """A fresh write id: 8 URL-safe characters (48 random bits). Make it once per logical write, on the driver.

    Short on purpose: it is part of every generated ``Nats-Msg-Id``, stored with every message.
    """
    return secrets.token_urlsafe(6)


def derived_write_id(*parts: object) -> str:
    """A write id made deterministically from ``parts`` (8 URL-safe characters, 48 bits of a BLAKE2b hash).

    The same parts give the same id on every executor and every retry: a streaming query's id and
    batch id, or a Spark application's id and a stage id.
    """
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=6).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")


_APP_ID_IN_PATH = re.compile(r"(?:^|/)(app-\d{14}-\d{4,})(?:/|$)")


def _application_id() -> str | None:
    """The Spark application id as an executor's Python worker can see it, or None.

    Kubernetes sets ``SPARK_APPLICATION_ID``; a standalone executor runs in ``work/<app id>/<executor>``;
    YARN names the container after the application; in local mode the workers share the driver's
    gateway connection file, which is unique to the application's driver.
    """
    app = os.environ.get("SPARK_APPLICATION_ID")
    if app:
        return app
    m = _APP_ID_IN_PATH.search(os.getcwd())
    if m:
        return m.group(1)
    container = os.environ.get("CONTAINER_ID", "")
    m = re.match(r"container_(?:e\d+_)?(\d+_\d+)_", container)
    if m:
        return f"application_{m.group(1)}"
    return os.environ.get("_PYSPARK_DRIVER_CONN_INFO_PATH") or None


def task_write_id() -> str:
    """A write id for :func:`publish_partition` used without one, derived in the task.

    From the application id and the stage id: both are the same for every attempt of a task and for
    a retried stage, so a retry repeats its ``Nats-Msg-Id`` values, while two jobs (another stage) or
    two applications never share one. Raises ``ValueError`` (naming ``write_id``) outside a Spark
    task or when the application cannot be identified.
    """
    ctx = _task_context()
    if ctx is None:
        raise ValueError("write_id: not running in a Spark task; " + _NO_WRITE_ID)
    app = _application_id()
    if app is None:
        raise ValueError("write_id: this executor does not reveal its Spark application id; " + _NO_WRITE_ID)
    return derived_write_id(app, ctx.stageId())


def _check_column(value: Any, name: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"{name} must be a column name (non-empty str) or None, got {value!r}")
    return value


def _check_positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _check_timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"timeout must be a number of seconds > 0 or None, got {value!r}")
    return float(value)


def _check_header_name(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value or ":" in value or " " in value):
        raise ValueError(f"worker_header must be a header name (no ':' or spaces) or None, got {value!r}")
    return value


def _check_subject(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"subject must be a non-empty str or None, got {value!r}")
    return value


@attrs.frozen(kw_only=True)
class PartitionPublisher:
    """The picklable callable :func:`publisher` returns: call it with a partition's rows.

    ``publisher(rows)`` publishes them with :func:`publish_partition` and
    returns the number of messages stored. One instance is one logical
    write: calling it again for another action re-sends the same
    ``Nats-Msg-Id`` values, which the stream drops as duplicates within its
    ``duplicate_window``. That makes re-running a failed write safe; for new
    data call :func:`publisher` again (or give a new ``write_id``). Don't
    subclass. Its repr never shows credentials.
    """

    options: ConnectionOptions
    write_id: str
    subject: str | None = attrs.field(default=None, validator=lambda _i, _a, v: _check_subject(v))
    subject_column: str | None = attrs.field(default="subject", validator=lambda _i, a, v: _check_column(v, a.name))
    data_column: str = attrs.field(default="data", validator=lambda _i, a, v: _check_column(v, a.name))
    headers_column: str | None = attrs.field(default="headers", validator=lambda _i, a, v: _check_column(v, a.name))
    msg_id_column: str | None = attrs.field(default="msg_id", validator=lambda _i, a, v: _check_column(v, a.name))
    max_pending: int = attrs.field(default=1000, validator=lambda _i, a, v: _check_positive_int(v, a.name))
    timeout: float | None = attrs.field(default=None, converter=_check_timeout)
    deduplicate: bool = True
    domain: str | None = None
    api_prefix: str | None = None
    worker_header: str | None = attrs.field(default=None, validator=lambda _i, _a, v: _check_header_name(v))

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.options, ConnectionOptions):
            raise TypeError(f"options must be a ConnectionOptions, got {type(self.options).__name__}")
        if not isinstance(self.write_id, str) or not self.write_id:
            raise TypeError(f"write_id must be a non-empty str, got {self.write_id!r}")
        if self.data_column is None:
            raise TypeError("data_column must name the column holding each message's payload")
        if self.subject is None and self.subject_column is None:
            raise ValueError("subject: give subject= (one subject for every row) or a subject_column")

    def __call__(self, rows: Iterable[Any]) -> int:
        return self.publish(rows)

    def publish(self, rows: Iterable[Any], *, partition_id: int | None = None) -> int:
        """Publish ``rows`` and block until every PubAck arrived; return how many were stored.

        ``partition_id`` defaults to the running Spark task's partition
        (``TaskContext.get().partitionId()``); outside a Spark task it must be
        given. Blocks while the in-flight window (``max_pending``) is full and
        until the last PubAck, each for at most ``timeout``.

        Raises :class:`PublishError` (cause chained) when a PubAck failed or
        did not arrive; ``TypeError``/``ValueError`` naming the column for a row
        that cannot be published. Only a row's own publish is retried here, as
        every ``publish_async`` with a msg_id is (per the context's retry
        policy); beyond that Spark retries the task. After a connection-level
        failure the cached connection is dropped, so the retry connects afresh.
        """
        if partition_id is None:
            partition_id = _task_partition_id()
        return _Run(self, partition_id).run(rows)


def publisher(servers: str | Sequence[str] | None = None, *, options: ConnectionOptions | None = None,
              subject: str | None = None, subject_column: str | None = "subject", data_column: str = "data",
              headers_column: str | None = "headers", msg_id_column: str | None = "msg_id",
              max_pending: int = 1000, timeout: float | None = None, write_id: str | None = None,
              deduplicate: bool = True, domain: str | None = None, api_prefix: str | None = None,
              worker_header: str | None = None, **connect_options: Any) -> PartitionPublisher:
    """Make a picklable callable for ``df.foreachPartition`` that publishes each row to JetStream.

    Call it on the driver. Connection: ``servers`` plus any
    :meth:`ConnectionOptions.from_paths` keyword (``user``/``password``,
    ``token``, ``user_credentials``/``nkeys_seed``/``tls_*_file`` *paths*
    read here, on the driver, and shipped as contents), or a ready
    ``options=ConnectionOptions(...)``.

    Rows: ``data_column`` (bytes or str; null = empty payload), the subject
    from ``subject=`` (wins, as Spark's Kafka ``topic`` option) or else
    ``subject_column``, optional ``headers_column`` (``map<string,string>``,
    ``map<string,array<string>>`` or an array of ``(key, value)`` structs)
    and ``msg_id_column`` (its value becomes ``Nats-Msg-Id``). Set a column
    name to None to ignore such a column.

    Each Python worker uses one cached connection for all its tasks. At most
    ``max_pending`` publishes are in flight per task; ``timeout`` (default:
    the connection's) bounds the wait for a window slot and for each PubAck.
    Without a ``msg_id`` value each message gets
    ``Nats-Msg-Id: <write_id>-<partition>-<row index>``; ``write_id`` is made
    here (:func:`new_write_id`) unless given; ``deduplicate=False`` sends no
    generated ids. ``worker_header`` names a header that records
    ``"<pid>:<connection id>"`` of the publishing worker in every message (for tracing).

    Raises ``TypeError``/``ValueError`` for bad arguments and ``OSError`` for
    unreadable credential files, here on the driver.
    """
    return PartitionPublisher(
        options=_options(servers, options, connect_options), write_id=new_write_id() if write_id is None else write_id,
        subject=subject, subject_column=subject_column, data_column=data_column, headers_column=headers_column,
        msg_id_column=msg_id_column, max_pending=max_pending, timeout=timeout, deduplicate=deduplicate,
        domain=domain, api_prefix=api_prefix, worker_header=worker_header)


def publish_partition(rows: Iterable[Any], *, servers: str | Sequence[str] | None = None,
                      options: ConnectionOptions | None = None, subject: str | None = None,
                      subject_column: str | None = "subject", data_column: str = "data",
                      headers_column: str | None = "headers", msg_id_column: str | None = "msg_id",
                      max_pending: int = 1000, timeout: float | None = None, write_id: str | None = None,
                      partition_id: int | None = None, deduplicate: bool = True, domain: str | None = None,
                      api_prefix: str | None = None, worker_header: str | None = None,
                      **connect_options: Any) -> int:
    """Publish one partition's rows (the plain function behind :func:`publisher`); return the count stored.

    Same options as :func:`publisher`, but credential paths are read where
    this runs (on the executor). Without ``write_id`` one is derived from the
    Spark application id and the task's stage id (:func:`task_write_id`), the
    same for every attempt of the task, so ``df.foreachPartition(functools.partial(
    publish_partition, servers=url, subject="s"))`` is deduplicated on retries
    as :func:`publisher` is. Outside a task, or where the application id cannot
    be found, give ``write_id=new_write_id()`` made once on the driver, a
    ``msg_id`` column, or ``deduplicate=False``; otherwise a row that needs a
    generated id is a ``ValueError``. ``partition_id`` defaults to the Spark
    task's. Blocks until every PubAck arrived.

    Raises :class:`PublishError` for a failed or missing PubAck.
    """
    if write_id is None:
        try:
            write_id = task_write_id()
        except ValueError:
            pass  # fine while every row has a msg_id (or deduplicate=False); else each such row says so
    pub = PartitionPublisher(
        options=_options(servers, options, connect_options), write_id=write_id or "-",
        subject=subject, subject_column=subject_column, data_column=data_column, headers_column=headers_column,
        msg_id_column=msg_id_column, max_pending=max_pending, timeout=timeout, deduplicate=deduplicate,
        domain=domain, api_prefix=api_prefix, worker_header=worker_header)
    if partition_id is None:
        partition_id = _task_partition_id()
    return _Run(pub, partition_id, has_write_id=write_id is not None).run(rows)


def _options(servers: Any, options: ConnectionOptions | None, connect_options: Mapping[str, Any]) -> ConnectionOptions:
    if options is not None:
        if servers is not None or connect_options:
            raise TypeError("options: give either options=ConnectionOptions(...) or servers=... with connect "
                            "options, not both")
        if not isinstance(options, ConnectionOptions):
            raise TypeError(f"options must be a ConnectionOptions, got {type(options).__name__}")
        return options
    if servers is None:
        raise TypeError("servers: give the NATS server URL(s) (or options=ConnectionOptions(...))")
    return ConnectionOptions.from_paths(servers, **connect_options)


def _task_context() -> Any:
    """The running Spark task's TaskContext, or None (no task, or no pyspark)."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return None
    return TaskContext.get()


def _task_partition_id() -> int:
    ctx = _task_context()
    if ctx is None:
        raise ValueError("partition_id: not running in a Spark task, so give partition_id= (a distinct "
                         "number per partition of the write: it is part of every generated Nats-Msg-Id)")
    return ctx.partitionId()


def _column_getter(first: Any) -> tuple[Any, set[str]]:
    """For rows shaped like ``first`` (a mapping, a pyspark Row or a named tuple): a function giving, for
    a column name, a reader of that column (None for a column the rows lack), and the column names."""
    if isinstance(first, Mapping):
        columns = set(first.keys())

        def by_name(name: str | None) -> Any:
            if name is None or name not in columns:
                return None
            return lambda row: row.get(name)

        return by_name, columns
    fields = getattr(first, "__fields__", None) or getattr(first, "_fields", None)
    if fields is None:
        raise TypeError(f"rows must be pyspark Rows, named tuples or mappings, got {type(first).__name__}")
    positions = {name: i for i, name in enumerate(fields)}

    def by_position(name: str | None) -> Any:
        if name is None or name not in positions:
            return None
        i = positions[name]
        return lambda row: row[i]

    return by_position, set(positions)


class _Run:
    """One partition being published: row decoding, the in-flight window, PubAck checks."""

    def __init__(self, pub: PartitionPublisher, partition_id: Any, has_write_id: bool = True) -> None:
        if isinstance(partition_id, bool) or not isinstance(partition_id, int) or partition_id < 0:
            raise ValueError(f"partition_id must be an int >= 0, got {partition_id!r}")
        self.pub = pub
        self.partition_id = partition_id
        self.has_write_id = has_write_id
        self.prefix = f"{pub.write_id}-{partition_id:x}-"
        # Acks are checked oldest first once this many are outstanding, so memory stays
        # bounded (publish_async itself keeps at most max_pending in flight).
        self.check_at = 2 * pub.max_pending
        self.pending: collections.deque = collections.deque()  # (future, row index, subject)
        self.retry: jss.RetryPolicy | None = None  # the context's: a publish with a msg_id is retried by it

    def run(self, rows: Iterable[Any]) -> int:
        pub = self.pub
        options = pub.options
        timeout = pub.timeout if pub.timeout is not None else options.timeout
        count = 0
        try:
            decode = publish_async = worker = None
            pending = self.pending
            for index, row in enumerate(rows):
                if decode is None:  # first row: an empty partition neither connects nor checks columns
                    decode = self._decoder(row)
                    js = _connections.jetstream_for(
                        options, domain=pub.domain, api_prefix=pub.api_prefix, max_pending=pub.max_pending,
                    )
                    publish_async, self.retry = js.publish_async, js.retry
                    worker = _connections.worker_identity(options) if pub.worker_header else None
                subject, data, headers, msg_id = decode(row, index)
                if index == 0 and not self._captured(js, subject):
                    missing = jss.NoRespondersError(f"no stream captures subject {subject!r}", subject)
                    raise self._error(missing, 0, subject) from missing
                if worker is not None:
                    headers = dict(headers) if headers else {}
                    headers[pub.worker_header] = worker
                while True:
                    try:
                        fut = publish_async(subject, data, headers=headers, msg_id=msg_id, timeout=timeout)
                        break
                    except (TypeError, ValueError) as exc:
                        raise type(exc)(f"row {index} of partition {self.partition_id}: {exc}") from exc
                    except jss.TimeoutError as exc:
                        if not pending:
                            raise self._error(exc, index, subject) from exc
                        # The window stayed full of this task's publishes: they are being retried (a leader
                        # election). Wait for them as for any PubAck (raises if one failed), then go on.
                        self._settle(len(pending), timeout)
                    except jss.JetStreamError as exc:
                        raise self._error(exc, index, subject) from exc
                pending.append((fut, index, subject))
                count += 1
                if len(pending) >= self.check_at:
                    self._settle(len(pending) - pub.max_pending, timeout)
            self._settle(len(pending), timeout)
        except BaseException as exc:
            cause = exc.__cause__ if isinstance(exc, PublishError) else exc
            if isinstance(cause, _CONNECTION_ERRORS) and _connections.drop(options):
                log.warning("jetstream_sync.spark: dropped the connection after %r", cause)
            raise
        return count

    def _captured(self, js: jss.JetStream, subject: str) -> bool:
        """Whether a stream captures ``subject``: asked once per task (one request), since a publish that
        finds no responders is retried as long as a leader election lasts, and no responders also means
        that no stream captures it. True when it cannot be told: a JetStream domain or API prefix (the
        streams live elsewhere), or no permission to list streams."""
        if self.pub.domain is not None or self.pub.api_prefix is not None:
            return True
        client = _connections.client_for(self.pub.options)
        body = json.dumps({"subject": subject}).encode()
        try:  # one request, not retried: a server that cannot answer now leaves it to the publishes
            reply = json.loads(client.request("$JS.API.STREAM.NAMES", body, timeout=_CHECK_TIMEOUT).data)
        except (jss.JetStreamError, ValueError):
            return True
        if not isinstance(reply, dict) or "error" in reply:
            return True
        return bool(reply.get("streams"))

    def _settle(self, n: int, timeout: float) -> None:
        """Wait for the ``n`` oldest PubAcks; raise PublishError for the first failed one."""
        pending = self.pending
        # The publisher's own sweep fails a future whose ack is overdue (after its retries, each
        # attempt given the timeout); the extra seconds only guard against a stalled loop.
        limit = timeout + 5.0
        retry = self.retry
        if retry is not None:
            tries = (retry.attempts - 1) * (timeout + retry.max_backoff + retry.initial_backoff)
            limit += tries if retry.deadline is None else min(tries, retry.deadline + timeout + retry.max_backoff)
        for _ in range(n):
            fut, index, subject = pending.popleft()
            try:
                exc = fut.exception(timeout=limit)
            except concurrent.futures.TimeoutError as timed_out:
                raise self._error(timed_out, index, subject) from timed_out
            if exc is not None:
                raise self._error(exc, index, subject) from exc

    def _error(self, exc: BaseException, index: int, subject: str) -> PublishError:
        if isinstance(exc, jss.NoRespondersError):
            why = f"no stream captures subject {subject!r} (no responders)"
        elif isinstance(exc, concurrent.futures.TimeoutError):
            why = f"no PubAck within the timeout ({type(exc).__name__}: {exc})"
        else:
            why = f"{type(exc).__name__}: {exc}"
        return PublishError(
            f"jetstream_sync.spark: row {index} of partition {self.partition_id} was not stored: {why}; "
            f"the task fails so that Spark retries it",
            partition_id=self.partition_id, row_index=index, subject=subject)

    # -- rows ----------------------------------------------------------------------------------

    def _decoder(self, first: Any) -> Any:
        """Build a row decoder from the first row's columns (a partition shares one schema)."""
        pub = self.pub
        getter, columns = _column_getter(first)
        shown = ", ".join(sorted(columns))
        get_data = getter(pub.data_column)
        if get_data is None:
            raise ValueError(f"data_column: the rows have no column {pub.data_column!r} (columns: {shown})")
        get_subject = None
        if pub.subject is None:
            get_subject = getter(pub.subject_column)
            if get_subject is None:
                raise ValueError(f"subject_column: the rows have no column {pub.subject_column!r} and no "
                                 f"subject= was given (columns: {shown})")
        for name, default in ((pub.headers_column, "headers"), (pub.msg_id_column, "msg_id")):
            if name is not None and name != default and name not in columns:
                raise ValueError(f"the rows have no column {name!r} (columns: {shown})")
        get_headers = getter(pub.headers_column)
        get_msg_id = getter(pub.msg_id_column)
        if get_msg_id is None and pub.deduplicate and not self.has_write_id:
            raise ValueError(_NO_WRITE_ID)
        fixed_subject = pub.subject
        prefix = self.prefix
        generate = pub.deduplicate
        partition_id = self.partition_id

        def decode(row: Any, index: int) -> tuple[str, Any, Any, str | None]:
            subject = fixed_subject if get_subject is None else get_subject(row)
            if not isinstance(subject, str):
                raise TypeError(f"row {index} of partition {partition_id}: column {pub.subject_column!r} must be "
                                f"a non-null string, got {type(subject).__name__}")
            data = get_data(row)
            if data is None:
                data = b""
            elif not isinstance(data, (bytes, bytearray, str)):
                raise TypeError(f"row {index} of partition {partition_id}: column {pub.data_column!r} must be "
                                f"binary or string, got {type(data).__name__}")
            headers = None if get_headers is None else _headers(get_headers(row), index, partition_id,
                                                                 pub.headers_column)
            msg_id = None if get_msg_id is None else get_msg_id(row)
            if msg_id is not None:
                if not isinstance(msg_id, str):
                    msg_id = str(msg_id)
            elif generate and not (headers and _MSG_ID in headers):
                if not self.has_write_id:
                    raise ValueError(f"row {index} of partition {partition_id}: null msg_id. " + _NO_WRITE_ID)
                msg_id = prefix + format(index, "x")
            return subject, data, headers, msg_id

        return decode


_NO_WRITE_ID = ("write_id: outside a Spark task, or where the application id cannot be found, publish_partition() "
                "needs write_id=new_write_id() made once on the driver (an id made on the executor would differ "
                "on a retry), a msg_id column, or deduplicate=False; publisher() makes the write id for you")


_EXPECTATION_PREFIX = "Nats-Expected-"


def _headers(value: Any, index: int, partition_id: int, column: str | None) -> dict[str, Any] | None:
    """A headers cell (map<string,string>, map<string,array<string>> or array<struct<key,value>>) as a dict."""
    if value is None:
        return None
    out: dict[str, Any] = {}
    if isinstance(value, Mapping):
        items: Iterable[Any] = value.items()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise TypeError(f"row {index} of partition {partition_id}: column {column!r} must be a map or an array of "
                        f"(key, value) structs, got {type(value).__name__}")
    for item in items:
        key, val = item
        if val is None or (isinstance(key, str) and key.startswith(_EXPECTATION_PREFIX)):
            # The server stores Nats-Expected-* with a message; carried over from
            # a read of another stream they would make this publish fail.
            continue
        if isinstance(val, (bytes, bytearray)):
            val = bytes(val).decode()
        if isinstance(val, str):
            if isinstance(value, Mapping) or key not in out:
                out[key] = val
            else:  # repeated key in an array of structs: another value
                prev = out[key]
                out[key] = [*prev, val] if isinstance(prev, list) else [prev, val]
        elif isinstance(val, (list, tuple)):
            values = [v for v in val if v is not None]
            if values:
                out[key] = values
        else:
            raise TypeError(f"row {index} of partition {partition_id}: column {column!r}: the value of header "
                            f"{key!r} must be a string or an array of strings, got {type(val).__name__}")
    return out or None
