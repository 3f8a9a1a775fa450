# Progress for publishing from the driver: progress() watches the target stream while a Spark
# action publishes to it, and drives a tqdm bar from the stream's own state.
#
# Rule 1: the count is the stream's last sequence minus its last sequence at the start, read by
#         stream info requests on one daemon poller thread; no Spark listener, no worker counters.
# Rule 2: the block ends with the poller stopped, the bar closed and only our own connection closed,
#         also when the block raises. Public jetstream_sync API only; no pyspark.
"""Show the progress of a write to a stream while a Spark action runs on the driver.

    with jss.spark.progress(URL, stream="ORDERS", total=df.count()) as p:
        df.foreachPartition(jss.spark.publisher(servers=URL, subject="ORDERS.new"))
    print(p.summary)        # 1000 messages stored in ORDERS in 1.31 s (763 msgs/s)
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
import time
from typing import Any

import attrs

import jetstream_sync as jss
from jetstream_sync.api import ApiPrefix
from jetstream_sync.client import default_servers
from jetstream_sync.config import validate_stream_name

from ._connections import ConnectionOptions
from ._publisher import PartitionPublisher

__all__ = ["PublishProgress", "PublishSummary", "progress"]

log = logging.getLogger(__name__)

#: The poller thread's name (one per active progress block).
THREAD_NAME = "jetstream-sync-progress"


@attrs.frozen
class PublishSummary:
    """What a :func:`progress` block saw: ``messages`` stored in ``stream`` in ``elapsed`` seconds.

    ``messages`` counts every message the stream stored while the block ran
    (its last sequence minus the one at the start), whoever published it;
    messages the stream dropped as duplicates are not counted. ``rate`` is
    messages per second.
    """

    stream: str
    messages: int
    elapsed: float

    @property
    def rate(self) -> float:
        """Messages per second over the whole block (0.0 for an instant block)."""
        return self.messages / self.elapsed if self.elapsed > 0 else 0.0

    def __str__(self) -> str:
        return (f"{self.messages} messages stored in {self.stream} in {self.elapsed:.2f} s "
                f"({self.rate:,.0f} msgs/s)")


def progress(connection: Any = None, *, stream: str, total: int | None = None, interval: float = 0.5,
             file: Any = None, desc: str | None = None, domain: str | None = None, api_prefix: str | None = None,
             **connect_options: Any) -> "PublishProgress":
    """A context manager that shows a progress bar while the block writes to ``stream``.

    Use it on the driver around ``df.foreachPartition(publisher(...))``,
    ``df.write.format("jetstream")...save()`` or any other code that
    publishes to ``stream``::

        with jss.spark.progress(URL, stream="ORDERS", total=n) as p:
            df.foreachPartition(jss.spark.publisher(servers=URL, subject="ORDERS.new"))
        print(p.summary)

    ``connection`` says how to reach the server: server URL(s) (default
    ``$NATS_URL``, else ``nats://127.0.0.1:4222``) plus any
    :meth:`ConnectionOptions.from_paths` keyword, a :class:`ConnectionOptions`,
    or a :class:`PartitionPublisher` (its options, domain and API prefix);
    for these the block opens its own connection and closes it at the end.
    A ``jss.Client`` or ``jss.JetStream`` is used as it is and never closed.

    ``total`` (the number of messages expected, e.g. ``df.count()``) gives
    the bar a percentage and an ETA; without it the bar shows the count and
    the rate. The bar is drawn by tqdm on ``file`` (default: stderr), as a
    notebook widget when ``file`` is not given and ipywidgets is installed.
    ``desc`` labels it (default: the stream's name). ``interval`` is the
    poll period in seconds.

    Returns at once: nothing connects until the block is entered (see
    :class:`PublishProgress`); only credential files given as connect
    options are read here. Raises ``TypeError`` or ``ValueError`` naming
    the argument for a bad one, and ``OSError`` for an unreadable file.
    """
    stream = validate_stream_name(stream, "stream")
    if total is not None and (isinstance(total, bool) or not isinstance(total, int)):
        raise TypeError(f"total must be an int or None, got {type(total).__name__}")
    if total is not None and total < 0:
        raise ValueError(f"total must be >= 0 or None, got {total!r}")
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        raise TypeError(f"interval must be a number of seconds, got {type(interval).__name__}")
    if not 0.01 <= interval <= 60:
        raise ValueError(f"interval must be between 0.01 and 60 seconds, got {interval!r}")
    if file is not None and not callable(getattr(file, "write", None)):
        raise TypeError(f"file must be a text stream with a write() method or None, got {type(file).__name__}")
    if desc is not None and not isinstance(desc, str):
        raise TypeError(f"desc must be a str or None, got {type(desc).__name__}")
    source = _source(connection, domain, api_prefix, connect_options)
    return PublishProgress(source, stream=stream, total=total, interval=float(interval), file=file,
                           desc=stream if desc is None else desc)


def _source(connection: Any, domain: str | None, api_prefix: str | None,
            connect_options: dict[str, Any]) -> tuple[Any, str | None, str | None]:
    """(ConnectionOptions | Client | JetStream, domain, api_prefix), checked; no I/O."""
    if isinstance(connection, (jss.Client, jss.JetStream, ConnectionOptions, PartitionPublisher)):
        if connect_options:
            raise TypeError(f"connection: connect options ({', '.join(sorted(connect_options))}) go with server "
                            f"URLs, not with a {type(connection).__name__}")
    if isinstance(connection, (jss.JetStream, PartitionPublisher)) and (domain is not None or api_prefix is not None):
        raise TypeError(f"connection: a {type(connection).__name__} brings its own domain and api_prefix; "
                        f"don't pass domain= or api_prefix=")
    ApiPrefix(domain, api_prefix)  # checks both, naming them
    if isinstance(connection, jss.JetStream):
        return connection.client, None, connection._api.prefix
    if isinstance(connection, PartitionPublisher):
        return connection.options, connection.domain, connection.api_prefix
    if isinstance(connection, (jss.Client, ConnectionOptions)):
        return connection, domain, api_prefix
    if connection is None:
        connection = default_servers()
    if not isinstance(connection, (str, list, tuple)):
        raise TypeError(f"connection must be server URL(s), a ConnectionOptions, a PartitionPublisher, a "
                        f"jetstream_sync Client or JetStream, got {type(connection).__name__}")
    opts = ConnectionOptions.from_paths(connection, **connect_options)
    return opts, domain, api_prefix


def _bar_class(file: Any) -> Any:
    # tqdm.auto picks the notebook widget inside Jupyter, which without ipywidgets only
    # prints TqdmWarning "IProgress not found"; the text bar works everywhere.
    if file is None and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return _quiet_subclass(tqdm)


@functools.lru_cache(maxsize=None)
def _quiet_subclass(tqdm: type) -> type:
    # monitor_interval=0: no tqdm monitor thread (it would outlive every bar); the poller refreshes
    # the bar itself. One subclass per tqdm class, so bars still share tqdm's lock and positions.
    tqdm.get_lock()
    return type("ProgressBar", (tqdm,), {"monitor_interval": 0})


class PublishProgress:
    """The handle :func:`progress` returns; use it once, in a ``with`` block.

    Entering connects (unless given a client), reads the stream's state,
    opens the bar and starts the poller, a daemon thread named
    ``jetstream-sync-progress`` that sends one stream info request per
    ``interval`` and moves the bar; nothing else runs on it. Leaving stops
    and joins the poller, reads the state a last time, closes the bar and
    closes the connection if the block opened it, also when the block
    raised (the exception propagates). Don't subclass.
    """

    def __init__(self, source: tuple[Any, str | None, str | None], *, stream: str, total: int | None,
                 interval: float, file: Any, desc: str) -> None:
        self._target, self._domain, self._api_prefix = source
        self.stream = stream
        self.total = total
        self._interval = interval
        self._file = file
        self._desc = desc
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._state = "new"               # new -> running -> done
        self._client: jss.Client | None = None
        self._own_client = False
        self._js: jss.JetStream | None = None
        self._bar: Any = None
        self._thread: threading.Thread | None = None
        self._start_seq = 0
        self._messages = 0
        self._started = 0.0
        self._summary: PublishSummary | None = None

    @property
    def messages(self) -> int:
        """Messages stored so far (as of the last poll), or in all once the block ended. No I/O."""
        return self._messages

    @property
    def summary(self) -> PublishSummary | None:
        """The :class:`PublishSummary`, once the block has ended (None before). No I/O."""
        return self._summary

    def __repr__(self) -> str:
        return f"<PublishProgress {self.stream} {self._state} messages={self._messages} total={self.total}>"

    def __enter__(self) -> "PublishProgress":
        """Connect, read the stream's state, open the bar, start the poller.

        Blocks for the connect (own connections) and one stream info request.
        Raises ``StreamNotFoundError`` when the stream does not exist,
        ``NoServersError``, ``TimeoutError``; ``RuntimeError`` if this handle
        was already used. Nothing is left running when it raises.
        """
        if self._state != "new":
            raise RuntimeError("a progress() handle is used for one block only; call progress() again")
        self._state = "running"
        try:
            self._open()
        except BaseException:
            self._state = "done"
            self._close_connection()
            raise
        return self

    def _open(self) -> None:
        if isinstance(self._target, ConnectionOptions):
            opts = self._target
            if opts.name is None:
                opts = attrs.evolve(opts, name="jetstream-sync-progress")
            self._client = jss.connect(**opts.to_connect_kwargs())
            self._own_client = True
        else:
            self._client = self._target
        # No retries: a slow poll is simply late, and leaving the block must not wait on backoff.
        self._js = self._client.jetstream(domain=self._domain, api_prefix=self._api_prefix,
                                          retry=jss.RetryPolicy(attempts=1))
        self._start_seq = self._js.stream_info(self.stream).state.last_seq
        self._started = time.monotonic()
        self._bar = _bar_class(self._file)(total=self.total, desc=self._desc, unit="msg", file=self._file,
                                           mininterval=0, leave=True)
        self._thread = threading.Thread(target=self._poll, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def __exit__(self, *exc_info: Any) -> None:
        """Stop the poller, read the final count, close the bar (and our connection). Never suppresses.

        Blocks for one stream info request (at most the connection's
        timeout) and for the poller to finish its current one.
        """
        if self._state != "running":
            return
        elapsed = time.monotonic() - self._started
        self._stop.set()
        thread = self._thread
        js = self._js
        assert thread is not None and js is not None and self._client is not None
        thread.join(js.timeout + 1.0)
        try:
            self._sample()
        except Exception as exc:  # the block's own outcome matters more; keep the last polled count
            log.warning("jetstream_sync.spark: could not read the final state of stream %r: %r", self.stream, exc)
        with self._lock:
            self._state = "done"
            bar, self._bar = self._bar, None
        try:
            bar.close()
        finally:
            self._close_connection()
            if thread.is_alive():  # stuck in a request on a client we must not close
                thread.join(js.timeout + 1.0)
            self._summary = PublishSummary(self.stream, self._messages, elapsed)
        log.debug("jetstream_sync.spark: %s", self._summary)

    def _close_connection(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._own_client:
            try:
                client.close(timeout=2.0)
            except Exception as exc:  # closing must not hide the block's outcome
                log.debug("jetstream_sync.spark: error closing the progress connection: %r", exc)

    def _poll(self) -> None:
        failures = 0
        while not self._stop.wait(self._interval):
            try:
                self._sample()
                failures = 0
            except jss.ClientClosedError:
                return
            except Exception as exc:  # a slow or unreachable server only stalls the bar
                failures += 1
                if failures == 1:
                    log.info("jetstream_sync.spark: progress poll of stream %r failed: %r", self.stream, exc)

    def _sample(self) -> None:
        """One stream info request; move the count and the bar forward (they never go back)."""
        assert self._js is not None
        last = self._js.stream_info(self.stream).state.last_seq
        with self._lock:
            n = max(self._messages, last - self._start_seq)
            self._messages = n
            bar = self._bar
            if bar is not None and n > bar.n:
                bar.update(n - bar.n)
