# Worker-side connections for Spark: the picklable ConnectionOptions that
# travel from the driver, and a per-process client cache on the executors.
#
# Rule 1: only ConnectionOptions crosses process boundaries; credentials in it
#         are file *contents* (read on the driver by from_paths) and its repr
#         never shows a secret. A live Client never travels.
# Rule 2: the cache is keyed by (os.getpid(), options) and emptied in a forked
#         child, so a child never touches its parent's connection; PySpark's
#         reused Python workers share one connection across tasks and jobs.
# Rule 3: public jetstream_sync API only (connect, Client, jetstream()); no pyspark.
"""Connection options that can be shipped to Spark executors, and a per-process client cache.

On the driver::

    opts = ConnectionOptions.from_paths("tls://nats:4222", user_credentials="~/.nats/etl.creds")

On an executor (any number of tasks, in any number of jobs)::

    client = client_for(opts)        # one connection per Python worker process
"""

from __future__ import annotations

import atexit
import logging
import os
import ssl
import tempfile
import threading
import uuid
from typing import Any, Mapping, Sequence

import attrs

import jetstream_sync as jss
from jetstream_sync.client import raw_credentials, redact_url

__all__ = ["ELECTION_RETRY", "PLANNING_TRY", "ConnectionOptions", "client_for", "drop", "drop_all", "jetstream_for",
           "worker_identity"]

log = logging.getLogger(__name__)

# After the node holding a stream's leader dies, its other replicas elect a new one within a few
# seconds (up to about 10); meanwhile publishes get no responders and requests 503s or no answer.
# Spark's contexts retry those for 15 s (tries backing off to 0.5 s), so a node's death does not fail
# a task: in local mode Spark retries no task, and the whole query would end. The deadline bounds the
# wait when every try waits out its timeout (the only server is gone). The other errors are not
# retried (the policy's rule).
ELECTION_RETRY = jss.RetryPolicy(attempts=100, initial_backoff=0.05, max_backoff=0.5, deadline=15.0)
#: Seconds one request of the planning side (a micro-batch's stream info, a writer's check that a stream
#: captures its subject) waits before it is asked again per ELECTION_RETRY: while a stream or the meta
#: layer has no leader such a request gets no answer at all, and the next micro-batch should start as
#: soon as the election is over, not a whole client timeout later.
PLANNING_TRY = 1.0

#: nats-py connect options that have a dedicated field (or are not allowed) and so may not go into ``extra``.
_RESERVED = frozenset({
    "servers", "name", "timeout", "user", "password", "token", "user_credentials", "nkeys_seed",
    "nkeys_seed_str", "tls", "tls_hostname", "signature_cb", "user_jwt_cb", "user_credentials_cb",
    "error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "discovered_server_cb", "lame_duck_mode_cb",
})
#: Fields whose value is never shown by repr().
_SECRETS = ("password", "token", "creds", "nkeys_seed_str", "tls_key")


def _to_servers(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        out = tuple(s.strip() for s in value.split(",") if s.strip())
    elif isinstance(value, (list, tuple)):
        out = tuple(value)
    else:
        raise TypeError(f"servers must be a URL string or a list of URLs, got {type(value).__name__}")
    if not out or not all(isinstance(s, str) and s for s in out):
        # Don't echo the value: a URL may carry a password.
        raise ValueError("servers must name at least one server URL (non-empty strings)")
    return out


def _to_extra(value: Any) -> tuple[tuple[str, Any], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    out = []
    for key, val in items:
        if not isinstance(key, str):
            raise TypeError(f"extra: option names must be str, got {key!r}")
        if key in _RESERVED:
            raise ValueError(f"extra: {key!r} has its own ConnectionOptions field (or cannot be shipped to "
                             f"executors); use from_paths(...) / the field instead")
        if callable(val):
            raise TypeError(f"extra: {key!r} is a callable; callbacks cannot be shipped to Spark executors")
        try:
            hash(val)
        except TypeError:
            raise TypeError(f"extra: the value of {key!r} must be hashable (use a tuple, not a list)") from None
        out.append((key, val))
    return tuple(sorted(out))


def _optional_str(name: str) -> Any:
    def check(_inst: Any, _attr: Any, value: Any) -> None:
        if value is not None and not isinstance(value, str):
            # Never echo the value: it may be a secret.
            raise TypeError(f"{name} must be a str or None, got {type(value).__name__}")

    return attrs.field(default=None, validator=check, kw_only=True)


def _check_timeout(_inst: Any, _attr: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {value!r}")


@attrs.frozen(repr=False)
class ConnectionOptions:
    """How an executor connects to NATS: picklable, hashable, and safe to print. Don't subclass.

    Credentials are carried as *contents*, never as paths, because a path on
    the driver does not exist on an executor: build instances with
    :meth:`from_paths` on the driver to read credential files there.
    ``repr()`` shows which credentials are present but never their values
    (and masks passwords and tokens inside server URLs).

    Fields: ``servers`` (tuple of URLs), ``name`` (connection name shown by
    the server), ``timeout`` (default for every blocking call, seconds),
    ``user``/``password``, ``token``, ``creds`` (a ``.creds`` file's text),
    ``nkeys_seed_str`` (an nkey seed), ``tls_ca``/``tls_cert``/``tls_key``
    (PEM text), ``tls_hostname``, and ``extra``: other nats-py connect
    options as sorted ``(name, value)`` pairs (plain, hashable values such as
    ``max_reconnect_attempts``; callbacks cannot be shipped).
    """

    servers: tuple[str, ...] = attrs.field(converter=_to_servers)
    name: str | None = _optional_str("name")
    timeout: float = attrs.field(default=5.0, validator=_check_timeout, kw_only=True)
    user: str | None = _optional_str("user")
    password: str | None = _optional_str("password")
    token: str | None = _optional_str("token")
    creds: str | None = _optional_str("creds")
    nkeys_seed_str: str | None = _optional_str("nkeys_seed_str")
    tls_ca: str | None = _optional_str("tls_ca")
    tls_cert: str | None = _optional_str("tls_cert")
    tls_key: str | None = _optional_str("tls_key")
    tls_hostname: str | None = _optional_str("tls_hostname")
    extra: tuple[tuple[str, Any], ...] = attrs.field(default=(), converter=_to_extra, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key: give both (a client certificate and its key) or neither")
        if self.creds is not None and self.nkeys_seed_str is not None:
            raise ValueError("creds and nkeys_seed_str: give one of them (a .creds file already holds the seed)")

    @classmethod
    def from_paths(cls, servers: str | Sequence[str], *, name: str | None = None, timeout: float = 5.0,
                   user: str | None = None, password: str | None = None, token: str | None = None,
                   user_credentials: str | os.PathLike | None = None, creds_file: str | os.PathLike | None = None,
                   nkeys_seed: str | os.PathLike | None = None, nkeys_seed_file: str | os.PathLike | None = None,
                   tls_ca_file: str | os.PathLike | None = None, tls_cert_file: str | os.PathLike | None = None,
                   tls_key_file: str | os.PathLike | None = None, tls_hostname: str | None = None,
                   **extra: Any) -> "ConnectionOptions":
        """Build options on the driver, reading credential *files* into the object.

        ``user_credentials``/``creds_file`` (a ``.creds`` file) and
        ``nkeys_seed``/``nkeys_seed_file`` (an nkey seed file) take paths, as
        nats-py's ``connect`` does; ``tls_*_file`` take PEM files. ``~`` is
        expanded. Any other keyword is a nats-py connect option kept in
        ``extra``. Reads the files (blocking I/O on the calling thread).

        Raises ``FileNotFoundError``/``OSError`` naming the path (never the
        contents), ``ValueError``/``TypeError`` for bad options.
        """
        if user_credentials is not None and creds_file is not None:
            raise ValueError("user_credentials and creds_file: give one of them (both name a .creds file)")
        if nkeys_seed is not None and nkeys_seed_file is not None:
            raise ValueError("nkeys_seed and nkeys_seed_file: give one of them (both name a seed file)")
        return cls(
            servers, name=name, timeout=timeout, user=user, password=password, token=token,
            creds=_read(user_credentials if user_credentials is not None else creds_file, "user_credentials"),
            nkeys_seed_str=_read(nkeys_seed if nkeys_seed is not None else nkeys_seed_file, "nkeys_seed"),
            tls_ca=_read(tls_ca_file, "tls_ca_file"), tls_cert=_read(tls_cert_file, "tls_cert_file"),
            tls_key=_read(tls_key_file, "tls_key_file"), tls_hostname=tls_hostname, extra=extra,
        )

    def to_connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``jetstream_sync.connect`` in this process.

        Credentials go to nats-py as contents (``RawCredentials``,
        ``nkeys_seed_str``). A TLS client certificate is the one thing the
        ``ssl`` module only loads from a path: it is written to a private
        temporary directory (mode 0700, files 0600), loaded into an
        ``ssl.SSLContext`` and deleted before this returns.
        """
        kwargs: dict[str, Any] = dict(self.extra)
        kwargs.update(servers=list(self.servers), name=self.name, timeout=self.timeout)
        if self.user is not None:
            kwargs["user"] = self.user
        if self.password is not None:
            kwargs["password"] = self.password
        if self.token is not None:
            kwargs["token"] = self.token
        if self.creds is not None:
            kwargs["user_credentials"] = raw_credentials(self.creds)
        if self.nkeys_seed_str is not None:
            kwargs["nkeys_seed_str"] = self.nkeys_seed_str
        if self.tls_ca is not None or self.tls_cert is not None:
            kwargs["tls"] = self._ssl_context()
        if self.tls_hostname is not None:
            kwargs["tls_hostname"] = self.tls_hostname
        return kwargs

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=self.tls_ca)
        if self.tls_cert is not None:
            tmp = tempfile.mkdtemp(prefix="jss-tls-")  # 0700: only this user can enter it
            cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            try:
                for path, text in ((cert, self.tls_cert), (key, self.tls_key)):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "w") as f:
                        f.write(text or "")
                ctx.load_cert_chain(cert, key)
            finally:
                for path in (cert, key):
                    try:
                        os.unlink(path)
                    except FileNotFoundError:
                        pass
                os.rmdir(tmp)
        return ctx

    def __repr__(self) -> str:
        parts = [f"servers={tuple(redact_url(s) for s in self.servers)!r}"]
        if self.name is not None:
            parts.append(f"name={self.name!r}")
        parts.append(f"timeout={self.timeout!r}")
        if self.user is not None:
            parts.append(f"user={self.user!r}")
        for field in _SECRETS:
            if getattr(self, field) is not None:
                parts.append(f"{field}=<hidden>")
        for field in ("tls_ca", "tls_cert"):
            value = getattr(self, field)
            if value is not None:
                parts.append(f"{field}=<PEM, {len(value)} chars>")
        if self.tls_hostname is not None:
            parts.append(f"tls_hostname={self.tls_hostname!r}")
        if self.extra:
            parts.append(f"extra={self.extra!r}")
        return f"ConnectionOptions({', '.join(parts)})"

    __str__ = __repr__


def _read(path: str | os.PathLike | None, what: str) -> str | None:
    if path is None:
        return None
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or os.PathLike), got {type(path).__name__}")
    with open(os.path.expanduser(path), encoding="utf-8") as f:
        return f.read()


# -- the per-process cache -----------------------------------------------------------------------


class _Entry:
    """One cached connection and the JetStream contexts made on it."""

    __slots__ = ("client", "identity", "contexts")

    def __init__(self, client: jss.Client) -> None:
        self.client = client
        # Names this connection in traces (publisher(worker_header=...)); unlike id(client)
        # it is never reused by a later connection in the same process.
        self.identity = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        # One JetStream context per (domain, api_prefix, max_pending): each context keeps a
        # PubAck inbox subscription, so a context per task would pile subscriptions up on a
        # connection that lives for thousands of tasks.
        self.contexts: dict[tuple[Any, ...], jss.JetStream] = {}


_lock = threading.Lock()
_entries: dict[tuple[int, ConnectionOptions], _Entry] = {}


def _after_fork_in_child() -> None:
    # The parent's connections belong to the parent (their loop threads do not exist
    # here), and a lock held by another parent thread at fork time would never be released.
    global _lock, _entries
    _lock = threading.Lock()
    _entries = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_options(options: Any) -> ConnectionOptions:
    if not isinstance(options, ConnectionOptions):
        raise TypeError(f"options must be a ConnectionOptions, got {type(options).__name__}")
    return options


def _entry(options: ConnectionOptions) -> _Entry:
    key = (os.getpid(), _check_options(options))
    with _lock:
        entry = _entries.get(key)
        if entry is not None and not entry.client.is_closed:
            return entry
        # Connect while holding the lock: concurrent first callers must not open two
        # connections. A closed cached client (closed by the user, or it gave up
        # reconnecting) is replaced.
        log.debug("jetstream_sync.spark: connecting with %r in process %d", options, os.getpid())
        entry = _entries[key] = _Entry(jss.connect(**options.to_connect_kwargs()))
        return entry


def client_for(options: ConnectionOptions) -> jss.Client:
    """This process's connection for ``options``, connecting on first use. Thread-safe.

    Every call in the same process with equal options returns the same
    :class:`jetstream_sync.Client` until it is closed or :func:`drop`-ped;
    a forked child gets its own. Don't ``close()`` it yourself after a task:
    the next task in this Python worker reuses it.

    Blocks while connecting (at most about ``options.timeout`` per server).
    Raises ``NoServersError``, ``TypeError`` for anything but ConnectionOptions.
    """
    return _entry(options).client


def jetstream_for(options: ConnectionOptions, *, domain: str | None = None, api_prefix: str | None = None,
                  max_pending: int = 4000) -> jss.JetStream:
    """A JetStream context on :func:`client_for` ``(options)``, cached with it, retrying per
    :data:`ELECTION_RETRY`. Thread-safe."""
    entry = _entry(options)
    key = (domain, api_prefix, max_pending)
    with _lock:
        js = entry.contexts.get(key)
        if js is None:
            js = entry.contexts[key] = entry.client.jetstream(domain=domain, api_prefix=api_prefix,
                                                               max_pending=max_pending, retry=ELECTION_RETRY)
        return js


def worker_identity(options: ConnectionOptions) -> str:
    """``"<pid>:<connection id>"`` of this process's cached connection for ``options`` (connects if needed)."""
    return _entry(options).identity


def drop(options: ConnectionOptions, timeout: float = 2.0) -> bool:
    """Close and forget this process's connection for ``options``; True if there was one.

    The next :func:`client_for` connects again. Used after a task failed on the
    connection (a PubAck timeout, a closed connection). Blocks at most about
    ``timeout`` seconds closing; close errors are logged, not raised.
    """
    with _lock:
        entry = _entries.pop((os.getpid(), _check_options(options)), None)
    if entry is None:
        return False
    _close(entry, timeout)
    return True


def drop_all(timeout: float = 2.0) -> int:
    """Close and forget every cached connection of this process; return how many. Runs at exit too."""
    with _lock:
        pid = os.getpid()
        mine = [k for k in _entries if k[0] == pid]
        entries = [_entries.pop(k) for k in mine]
    for entry in entries:
        _close(entry, timeout)
    return len(entries)


def _close(entry: _Entry, timeout: float) -> None:
    try:
        entry.client.close(timeout=timeout)
    except Exception as exc:  # the connection may already be broken; dropping must not fail
        log.debug("jetstream_sync.spark: error closing a dropped connection: %r", exc)


atexit.register(drop_all, 1.0)
