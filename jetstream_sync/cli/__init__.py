# The ``jetstream-sync`` command line: an admin tool for JetStream in the spirit of the `nats`
# CLI's jetstream commands (account, stream, consumer, pub, kv) plus `server` and `demo`.
# This module builds the parser, sets up logging and is the error boundary: every failure
# becomes one stderr line and an exit code from _errors (documented in docs/cli.md).
"""``jetstream-sync`` / ``python -m jetstream_sync``: the command line.

Entry point: :func:`main`. Each command lives in its own module (``account``, ``stream``,
``consumer``, ``kv``, ``pub``, ``sub``, ``request``, ``events``, ``server``, ``demo``, ``object``) with a
``register(subparsers, common)`` function.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from typing import Sequence

from .. import __version__
from . import account, consumer, demo, events, kv, pub, request, server, stream, sub as sub_command
from . import object as object_command
from ._args import Parser, UsageError, common_options, opt
from ._errors import EXIT_CODES_HELP, OK, exit_code, one_line
from ._output import Output
from ._session import Session

__all__ = ["build_parser", "main"]

PROG = "jetstream-sync"

_DESCRIPTION = """\
Manage NATS JetStream streams, consumers, key-value buckets and object stores, publish and pull messages,
run an embedded server. Connection and output options work before or after the command.
"""


def build_parser() -> Parser:
    """The whole command tree. Parsing errors raise ``UsageError`` (one line, exit 2)."""
    parser = Parser(prog=PROG, description=_DESCRIPTION, epilog=EXIT_CODES_HELP, parents=[common_options()],
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = common_options(shown=False)  # the commands accept them too; their help points here
    for module in (account, stream, consumer, kv, pub, sub_command, request, events, server, demo):
        module.register(sub, common)
    object_command.register(sub, common)
    return parser


def _setup_logging(verbose: int) -> list[tuple[logging.Logger, logging.Handler, int]]:
    """Quiet by default; -v INFO, -vv DEBUG for the ``jetstream_sync`` logger, to stderr.

    Returns what to undo, so an in-process ``main()`` leaves logging as it found it.
    """
    logger = logging.getLogger("jetstream_sync")
    if verbose <= 0:
        handler: logging.Handler = logging.NullHandler()  # keeps logging's last-resort printer quiet
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    previous = logger.level
    logger.addHandler(handler)
    if verbose > 0:
        logger.setLevel(logging.INFO if verbose == 1 else logging.DEBUG)
    return [(logger, handler, previous)]


def _error(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``jetstream-sync`` command; return its exit code (see ``EXIT_CODES_HELP``).

    Blocks until the command is done (``server`` until SIGINT/SIGTERM). Never raises for a
    failure of the command: it prints one line on stderr and returns 1, 2, 3, 4 or 130.
    ``--help`` and ``--version`` print and return 0.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = 0
    undo: list[tuple[logging.Logger, logging.Handler, int]] = []
    session: Session | None = None
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else OK
        verbose = opt(args, "verbose", 0)
        undo = _setup_logging(verbose)
        out = Output(bool(opt(args, "json", False)))
        session = Session(args)
        code = args.handler(args, session, out) or OK
        sys.stdout.flush()  # a closed pipe is reported here, inside the error boundary
        return code
    except BaseException as exc:  # the error boundary: one line, one exit code
        if isinstance(exc, SystemExit):
            raise  # a handler's own sys.exit() is kept as is
        if isinstance(exc, BrokenPipeError):
            return _broken_pipe()
        if not isinstance(exc, (Exception, KeyboardInterrupt)):
            raise  # GeneratorExit and the like are not command failures
        code = exit_code(exc)
        if verbose >= 2 and not isinstance(exc, (UsageError, KeyboardInterrupt)):
            traceback.print_exception(exc, file=sys.stderr)
        _error(one_line(exc))
        return code
    finally:
        if session is not None:
            try:
                session.close()
            except KeyboardInterrupt:
                pass
        for logger, handler, level in undo:
            logger.removeHandler(handler)
            logger.setLevel(level)


def _broken_pipe() -> int:
    """stdout was closed early (``| head``): stop quietly, as Unix tools do."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, as a shell reports a command killed by it
