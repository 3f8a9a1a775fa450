# The Client: the public face of one NATS connection, and ``connect()``.
#
# Rule 1: a facade. The connection itself (loop thread, nats-py, Outbox, listeners, shutdown) is
#         ``_connection.Connection``; this module checks arguments, forwards, and builds the JetStream
#         context. It is the top of the core layers: nothing in the package below it imports it.
# Rule 2: every public call checks its arguments on the calling thread before anything is sent.
from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import errors
from ._connection import Connection, raw_credentials
from ._servers import default_servers, redact_url
from ._headers import Headers, encode_headers
from ._protocol import DEFAULT, Timeout, check_subject, encode_payload, prepare_pub, pub_command, single_valued
from .consume import MessageStream
from .jetstream import JetStream
from .push import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS, PushEngine, core_options, core_target
from .message import Msg

__all__ = ["Client", "check_subject", "connect", "default_servers", "raw_credentials", "redact_url"]


class Client:
    """A blocking, thread-safe NATS connection driven by a private event loop thread.

    Create it with :func:`connect`. Every method may be called from any thread
    except the client's own loop thread (``RuntimeError`` there, since waiting
    would deadlock). Blocking methods take ``timeout=`` in seconds (default:
    the client's ``timeout``) and wake every 0.25 s, so Ctrl-C interrupts
    them promptly and leaves the client usable. After :meth:`close`, every
    call raises :class:`ClientClosedError`; so does any use in a process
    forked from the one that connected.

    Not picklable: pass the connection options and call ``connect()`` where
    the client is needed (a Spark worker, a subprocess).
    """

    def __init__(self, servers: str | Sequence[str] | None = None, *, name: str | None = None,
                 timeout: float = 5.0, **options: Any) -> None:
        self._conn = Connection(servers, name=name, timeout=timeout, **options)

    @property
    def is_connected(self) -> bool:
        """True while connected (False while reconnecting or after close). No I/O."""
        return self._conn.is_connected

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` or :meth:`drain` finished (or the connection gave up)."""
        return self._conn.is_closed

    @property
    def connected_url(self) -> str | None:
        """The server URL currently connected to (credentials masked), or None. No I/O."""
        return self._conn.connected_url

    @property
    def max_payload(self) -> int:
        """The server's maximum message size in bytes (from its INFO). No I/O."""
        return self._conn.max_payload

    def jetstream(self, *, domain: str | None = None, api_prefix: str | None = None, timeout: float | None = None,
                  retry: Any = None, max_pending: int = 4000) -> JetStream:
        """Return a JetStream context bound to this client (no I/O).

        ``domain`` selects ``$JS.<domain>.API``; ``api_prefix`` overrides the
        prefix (exclusive with ``domain``). ``timeout`` is the default for
        every call on the context (default: the client's). ``retry`` is a
        :class:`RetryPolicy` for idempotent requests. ``max_pending`` bounds
        ``publish_async`` in-flight messages.
        """
        return JetStream(self, domain=domain, api_prefix=api_prefix, timeout=timeout, retry=retry,
                         max_pending=max_pending)

    def subscribe(self, subject: str, queue: str | None = None, *, pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
                  pending_bytes_limit: int = DEFAULT_PENDING_BYTES) -> MessageStream:
        """Subscribe to core NATS ``subject`` (wildcards allowed; ``queue`` joins a queue group) and
        return a blocking :class:`MessageStream` of what arrives from now on.

        Blocks only to subscribe (at most the client's timeout). At most ``pending_msgs_limit`` messages
        and ``pending_bytes_limit`` bytes wait unread; beyond that messages are dropped, as core NATS
        does, and a ``SlowConsumerError`` is logged. ``stop()`` unsubscribes; ``drain()`` unsubscribes
        and ends iteration after what the server sent before. Raises ValueError/TypeError for a bad
        subject, queue or limit (nothing sent), ``ClientClosedError``.
        """
        check_subject(subject)
        if queue is not None and (not isinstance(queue, str) or not queue or any(c in queue for c in " \t\r\n")):
            raise ValueError(f"queue must be a non-empty queue group name without whitespace, got {queue!r}")
        opts = core_options(subject, queue, pending_msgs_limit, pending_bytes_limit)
        return MessageStream(core_target(self._conn, subject, queue), opts, engine=PushEngine)

    def publish(self, subject: str, data: bytes | str = b"", *, reply: str | None = None,
                headers: Mapping[str, str | Sequence[str]] | None = None) -> None:
        """Publish a core NATS message. Never blocks on the network; thread-safe.

        The message is queued for the loop thread and written with the next
        batch; call :meth:`flush` to wait until the server has it.

        Raises:
            TypeError/ValueError: bad subject, data or headers (nothing is sent).
            ClientClosedError: the client is closed.
        """
        conn = self._conn
        conn.loop_thread.check_usable()
        conn.write(build_pub(subject, data, reply, headers, conn.max_payload))

    def request(self, subject: str, data: bytes | str = b"", *, headers: Mapping[str, Any] | None = None,
                timeout: Timeout = DEFAULT) -> Msg:
        """Send a request and block until the first reply; return it as a :class:`Msg`.

        Blocks on the reply for at most ``timeout`` seconds.

        Raises:
            TimeoutError: no reply in time.
            NoRespondersError: nobody is subscribed to ``subject`` (its ``subject`` names it).
            ClientClosedError: the client is closed.
        """
        conn = self._conn
        t = conn.timeout_or_default(timeout)
        check_subject(subject)
        payload = encode_payload(data)
        if headers is not None and not isinstance(headers, Mapping):
            raise TypeError(f"headers must be a mapping of str to str (or list of str), got {type(headers).__name__}")
        if headers:
            encode_headers(headers)  # validates names and values (TypeError/ValueError naming the header)
        try:
            reply = conn.call(conn.request(subject, payload, t, single_valued(headers) if headers else None), t)
        except errors.TimeoutError as exc:
            raise errors.TimeoutError.after(f"request to {subject!r}", t, "no reply") from exc
        except errors.NoRespondersError as exc:
            raise errors.NoRespondersError(f"no responders on {subject!r}: nothing is subscribed to it",
                                           subject) from exc
        return Msg(conn, reply.subject, reply.reply, reply.data, b"", Headers(reply.headers) if reply.headers else None)

    def flush(self, timeout: Timeout = DEFAULT) -> None:
        """Block until the server has processed everything written so far (a PING/PONG).

        Raises TimeoutError, ClientClosedError.
        """
        self._conn.flush(timeout)

    def drain(self, timeout: Timeout = DEFAULT) -> None:
        """Drain subscriptions and pending publishes, then close. Blocks until closed.

        Every ack and publish written before the call has been read by the server (a
        PING/PONG) before the subscriptions drain. Idempotent; raises nothing if already closed.
        """
        self._conn.drain(timeout)

    def close(self, timeout: Timeout = DEFAULT) -> None:
        """Close the connection, stop the loop thread and join it. Blocks at most ``timeout``.

        Writes already queued (acks, publishes) are flushed first and, while connected, read
        by the server (a PING/PONG) before the connection closes. Every call
        waiting on this client gets :class:`ClientClosedError`. Idempotent; a
        no-op in a forked child (the connection belongs to the parent).
        Raises ``RuntimeError`` if called on the loop thread.
        """
        self._conn.close(timeout)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError(
            "a jetstream_sync Client holds a live connection and a thread and cannot be pickled; "
            "pass the connection options (servers=..., credentials, ...) instead and call "
            "jetstream_sync.connect() where the client is used"
        )

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else ("connected" if self.is_connected else "reconnecting")
        return f"<jetstream_sync.Client {self._conn.name or ''} {state} {[redact_url(s) for s in self._conn.servers]}>"


def build_pub(subject: str, data: Any, reply: str | None, headers: Mapping[str, Any] | None,
              max_payload: int) -> bytes:
    """Encode a PUB/HPUB command on the calling thread (checking every argument)."""
    if reply is not None:
        check_subject(reply, "reply")
    subject, payload, hdr = prepare_pub(subject, data, headers, max_payload)
    return pub_command(subject, reply or "", payload, hdr)


def connect(servers: str | Sequence[str] | None = None, *, name: str | None = None,
            timeout: float = 5.0, **options: Any) -> Client:
    """Connect to NATS and return a blocking, thread-safe :class:`Client`.

    ``servers`` is a URL, a comma-separated string or a list of URLs; when
    omitted, ``$NATS_URL`` is used if set, else ``nats://127.0.0.1:4222``.
    ``timeout`` (seconds) is the default for every blocking call. Other
    keyword options go to nats-py's ``connect`` (user/password, token,
    ``user_credentials`` (creds file), ``nkeys_seed``, ``tls`` (an
    ``ssl.SSLContext``), ``max_reconnect_attempts``, ...). Event callbacks
    (``error_cb``, ``disconnected_cb``, ``reconnected_cb``, ``closed_cb``)
    are plain functions and run on a jetstream_sync event thread.

    Blocks until connected. Raises ``NoServersError`` when no server could be
    reached, ``TypeError``/``ValueError`` for bad options.
    """
    return Client(servers, name=name, timeout=timeout, **options)
