# The connection of one ``jetstream-sync`` run: turns the connection options into
# ``jss.connect()`` keyword arguments (auth, creds, nkey, an ssl.SSLContext for TLS),
# connects on first use and closes at the end. Commands that need no server never connect.
# The client (with nats-py and asyncio) and ssl are imported when a command connects, not before:
# `--help`, a usage error and `server` do not load them.
from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING, Any

import jetstream_sync as jss

from ._args import UsageError, file_path, opt

if TYPE_CHECKING:
    import ssl

__all__ = ["Session"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 5.0


#: The environment variable read for each connection flag not given (the names the nats CLI reads).
ENVIRONMENT = {"user": "NATS_USER", "password": "NATS_PASSWORD", "token": "NATS_TOKEN", "creds": "NATS_CREDS",
               "nkey": "NATS_NKEY", "tlscert": "NATS_CERT", "tlskey": "NATS_KEY", "tlsca": "NATS_CA"}
_FILES = {"creds", "nkey", "tlscert", "tlskey", "tlsca"}


class Session:
    """Lazily connected client and JetStream context for one command. Not thread-safe."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._client: jss.Client | None = None
        self._js: jss.JetStream | None = None

    @property
    def explicit_server(self) -> str | None:
        """The ``-s/--server`` value, when given."""
        return opt(self.args, "server")

    @property
    def servers(self) -> str:
        """Where to connect: ``-s``, else ``$NATS_URL``, else ``nats://127.0.0.1:4222``."""
        from ..client import default_servers  # late: the client is loaded when a command connects

        return self.explicit_server or default_servers()

    @property
    def timeout(self) -> float:
        """The request timeout (``--timeout``, default 5 s)."""
        return opt(self.args, "timeout", DEFAULT_TIMEOUT)

    def given(self, name: str) -> Any:
        """A connection flag's value, else its environment variable (``ENVIRONMENT[name]``), else None.

        Secrets can so stay off the command line, where ``ps`` shows them to every user.
        """
        value = opt(self.args, name)
        if value is not None:
            return value
        variable = ENVIRONMENT[name]
        value = os.environ.get(variable) or None
        if value is not None and name in _FILES:
            try:
                file_path(value)
            except argparse.ArgumentTypeError as exc:
                raise UsageError(f"${variable} (for --{name}): {exc}") from None
        return value

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments for ``jss.connect()`` from the auth and TLS options (flags, else environment).

        Raises UsageError for flags that cannot be combined or TLS files that do not load.
        """
        options: dict[str, Any] = {}
        user, password, token = self.given("user"), self.given("password"), self.given("token")
        if password is not None and user is None:
            raise UsageError("--password needs --user")
        if token is not None and user is not None:
            raise UsageError("--token and --user are exclusive")
        if user is not None:
            options["user"] = user
            options["password"] = password or ""
        if token is not None:
            options["token"] = token
        if self.given("creds") is not None:
            options["user_credentials"] = self.given("creds")
        if self.given("nkey") is not None:
            options["nkeys_seed"] = self.given("nkey")
        tls = self._tls_context()
        if tls is not None:
            options["tls"] = tls
        return options

    def _tls_context(self) -> ssl.SSLContext | None:
        cert, key, ca = self.given("tlscert"), self.given("tlskey"), self.given("tlsca")
        if cert is None and key is None and ca is None:
            return None
        if key is not None and cert is None:
            raise UsageError("--tlskey needs --tlscert")
        import ssl  # late: only TLS options need it before connecting

        try:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        except (ssl.SSLError, OSError) as exc:
            raise UsageError(f"--tlsca: cannot load {ca!r}: {exc}") from None
        if cert is not None:
            try:
                ctx.load_cert_chain(cert, key)
            except (ssl.SSLError, OSError) as exc:
                raise UsageError(f"--tlscert/--tlskey: cannot load the client certificate: {exc}") from None
        return ctx

    def client(self) -> jss.Client:
        """Connect on first call (blocks up to about ``--timeout``); the same client afterwards.

        Raises NoServersError/AuthorizationError (exit 4), UsageError for bad options.
        """
        if self._client is None:
            from ..client import redact_url  # late: the client is loaded when a command connects

            options = self.connect_options()
            servers = [s.strip() for s in self.servers.split(",") if s.strip()]
            log.info("connecting to %s", ", ".join(redact_url(s) for s in servers))
            self._client = jss.connect(servers, name=opt(self.args, "connection_name", "jetstream-sync"),
                                       timeout=self.timeout, **options)
            log.info("connected to %s", self._client.connected_url)
        return self._client

    def js(self) -> jss.JetStream:
        """The JetStream context (``--domain`` or ``--js-api-prefix``); connects on first call."""
        if self._js is None:
            domain, prefix = opt(self.args, "domain"), opt(self.args, "js_api_prefix")
            if domain is not None and prefix is not None:
                raise UsageError("--domain and --js-api-prefix are exclusive")
            self._js = self.client().jetstream(domain=domain, api_prefix=prefix, timeout=self.timeout)
        return self._js

    def close(self) -> None:
        """Close the client if one was opened (flushes pending acks first). Never raises."""
        client, self._client, self._js = self._client, None, None
        if client is None:
            return
        try:
            client.close()
        except Exception:  # closing a broken connection: nothing left to report
            log.debug("closing the client failed", exc_info=True)
