# Command-line parsing for ``jetstream-sync``: the parser class whose errors are one line,
# the value parsers (durations, sizes, headers, times) that name the flag they failed on, the
# connection options every command accepts, and the "cfg." flags that map onto config fields.
# Rule: nothing here connects or prints; a bad value is a UsageError (exit 2), raised while parsing.
# Below the facade it uses the subject check (_protocol) and the time parser (_time), which load no
# client; attrs is imported by `evolve`, when a command changes a config, not when the parser is built.
from __future__ import annotations

import argparse
import json
import math
import os
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping

from .._protocol import check_subject
from .._time import parse_time

__all__ = [
    "CFG",
    "Parser",
    "UsageError",
    "common_options",
    "config_flag",
    "config_fields",
    "duration",
    "duration_list",
    "evolve",
    "file_path",
    "header",
    "int_at_least",
    "key_value",
    "limit",
    "merge_nested",
    "opt",
    "read_json_config",
    "size",
    "split_list",
    "time_ago",
    "time_ahead",
]

#: Prefix of the ``dest`` of every flag that sets a config field ("cfg.max_age", "cfg.placement.cluster").
CFG = "cfg."


def config_flag(group: Any, *flags: str, field: str, **kw: Any) -> None:
    """Add a flag that sets config ``field``; left out of the namespace unless given (for ``edit``)."""
    group.add_argument(*flags, dest=CFG + field, default=argparse.SUPPRESS, **kw)


class UsageError(Exception):
    """Bad command line: unknown flag, missing argument, a value that does not parse. Exit code 2."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise :class:`UsageError` (one line, no usage dump).

    Sub-parsers made with ``add_subparsers()`` are of this class too, so an error anywhere in
    the command tree ends the same way. Abbreviated long options are off: a script's
    ``--max`` must not change meaning when a new ``--max-something`` flag appears.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        if any(getattr(p, "hides_connection_options", False) for p in kwargs.get("parents", ())):
            kwargs.setdefault("epilog", CONNECTION_NOTE)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        """Raise :class:`UsageError` naming the (sub)command, instead of printing usage and exiting."""
        command = self.prog.partition(" ")[2]
        head, sep, rest = message.partition("unrecognized arguments: ")
        if sep:
            # A mistyped --pasword must not echo the password given with it or after it.
            shown, after_flag = [], False
            for token in rest.split():
                if token.startswith("-"):
                    shown.append(token.partition("=")[0])
                    after_flag = "=" not in token
                elif after_flag:
                    shown.append("...")
                    after_flag = False
                else:
                    shown.append(token)
            message = f"{head}unrecognized arguments: {' '.join(shown)}"
        raise UsageError(f"{command}: {message}" if command else message)


def read_json_config(path: str) -> dict[str, Any]:
    """The JSON object in ``--config`` FILE; a whole ``info --json`` document gives its ``config`` part.

    Raises :class:`UsageError` naming ``--config`` for a file that cannot be read, is not UTF-8
    JSON, or does not hold an object.
    """
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--config: {path!r} is not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--config: {path!r} is not UTF-8 text (JSON expected)") from None
    except OSError as exc:
        raise UsageError(f"--config: cannot read {path!r}: {exc.strerror}") from None
    if isinstance(doc, dict) and isinstance(doc.get("config"), dict):
        doc = doc["config"]
    if not isinstance(doc, dict):
        raise UsageError(f"--config: {path!r} must hold a JSON object")
    return doc


def opt(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    """The value of an option whose default is ``SUPPRESS`` (absent from ``args`` when not given)."""
    return getattr(args, name, default)


# ---------------------------------------------------------------------------------------------
# Value parsers. Each raises ArgumentTypeError; argparse prefixes "argument --flag: ".
# ---------------------------------------------------------------------------------------------

_DAY = 86400.0
# As the nats CLI: d, w, y are 24 h, 7 d and 365 d; M (capital) is a month of 30 d, m a minute.
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
                   "d": _DAY, "w": 7 * _DAY, "M": 30 * _DAY, "y": 365 * _DAY}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w|M|y)")
_NUMBER = re.compile(r"[+]?(\d+(?:\.\d*)?|\.\d+)")
_DURATION_HELP = "use seconds or a number with a unit (ms, s, m, h, d, w, M for months, y), e.g. 30s, 1h30m, 1y"


def duration(text: str) -> float:
    """Parse ``30s``, ``5m``, ``1h30m``, ``250ms``, ``2d``, ``1w``, ``6M`` (months), ``1y`` or plain seconds
    (``1.5``) into float seconds. Units are as the nats CLI spells them; only ``M`` (month) and ``m``
    (minute) differ by case, the others may be upper case too."""
    s = text.strip()
    if _NUMBER.fullmatch(s):
        return float(s)
    s = "".join(ch if ch == "M" else ch.lower() for ch in s)
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if pos == 0 or pos != len(s) or not math.isfinite(total):
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: {_DURATION_HELP}")
    return total


def age(text: str) -> float:
    """A maximum age: a :func:`duration`, or ``-1``/``unlimited`` (stored as 0, the server's "no limit")."""
    if text.strip().lower() in ("-1", "unlimited"):
        return 0.0
    return duration(text)


_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)")
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
               "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2, "g": 1024**3, "gib": 1024**3,
               "t": 1024**4, "tib": 1024**4}


def _size(text: str, unlimited: bool) -> int:
    s = text.strip().lower()
    if unlimited and s in ("-1", "unlimited"):
        return -1
    m = _SIZE.fullmatch(s)
    if m is None or m.group(2) not in _SIZE_UNITS:
        extra = " or -1 for unlimited" if unlimited else ""
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r}: use bytes or a unit, e.g. 512KB, 10MB, 1GiB{extra}")
    return int(round(float(m.group(1)) * _SIZE_UNITS[m.group(2)]))


def size(text: str) -> int:
    """Parse ``1KB`` (1000), ``1KiB``/``1K`` (1024), ``10MB``, ``1GiB`` or plain bytes; ``-1`` is unlimited."""
    return _size(text, unlimited=True)


def int_at_least(lo: int, unlimited: bool = False) -> Callable[[str], int]:
    """A parser for an int >= ``lo`` (and ``-1``, spelled also ``unlimited``, when ``unlimited``)."""

    def parse(text: str) -> int:
        s = text.strip().lower()
        if unlimited and s in ("-1", "unlimited"):
            return -1
        try:
            value = int(s.replace("_", "").replace(",", ""))
        except ValueError:
            value = None
        if value is None or value < lo:
            also = " or -1 for unlimited" if unlimited else ""
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected an integer >= {lo}{also}")
        return value

    parse.__name__ = "integer"
    return parse


def limit(text: str) -> int:
    """An int limit as the server spells it: >= 0, or -1 (``unlimited``) for no limit."""
    return int_at_least(0, unlimited=True)(text)


def split_list(text: str) -> list[str]:
    """``a,b`` -> ``["a", "b"]`` (for repeatable flags that also take comma-separated values)."""
    items = [part.strip() for part in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"invalid list {text!r}: empty item")
    return items


def duration_list(text: str) -> list[float]:
    """``1s,5s,30s`` -> ``[1.0, 5.0, 30.0]``."""
    return [duration(part) for part in split_list(text)]


def subject(text: str) -> str:
    """A NATS subject (wildcards allowed), checked as the client checks it, before connecting."""
    try:
        return check_subject(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def header(text: str) -> tuple[str, str]:
    """``Key:Value`` -> ``("Key", "Value")`` (spaces around the value are trimmed)."""
    key, sep, value = text.partition(":")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"invalid header {text!r}: expected KEY:VALUE")
    return key.strip(), value.strip()


def key_value(text: str) -> tuple[str, str]:
    """``key=value`` -> ``("key", "value")``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"invalid entry {text!r}: expected KEY=VALUE")
    return key.strip(), value


def _time(text: str, sign: int) -> datetime:
    try:
        parsed = parse_time(text.strip())
    except ValueError:
        parsed = None
    if parsed is not None:
        return parsed
    try:
        offset = duration(text)
    except argparse.ArgumentTypeError:
        way = "ago" if sign < 0 else "from now"
        raise argparse.ArgumentTypeError(
            f"invalid time {text!r}: use RFC 3339 (2024-05-01T12:00:00Z) or a duration {way} (e.g. 1h)") from None
    return datetime.now(timezone.utc) + sign * timedelta(seconds=offset)


def time_ago(text: str) -> datetime:
    """An RFC 3339 time, or a duration meaning that long ago (``1h`` = an hour ago)."""
    return _time(text, -1)


def time_ahead(text: str) -> datetime:
    """An RFC 3339 time, or a duration meaning that long from now."""
    return _time(text, +1)


_DELIVER_POLICIES = ("all", "last", "new", "last_per_subject", "by_start_sequence", "by_start_time")


def filters(text: str) -> list[str]:
    """``--filter``: subjects, comma-separated; ``''`` (nothing) means every subject of the stream."""
    return split_list(text) if text.strip() else []


def percent(text: str) -> str:
    """``--sample 100`` or ``100%``: the server's sample_freq, ``"100%"``."""
    s = text.strip().rstrip("%").strip()
    try:
        value = int(s)
    except ValueError:
        value = -1
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"invalid percentage {text!r}: expected 0 to 100, e.g. 100 or 100%")
    return f"{value}%"


def deliver_start(text: str) -> dict[str, Any]:
    """``--deliver``: a policy (all, last, new, last-per-subject), a stream sequence, a duration ago or an
    RFC 3339 time, as the config fields it sets."""
    s = text.strip().lower().replace("-", "_")
    if s in _DELIVER_POLICIES:
        return {"deliver_policy": s}
    try:
        if s.isdigit():  # a plain number is a stream sequence, never seconds ago
            if int(s) < 1:
                raise argparse.ArgumentTypeError("a stream sequence starts at 1")
            return {"deliver_policy": "by_start_sequence", "opt_start_seq": int(s)}
        return {"deliver_policy": "by_start_time", "opt_start_time": time_ago(text)}
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"invalid start {text!r}: use all, last, new, last-per-subject, a stream sequence (e.g. 10), a "
            f"duration ago (e.g. 2m, 1h) or an RFC 3339 time") from None


def file_path(text: str) -> str:
    """A path to a readable file (checked now, so a typo is a usage error naming the flag)."""
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"no such file: {text!r}")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: permission denied")
    return text


# ---------------------------------------------------------------------------------------------
# Options every command takes (before or after the command name)
# ---------------------------------------------------------------------------------------------


#: The epilog of every command's help, instead of repeating the connection options there.
CONNECTION_NOTE = ("connection options (-s/--server, --timeout, --user, --password, --token, --creds, --nkey, "
                   "--tlscert, --tlskey, --tlsca, --domain, --js-api-prefix, --name) work before or after the "
                   "command: see jetstream-sync --help")


def common_options(shown: bool = True) -> Parser:
    """A parent parser with the connection and output options; every default is SUPPRESS.

    It is a parent of the top-level parser and of every sub-parser, so the options work
    before or after the command; SUPPRESS keeps a later parser from overwriting an earlier
    value with its default. Read them with :func:`opt`. ``--timeout`` means the same everywhere:
    the timeout of connecting and of each request (a command's own wait has a name of its own).
    ``shown=False`` (the commands' copy) leaves the connection options out of the help, which
    lists them once, at the top level; a command's help ends with :data:`CONNECTION_NOTE` instead.
    """
    common = Parser(add_help=False)
    common.hides_connection_options = not shown  # type: ignore[attr-defined]
    conn = common.add_argument_group("connection options")
    s = argparse.SUPPRESS

    def help_(text: str) -> str:
        return text if shown else argparse.SUPPRESS

    conn.add_argument("-s", "--server", metavar="URL", default=s,
                      help=help_("NATS server URL(s), comma-separated "
                                 "(default: $NATS_URL, else nats://127.0.0.1:4222)"))
    conn.add_argument("--user", default=s, help=help_("user name (or $NATS_USER)"))
    conn.add_argument("--password", default=s, help=help_("password (or $NATS_PASSWORD, which stays out of ps)"))
    conn.add_argument("--token", default=s, help=help_("authentication token (or $NATS_TOKEN)"))
    conn.add_argument("--creds", metavar="FILE", type=file_path, default=s,
                      help=help_("JWT credentials file (or $NATS_CREDS)"))
    conn.add_argument("--nkey", metavar="FILE", type=file_path, default=s, help=help_("NKey seed file (or $NATS_NKEY)"))
    conn.add_argument("--tlscert", metavar="FILE", type=file_path, default=s,
                      help=help_("TLS client certificate (or $NATS_CERT)"))
    conn.add_argument("--tlskey", metavar="FILE", type=file_path, default=s,
                      help=help_("TLS client private key (or $NATS_KEY)"))
    conn.add_argument("--tlsca", metavar="FILE", type=file_path, default=s,
                      help=help_("CA certificates to verify the server with (or $NATS_CA); "
                                 "any TLS option requires TLS"))
    conn.add_argument("--timeout", metavar="DURATION", type=duration, default=s,
                      help=help_("timeout of connecting and of each request, before or after the command "
                                 "(default 5s)"))
    conn.add_argument("--domain", default=s, help=help_("JetStream domain"))
    conn.add_argument("--js-api-prefix", metavar="PREFIX", default=s,
                      help=help_("JetStream API prefix (instead of --domain)"))
    conn.add_argument("--name", metavar="NAME", dest="connection_name", default=s,
                      help=help_("connection name the server shows (default jetstream-sync)"))
    out = common.add_argument_group("output options")
    out.add_argument("-j", "--json", action="store_true", default=s, help="print JSON on stdout")
    out.add_argument("-v", "--verbose", action="count", default=s,
                     help="log to stderr: -v for INFO, -vv for DEBUG (and tracebacks)")
    return common


# ---------------------------------------------------------------------------------------------
# Config flags: dest "cfg.<field>" (or "cfg.<field>.<subfield>"), default SUPPRESS, so the
# namespace holds exactly the fields the user gave; `edit` changes only those.
# ---------------------------------------------------------------------------------------------


def config_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields given on the command line, nested by the dots of their dest.

    A repeated ``KEY=VALUE`` flag (a list of pairs) becomes a dict.
    """
    out: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if not dest.startswith(CFG):
            continue
        if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
            value = dict(value)
        *parents, leaf = dest[len(CFG):].split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def evolve(config: Any, **changes: Any) -> Any:
    """A copy of ``config`` (a StreamConfig, ConsumerConfig or a part of one) with ``changes``."""
    import attrs  # late: building the parser (and --help) does not load attrs

    return attrs.evolve(config, **changes)


def merge_nested(current: Any, given: Mapping[str, Any]) -> Any:
    """For ``edit``: the fields of a nested config (placement, republish) given, over the current ones."""
    if current is None:
        return dict(given)
    return evolve(current, **given)
