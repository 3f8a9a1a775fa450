# The consumer mode of the "jetstream" streaming source (docs/spark.md, "Work-queue and interest streams"):
# a durable pull consumer on the stream, whose deliveries are acknowledged once Spark has committed the
# micro-batch holding them. Rule 1: the driver pulls headers-only deliveries (stream sequences and ack
# subjects, no payloads) and keeps them in memory; the offset is what a batch delivered, as runs of stream
# sequences, plus the sequences already in the sink whose acks this process could not confirm (after a
# restart). Rule 2: the deliveries held for an offset are acked when Spark asks for the batch after the one
# ending there (that batch's commit log entry is written by then), and only for that offset; a redelivery of
# a sequence the offset says is in the sink is acked and dropped, never read again. Rule 3: executors read the
# payloads by sequence (batch direct gets where the stream allows them, else one get per message), so no
# payload passes through the driver. Public jetstream_sync API, plus jetstream_sync.ranges.
"""The ``mode=consumer`` reader of ``spark.readStream.format("jetstream")``."""

from __future__ import annotations

import logging
import math
import threading
from typing import Any, Iterator, Mapping

import attrs
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

import jetstream_sync as jss
from jetstream_sync.config import validate_consumer_name
from jetstream_sync.ranges import RangeSpec, arrow_schema, read_batches, read_mode, require_pyarrow

from ._connections import drop
from ._options import ReadSettings, float_option, lower_keys, str_option
from ._reads import _ARROW_ROWS, _TRANSPORT_ERRORS, _check_read_schema, _Columns, default_partitions

try:  # PySpark >= 4.2: read limits (maxMessagesPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0/4.1
    ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)

__all__ = ["ConsumerRuns", "ConsumerSettings", "ConsumerStreamReader", "consumer_mode"]

#: Deliveries per micro-batch when maxMessagesPerTrigger is not given (the driver holds them).
DEFAULT_BATCH = 10_000
#: The ack wait of a durable the source creates (seconds): how long after a crash its unacked deliveries
#: come back. While a batch runs, the driver keeps its deliveries alive with in-progress acks.
DEFAULT_ACK_WAIT = 60.0
#: Options of the replay mode that mean nothing to a durable (it decides where reading starts).
_REPLAY_ONLY = ("startingOffsets", "startingTimestamp", "failOnDataLoss")
#: Messages asked for per pull on the driver.
_PULL = 10_000


def consumer_mode(options: Mapping[str, Any]) -> bool:
    """True for ``mode=consumer``, False for ``mode=replay`` or no ``mode``; ValueError for anything else."""
    opts = lower_keys(options)
    raw = str_option(opts, "mode")
    if raw is not None and raw.lower() == "consumer":
        return True
    if raw is None or raw.lower() == "replay":
        for name in ("durable", "ackWait"):
            if name.lower() in opts:
                raise ValueError(f"option {name} applies only with .option('mode', 'consumer')")
        return False
    raise ValueError(f"option mode must be 'replay' (the default: a replayable log, no consumer) or 'consumer' "
                     f"(a durable consumer acked on commit, for work-queue and interest streams), got {raw!r}")


@attrs.frozen(kw_only=True)
class ConsumerSettings:
    """A consumer-mode read: the read settings, the durable's name, the batch limit and ack wait."""

    read: ReadSettings
    durable: str
    limit: int
    ack_wait: float

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> "ConsumerSettings":
        opts = lower_keys(options)
        durable = str_option(opts, "durable")
        if durable is None:
            raise ValueError("option durable is required with option mode='consumer': the name of the durable "
                             "consumer to create or bind, e.g. .option('durable', 'etl')")
        validate_consumer_name(durable, "option durable")
        for name in _REPLAY_ONLY:
            if name.lower() in opts:
                raise ValueError(f"option {name} does not apply with mode='consumer': the durable consumer "
                                 f"decides what is delivered (a new one starts at the stream's first message)")
        read = ReadSettings.parse(options, streaming=True)
        return cls(read=read, durable=durable, limit=read.max_per_trigger or DEFAULT_BATCH,
                   ack_wait=float_option(opts, "ackWait", DEFAULT_ACK_WAIT))


# -- sequence runs --------------------------------------------------------------------------------


def to_runs(seqs: Any) -> list[list[int]]:
    """Sorted sequences as half-open runs ``[lo, hi)`` of consecutive sequences."""
    runs: list[list[int]] = []
    for seq in sorted(set(seqs)):
        if runs and runs[-1][1] == seq:
            runs[-1][1] = seq + 1
        else:
            runs.append([seq, seq + 1])
    return runs


def from_runs(runs: Any) -> set[int]:
    return {seq for lo, hi in runs for seq in range(lo, hi)}


def split_runs(runs: list[list[int]], parts: int) -> list[list[tuple[int, int]]]:
    """``runs`` cut into ``parts`` lists holding about as many sequences each, in order."""
    total = sum(hi - lo for lo, hi in runs)
    if total == 0:
        return []
    parts = max(1, min(parts, total))
    size = math.ceil(total / parts)
    out: list[list[tuple[int, int]]] = [[]]
    room = size
    for lo, hi in runs:
        while lo < hi:
            if room == 0:
                out.append([])
                room = size
            take = min(room, hi - lo)
            out[-1].append((lo, lo + take))
            lo += take
            room -= take
    return out


class ConsumerRuns(InputPartition):
    """One partition of a consumer-mode batch: the runs ``[lo, hi)`` of stream sequences delivered to the
    driver, read by batch direct gets when ``direct`` (else one get per message)."""

    def __init__(self, runs: list[tuple[int, int]], direct: bool = False, replicated: bool = False) -> None:
        self.runs = runs
        self.direct = direct
        self.replicated = replicated


# -- reading payloads (executor side) -------------------------------------------------------------


def _gets(js: jss.JetStream, stream: str, lo: int, hi: int) -> Iterator[Any]:
    """Record batches (``ranges.arrow_schema()``) of ``[lo, hi)`` by one get per message; missing ones skipped."""
    pa = require_pyarrow()
    schema = arrow_schema()
    handle = js.stream(stream)
    for start in range(lo, hi, _ARROW_ROWS):
        found = []
        for seq in range(start, min(hi, start + _ARROW_ROWS)):
            try:
                found.append(handle.get_msg(seq))
            except jss.MessageNotFoundError:
                continue
        if not found:
            continue
        headers = [m.headers for m in found]
        yield pa.RecordBatch.from_arrays([
            pa.array([m.subject for m in found], pa.string()),
            pa.array([m.data for m in found], pa.binary()),
            pa.array([list(h.multi().items()) if h else [] for h in headers], schema.field("headers").type),
            pa.repeat(pa.scalar(stream, pa.string()), len(found)),
            pa.array([m.seq for m in found], pa.int64()),
            pa.array([m.time for m in found], pa.timestamp("ns", tz="UTC")),
            pa.array([h.get("Nats-Msg-Id") if h else None for h in headers], pa.string()),
        ], schema=schema)


def _read_runs(settings: ConsumerSettings, schema: StructType, partition: InputPartition) -> Iterator[Any]:
    if not isinstance(partition, ConsumerRuns):  # Spark's placeholder for an empty read
        return
    s = settings.read
    columns = _Columns(schema, s)
    js = s.js()
    spec = RangeSpec(batch_size=_ARROW_ROWS)
    try:
        for lo, hi in partition.runs:
            if partition.direct:
                batches = read_batches(js, s.stream, spec, start=lo, end=hi, direct=True,
                                       replicated=partition.replicated, timeout=jss.DEFAULT)
            else:
                batches = _gets(js, s.stream, lo, hi)
            try:
                for core in batches:
                    yield columns.batch(core)
            finally:
                batches.close()
    except _TRANSPORT_ERRORS:
        drop(s.conn)  # the retried task connects afresh
        raise


# -- the driver side ------------------------------------------------------------------------------


class ConsumerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("jetstream").option("mode", "consumer")``.

    The offset is ``{"<stream>": {"durable": name, "runs": [[lo, hi], ...], "unacked": [[lo, hi], ...]}}``:
    ``runs`` are the stream sequences the batch ending there delivered, ``unacked`` those of earlier
    batches (already in the sink) whose acks this driver could not confirm, which are acked and dropped
    when the server redelivers them. Offset planning, pulls and acks run in Spark's long-lived Python
    worker for the query on the driver; ``read()`` runs on executors.
    """

    def __init__(self, settings: ConsumerSettings, schema: StructType) -> None:
        self._settings = settings
        self._schema = _check_read_schema(schema)
        self._consumer: jss.Consumer | None = None
        self._mode: tuple[bool, bool] | None = None
        self._lock = threading.Lock()
        self._held: dict[int, Any] = {}  # stream sequence -> the delivery (Msg) of the last offset returned
        self._held_offset: dict | None = None  # that offset
        self._acked: set[int] = set()  # sequences of the offset Spark last gave that this driver acked
        self._budget: int | None = None  # Trigger.AvailableNow: deliveries left to take
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    def __getstate__(self) -> dict:
        # Spark ships the reader to executors for read(): only the settings travel, never the driver's
        # deliveries, lock or thread.
        return {"settings": self._settings, "schema": self._schema}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["settings"], state["schema"])  # type: ignore[misc]

    # -- the durable

    def _bind(self) -> jss.Consumer:
        if self._consumer is not None:
            return self._consumer
        s = self._settings
        js = s.read.js()
        info = js.stream_info(s.read.stream)
        self._mode = read_mode(js, info.config)
        try:
            consumer = js.consumer(s.read.stream, s.durable)
        except jss.ConsumerNotFoundError:
            fields: dict[str, Any] = {"durable_name": s.durable, "ack_policy": "explicit", "headers_only": True,
                                      "ack_wait": s.ack_wait, "max_ack_pending": max(2 * s.limit, 1000)}
            if s.read.subject is not None:
                fields["filter_subject"] = s.read.subject
            try:
                consumer = js.create_consumer(s.read.stream, **fields)
            except jss.ConsumerExistsError:  # another query created it first
                consumer = js.consumer(s.read.stream, s.durable)
        self._check_fit(consumer.cached_info.config)
        self._consumer = consumer
        return consumer

    def _check_fit(self, cfg: Any) -> None:
        s = self._settings
        what = f"durable consumer {s.durable!r} of stream {s.read.stream!r}"
        if cfg.ack_policy is not None and cfg.ack_policy.value != "explicit":
            raise ValueError(f"{what} has ack_policy {cfg.ack_policy.value!r}; mode='consumer' acks each message "
                             f"after Spark commits it and needs ack_policy 'explicit'")
        if not cfg.headers_only:
            raise ValueError(f"{what} has headers_only false; mode='consumer' pulls headers only on the driver "
                             f"(executors read the payloads): create it with headers_only=True, or let the "
                             f"source create it")
        if cfg.max_ack_pending not in (None, -1) and cfg.max_ack_pending < s.limit:
            raise ValueError(f"{what} has max_ack_pending {cfg.max_ack_pending}, below maxMessagesPerTrigger "
                             f"({s.limit}): a micro-batch holds that many unacked deliveries")
        filters = set(cfg.filter_subjects or ([cfg.filter_subject] if cfg.filter_subject else []))
        if s.read.subject is not None and filters != {s.read.subject}:
            raise ValueError(f"{what} filters {sorted(filters) or 'no subject'}, not the option subject "
                             f"{s.read.subject!r}")

    # -- offsets

    def _parse(self, offset: Any, what: str) -> tuple[set[int], set[int]]:
        s = self._settings
        body = offset.get(s.read.stream) if isinstance(offset, Mapping) else None
        if not isinstance(body, Mapping) or body.get("durable") != s.durable:
            raise ValueError(f"the {what} offset {offset!r} is not a consumer-mode offset of stream "
                             f"{s.read.stream!r} and durable {s.durable!r}: was this checkpoint written by "
                             f"another query?")
        return from_runs(body.get("runs", ())), from_runs(body.get("unacked", ()))

    def _offset(self, delivered: Any, unacked: Any) -> dict:
        return {self._settings.read.stream: {"durable": self._settings.durable, "runs": to_runs(delivered),
                                             "unacked": to_runs(unacked)}}

    def initialOffset(self) -> dict:
        self._bind()
        return self._offset((), ())

    def getDefaultReadLimit(self) -> Any:
        return ReadMaxRows(self._settings.limit) if ReadMaxRows is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        info = self._bind().info()
        self._budget = (info.num_pending or 0) + (info.num_ack_pending or 0)

    def _ack(self, offset: Any) -> set[int]:
        """Ack the held deliveries when ``offset`` is the one they were pulled for (a sequence redelivered
        since belongs to a later batch); return their sequences. The last ack is confirmed by the server:
        it processes the acks one connection sends to one consumer in order, so that confirmation covers
        the ones before it."""
        with self._lock:
            if offset != self._held_offset:
                return set()
            msgs = sorted(self._held.items())
            self._held, self._held_offset = {}, None
        if msgs:
            for _, msg in msgs[:-1]:
                msg.ack()
            msgs[-1][1].double_ack()
        return {seq for seq, _ in msgs}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        s = self._settings
        consumer = self._bind()
        if start is None:  # PySpark < 4.2 asks without a start: nothing says what the sink has
            raise ValueError("mode='consumer' needs PySpark >= 4.2 (latestOffset with a start offset)")
        delivered, unacked = self._parse(start, "start")
        # Everything in `start` is in the sink: Spark asks for the next batch only once the commit log entry
        # of the batch ending at `start` is written (after re-running that batch, following a restart).
        self._acked |= self._ack(start)
        with self._lock:
            stale = list(self._held.values())  # pulled for an offset Spark never used: not in the sink
            self._held, self._held_offset = {}, None
        for msg in stale:
            msg.nak()
        # In the sink, and delivered to a driver that is gone: acked and dropped when they come back.
        in_sink = (delivered | unacked) - self._acked
        if in_sink:
            info = consumer.info()
            floor = (info.ack_floor.stream_seq if info.ack_floor else 0) or 0
            in_sink = {seq for seq in in_sink if seq > floor} if info.num_ack_pending else set()
        want = s.limit
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            want = min(want, limit.max_rows)
        if self._budget is not None:
            want = min(want, self._budget)
        new: dict[int, Any] = {}
        dropped: list[Any] = []
        while len(new) < want:
            asked = min(_PULL, want - len(new))
            got = 0
            with consumer.fetch_no_wait(asked) as batch:
                for msg in batch:
                    got += 1
                    seq = msg.metadata_numbers()[0]
                    if seq in in_sink:  # a redelivery of a message the sink has: ack it, never read it again
                        dropped.append(msg)
                        in_sink.discard(seq)
                    else:
                        new[seq] = msg
            if self._budget is not None:
                self._budget = max(0, self._budget - got)
                want = min(want, len(new) + self._budget)
            if got < asked:
                break
        if dropped:  # confirmed before the offset stops naming them
            for msg in dropped[:-1]:
                msg.ack()
            dropped[-1].double_ack()
            self._acked.update(msg.metadata_numbers()[0] for msg in dropped)
        if not new:
            return start  # no new batch (Spark runs one only when the offset moves)
        offset = self._offset(new, in_sink)
        with self._lock:
            self._held, self._held_offset = new, offset
        self._acked = set()
        self._keep_alive()
        return offset

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        delivered, _ = self._parse(end, "end")
        if self._mode is None:
            s = self._settings
            js = s.read.js()
            self._mode = read_mode(js, js.stream_info(s.read.stream).config)
        runs = to_runs(delivered)
        parts = self._settings.read.min_partitions or default_partitions(len(delivered))
        return [ConsumerRuns(chunk, *self._mode) for chunk in split_runs(runs, parts)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_runs(self._settings, self._schema, partition)

    def commit(self, end: dict) -> None:
        """Ack the held deliveries if they were pulled for ``end``. Usually there is nothing to do: Spark
        commits a batch only once the next one is planned, and planning it acked them."""
        self._parse(end, "end")
        self._acked |= self._ack(end)

    def stop(self) -> None:
        """Stop keeping deliveries alive; held ones are left to the ack wait (the checkpoint says if the
        sink has them)."""
        self._stop.set()
        keeper = self._keeper
        if keeper is not None:
            keeper.join(10.0)

    # -- keeping a running batch's deliveries from being redelivered

    def _keep_alive(self) -> None:
        if self._keeper is None:
            self._keeper = threading.Thread(target=self._keep, name="jetstream-spark-keepalive", daemon=True)
            self._keeper.start()

    def _keep(self) -> None:
        interval = self._settings.ack_wait / 3
        while not self._stop.wait(interval):
            with self._lock:
                msgs = list(self._held.values())
            try:
                for msg in msgs:
                    msg.in_progress()
            except jss.JetStreamError as exc:  # the client closed or the message was acked meanwhile
                log.debug("jetstream source: keeping deliveries alive failed: %r", exc)
