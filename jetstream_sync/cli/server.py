# ``jetstream-sync server``: run an embedded nats-server (jetstream_sync.server.NatsServer) in
# the foreground. The first stdout line is its URL (flushed at once, so a script can read it);
# SIGINT or SIGTERM stops the server and exits 0. If nats-server dies on its own: exit 1.
# jetstream_sync.server is imported when the command runs (start-up time of the other commands).
from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from ._args import UsageError, file_path, int_at_least, opt
from ._errors import CommandError
from ._output import Output
from ._session import Session

__all__ = ["register"]

log = logging.getLogger(__name__)

#: After nats-server exits by itself, how long a stop signal may still be on its way to us (a
#: Ctrl-C and an external stop of nats-server can arrive together) before we call the exit a failure.
_SIGNAL_GRACE = 0.5


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``server`` command to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser(
        "server", parents=[common], help="run an embedded nats-server in the foreground",
        description="Run nats-server with JetStream on a loopback address until SIGINT (Ctrl-C) or SIGTERM. "
                    "The first line on stdout is its URL (with --json: a one-line JSON object). "
                    "It runs without authentication, so it only listens on loopback.")
    p.add_argument("--port", type=int_at_least(0), default=0, help="client port (default 0: a free port)")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (default 127.0.0.1)")
    p.add_argument("--store-dir", metavar="DIR",
                   help="JetStream storage, kept after exit (default: a temporary directory, removed on exit)")
    p.add_argument("--jetstream", action=argparse.BooleanOptionalAction, default=True,
                   help="enable JetStream (default: on)")
    p.add_argument("--server-name", metavar="NAME", help="the server's name")
    p.add_argument("--config", metavar="FILE", type=file_path,
                   help="a nats-server configuration file (must not set jetstream.store_dir: use --store-dir)")
    p.add_argument("--monitor", action="store_true", help="open the HTTP monitoring port too")
    p.set_defaults(handler=cmd_server)


def cmd_server(args: argparse.Namespace, session: Session, out: Output) -> int:
    """Start the server, print its URL, block until SIGINT/SIGTERM, stop it. Returns 0.

    Raises CommandError (exit 1) when nats-server cannot start or exits on its own.
    """
    if opt(args, "server") is not None:
        raise UsageError("server: -s/--server is for connecting; use --port/--host for the embedded server")
    from ..server import NatsServer, NatsServerNotFoundError  # late: see the charter

    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            config_text = Path(args.config).read_text(encoding="utf-8") if args.config else None
        except UnicodeDecodeError:
            raise UsageError(f"--config: {args.config!r} is not a UTF-8 nats-server config file") from None
        try:
            server = NatsServer(port=args.port, host=args.host, jetstream=args.jetstream, store_dir=args.store_dir,
                                name=args.server_name, config_text=config_text, monitor=args.monitor)
        except NatsServerNotFoundError as exc:
            raise CommandError(str(exc)) from None
        try:
            server.start()
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        try:
            _announce(server, out)
            log.info("nats-server pid %s running at %s (store %s); SIGINT or SIGTERM stops it",
                     server.pid, server.url, server.store_dir)
            while not stop.wait(0.25):
                if not server.is_running and not stop.wait(_SIGNAL_GRACE):
                    raise CommandError(f"nats-server exited on its own: {_last_line(server.log_tail(5))}")
            log.info("stopping nats-server")
        finally:
            server.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _announce(server: Any, out: Output) -> None:
    if out.json:
        doc = {"url": server.url, "port": server.port, "pid": server.pid,
               "store_dir": str(server.store_dir) if server.store_dir else None,
               "monitor_url": server.monitor_url if server.monitor else None}
        out.line(json.dumps(doc))
    else:
        out.line(server.url)
    out.stream.flush()


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "no log"
