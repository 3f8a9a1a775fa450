# Exit codes of ``jetstream-sync`` and the one place exceptions become them. Scripts rely on
# these numbers: change them only with docs/cli.md and the --help epilog.
# Rule: every failure ends as exactly one stderr line, "jetstream-sync: error: <message>".
from __future__ import annotations

import jetstream_sync as jss

from ._args import UsageError

__all__ = [
    "EXIT_CODES_HELP",
    "CommandError",
    "NotFound",
    "exit_code",
    "one_line",
    "OK",
    "FAILED",
    "USAGE",
    "NOT_FOUND",
    "CONNECT",
    "INTERRUPTED",
]

OK = 0
FAILED = 1
USAGE = 2
NOT_FOUND = 3
CONNECT = 4
INTERRUPTED = 130

EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    the server refused or the operation failed (JetStream API error, timeout, ...)
  2    usage error: unknown flag, missing argument, bad value, invalid config
  3    not found: stream, consumer, message, key-value bucket or key, object store or object; `consumer next`
       got no message in time
  4    cannot connect or not authorized (no server reachable, bad credentials,
       permission denied)
  130  interrupted (Ctrl-C)
errors are one line on stderr: "jetstream-sync: error: <message>"
"""


class CommandError(Exception):
    """A failure a command reports itself, with its exit code (default 1)."""

    code = FAILED

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class NotFound(CommandError):
    """A stream, consumer, message, bucket or key that does not exist (exit 3), named in the message."""

    code = NOT_FOUND


def exit_code(exc: BaseException) -> int:
    """The exit code for an exception that ended a command."""
    if isinstance(exc, CommandError):
        return exc.code
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(exc, UsageError):
        return USAGE
    if isinstance(exc, (jss.StreamNotFoundError, jss.ConsumerNotFoundError, jss.MessageNotFoundError)):
        return NOT_FOUND
    if isinstance(exc, (jss.NoServersError, jss.PermissionViolationError)):
        return CONNECT
    if isinstance(exc, jss.JetStreamError):
        return FAILED
    if isinstance(exc, (ValueError, TypeError)):
        return USAGE  # the library validates arguments and configs before sending anything
    return FAILED


def one_line(exc: BaseException) -> str:
    """The error message for stderr: the first line of the exception text, with context."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if isinstance(exc, (CommandError, UsageError, jss.JetStreamError, ValueError, TypeError)):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
