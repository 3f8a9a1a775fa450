# What ``jetstream-sync`` prints: one JSON document (--json) or human output (aligned tables,
# key/value blocks), human numbers (sizes, durations, ages), messages as text or base64, and
# the tqdm progress bar on stderr.
# Rule: stdout carries results only; progress and logs go to stderr; errors are main()'s job.
# tqdm is imported when a bar is made (start-up time); times are formatted by _time, below the facade.
from __future__ import annotations

import base64
import json
import os
import stat
import sys
from datetime import datetime, timezone
from typing import IO, Any, Callable, Iterable, Sequence, TypeVar

from .._time import format_time

__all__ = [
    "Output",
    "fmt_age",
    "fmt_bool",
    "fmt_duration",
    "fmt_int",
    "fmt_limit",
    "fmt_size",
    "fmt_time",
    "message_dict",
    "payload_text",
    "print_message",
    "progress_bar",
]


def _data_fields(data: bytes) -> dict[str, Any]:
    try:
        return {"data": data.decode("utf-8"), "data_encoding": "utf-8"}
    except UnicodeDecodeError:
        return {"data": base64.b64encode(data).decode("ascii"), "data_encoding": "base64"}


def message_dict(*, subject: str, data: bytes, headers: Any, **fields: Any) -> dict[str, Any]:
    """A message for --json: ``data`` as UTF-8 text when it is valid UTF-8, else base64
    (``data_encoding`` says which); ``headers`` as ``{key: [values]}``; times RFC 3339."""
    doc: dict[str, Any] = {}
    for key, value in fields.items():
        doc[key] = format_time(value) if isinstance(value, datetime) else value
    doc["subject"] = subject
    doc["headers"] = headers.multi() if headers else {}
    doc["size"] = len(data)
    doc.update(_data_fields(data))
    return doc


class Output:
    """Writes a command's result to stdout: JSON when ``json`` is set, human text otherwise."""

    def __init__(self, json_mode: bool, stream: IO[str] | None = None) -> None:
        self.json = json_mode
        self._stream = stream

    @property
    def stream(self) -> IO[str]:
        return self._stream if self._stream is not None else sys.stdout

    def emit(self, doc: Any) -> None:
        """Print one JSON document (indented) and a newline."""
        self.stream.write(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")

    def json_line(self, doc: Any) -> None:
        """Print one JSON document on one line and flush it (for streams of documents, also into a pipe)."""
        self.stream.write(json.dumps(doc, ensure_ascii=False, default=str) + "\n")
        self.stream.flush()

    def line(self, text: str = "") -> None:
        """Print one line of human output."""
        self.stream.write(text + "\n")

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Print an aligned table; columns whose every value is a number are right-aligned."""
        cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
        numeric = [all(_numeric(r[i]) for r in cells[1:]) and len(cells) > 1 for i in range(len(headers))]
        for r in cells:
            parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric)]
            self.line("  ".join(parts).rstrip())

    def block(self, title: str | None, rows: Iterable[tuple[str, Any]], indent: int = 2) -> None:
        """Print a key/value block under ``title``: ``  Key: value`` with the values aligned."""
        rows = [(k, v) for k, v in rows if v is not None]
        if title:
            self.line(title)
        if not rows:
            return
        width = max(len(k) for k, _ in rows) + 1
        pad = " " * (indent if title else 0)
        for key, value in rows:
            self.line(f"{pad}{(key + ':').ljust(width)} {value}")


def _numeric(text: str) -> bool:
    t = text.replace(",", "").replace(".", "", 1)
    return t.isdigit() or (t.startswith("-") and t[1:].isdigit())


# ---------------------------------------------------------------------------------------------
# Human numbers
# ---------------------------------------------------------------------------------------------


def fmt_int(n: int | None) -> str:
    """``1234567`` -> ``1,234,567``."""
    return "" if n is None else f"{n:,}"


def fmt_limit(n: int | None, unit: str = "") -> str:
    """A server limit: -1 (or unset) reads ``unlimited``."""
    if n is None or n < 0:
        return "unlimited"
    return fmt_size(n) if unit == "bytes" else fmt_int(n)


def fmt_size(n: int | None) -> str:
    """Bytes in IEC units: ``512 B``, ``1.5 KiB``, ``10 MiB``."""
    if n is None:
        return ""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}".replace(".0 ", " ")
        value /= 1024
    return str(n)  # pragma: no cover


def fmt_duration(seconds: float | None, zero: str = "0s") -> str:
    """Float seconds as Go prints durations: ``250ms``, ``30s``, ``1h30m0s``; ``zero`` for 0."""
    if seconds is None:
        return ""
    if seconds == 0:
        return zero
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms" if ms >= 1 else f"{seconds * 1e6:g}µs"
    whole = int(seconds)
    frac = seconds - whole
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    sec = f"{s + frac:.3f}".rstrip("0").rstrip(".") if frac else str(s)
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"


def fmt_time(dt: datetime | None) -> str:
    """An aware datetime as RFC 3339 UTC (``2024-05-01T12:00:00.5Z``); empty when unset."""
    return "" if dt is None else format_time(dt)


def fmt_age(dt: datetime | None, now: datetime | None = None) -> str:
    """How long ago: ``3.2s ago``; empty when unset."""
    if dt is None:
        return ""
    now = now or datetime.now(timezone.utc)
    seconds = max(0.0, (now - dt).total_seconds())
    return f"{fmt_duration(round(seconds, 1) if seconds >= 1 else round(seconds, 3))} ago"


def fmt_bool(value: bool | None) -> str:
    """``true``/``false`` as the server spells them; an unset flag reads ``false``."""
    return "true" if value else "false"


# ---------------------------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------------------------


def progress_bar(total: int | None, wanted: bool | None, desc: str, unit: str = "msg", **options: Any) -> Any:
    """A tqdm bar on stderr: on when ``wanted`` is True, off when False, else on if stderr is a TTY.

    ``options`` go to tqdm (``unit_scale``, ``unit_divisor`` for a bar counting bytes); ``total`` None
    draws a counter. Returns a tqdm instance (disabled bars cost next to nothing per ``update``).
    """
    from tqdm import tqdm  # late: only pub --count, demo and object put/get draw a bar

    show = sys.stderr.isatty() if wanted is None else wanted
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not show,
                dynamic_ncols=True, mininterval=0.1, leave=True, **options)


def payload_text(data: bytes) -> str:
    """A payload for people: its UTF-8 text, or a note of its size when it is binary (never dumped)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(data)} bytes of binary data; --json shows them as base64>"


def print_message(out: Output, title: str, subject: str, headers: Any, data: bytes,
                  time: datetime | None = None, extra: str = "") -> None:
    """Print a message for people: a title line, its headers, a blank line, then the payload.

    A payload that is not UTF-8 is not dumped on the terminal; --json gives it as base64.
    """
    when = f"  {fmt_time(time)}" if time else ""
    out.line(f"[{title}] {subject}{when}  ({fmt_size(len(data))}){extra}")
    for key, values in (headers.multi().items() if headers else ()):
        for value in values:
            out.line(f"{key}: {value}")
    out.line()
    out.line(payload_text(data))
    out.line()


_T = TypeVar("_T")


def write_whole(target: str, write: Callable[[str], _T]) -> _T:
    """``write(path)`` the output file ``target`` so that it appears whole or not at all: a regular file
    (or none yet) is written as a temporary file beside it, renamed over it once complete (keeping the
    replaced file's permissions; through a symlink, the file it points to) and removed on any failure; a
    device or pipe is written to directly. Returns what ``write`` returns."""
    if os.path.exists(target) and not os.path.isfile(target):
        return write(target)
    final = os.path.realpath(target)
    partial = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.{os.getpid()}.part")
    try:
        result = write(partial)
        if os.path.exists(final):
            os.chmod(partial, stat.S_IMODE(os.stat(final).st_mode))
        os.replace(partial, final)
    except BaseException:
        try:
            os.unlink(partial)
        except FileNotFoundError:
            pass
        raise
    return result
