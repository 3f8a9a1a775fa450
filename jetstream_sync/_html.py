# Charter: the HTML that Jupyter shows for info objects, publish acks and
# consume counters (the bodies of their ``_repr_html_``). Pure string building
# over values already in memory: no I/O, no locks, no IPython import. Every
# value, name and label goes through html.escape, because descriptions,
# subjects and error messages come from the server or from users.
from __future__ import annotations

import enum
import html
from datetime import datetime, timedelta
from typing import Any, Iterable, Sequence

__all__ = ["consume_handle", "consume_stats", "consumer_info", "counters", "kv_table", "pub_ack", "stream_info"]

_MISSING = "\u2014"  # an em dash for "not set"

_TABLE = "border-collapse:collapse;margin:2px 0;font-size:0.95em"
_CELL = "padding:1px 10px 1px 4px;text-align:left;vertical-align:top"
_KEY = _CELL + ";font-weight:normal;color:#666"
_NUM = "padding:1px 10px;text-align:right;font-variant-numeric:tabular-nums"

# The state badge of a consume handle: the colour only helps the eye, the word says it.
_STATE_COLOURS = {"running": "#2e7d32", "draining": "#ef6c00", "stopped": "#555", "error": "#c62828"}


def fmt(value: Any) -> str:
    """``value`` as short display text (not yet escaped): numbers grouped, times in ISO form."""
    if value is None:
        return _MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(fmt(v) for v in value) if value else _MISSING
    if isinstance(value, (bytes, bytearray)):
        return repr(bytes(value))
    return str(value)


def size(n: int | None) -> str:
    """A byte count with a binary unit, e.g. ``1.5 KiB (1,536)``."""
    if n is None:
        return _MISSING
    if n < 1024:
        return f"{n:,} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            return f"{value:.1f} {unit} ({n:,})"
    raise AssertionError("unreachable")


def _title(kind: str, name: Any) -> str:
    head = f"<strong>{html.escape(kind)}</strong>"
    if name is not None:
        head += f" <code>{html.escape(fmt(name))}</code>"
    return head


def kv_table(kind: str, name: Any, rows: Iterable[tuple[str, Any]], *, extra: str = "") -> str:
    """A titled two-column table; each row is ``(label, value)``, values formatted with :func:`fmt`.

    ``extra`` is trusted HTML placed after the title (used for the state badge).
    """
    body = "".join(
        f'<tr><th style="{_KEY}">{html.escape(label)}</th><td style="{_CELL}">{html.escape(fmt(value))}</td></tr>'
        for label, value in rows
    )
    return (f'<div class="jetstream-sync">{_title(kind, name)}{extra}'
            f'<table style="{_TABLE}"><tbody>{body}</tbody></table></div>')


def counters(kind: str, items: Sequence[tuple[str, Any]], *, extra: str = "", footer: str = "") -> str:
    """A titled one-row table of counters: labels as the header, values below, right-aligned."""
    head = "".join(f'<th style="{_NUM};color:#666;font-weight:normal">{html.escape(label)}</th>'
                   for label, _ in items)
    cells = "".join(f'<td style="{_NUM}">{html.escape(fmt(value))}</td>' for _, value in items)
    return (f'<div class="jetstream-sync">{_title(kind, None)}{extra}'
            f'<table style="{_TABLE}"><thead><tr>{head}</tr></thead><tbody><tr>{cells}</tr></tbody></table>'
            f"{footer}</div>")


def _seq_pair(seq: Any) -> str | None:
    """A ``SequenceInfo`` as ``consumer N / stream M``."""
    if seq is None:
        return None
    return f"consumer {fmt(seq.consumer_seq)} / stream {fmt(seq.stream_seq)}"


def stream_info(info: Any) -> str:
    """HTML for a ``StreamInfo`` snapshot."""
    cfg = info.config
    state = info.state
    rows: list[tuple[str, Any]] = []
    if cfg is not None:
        if cfg.description:
            rows.append(("description", cfg.description))
        rows += [
            ("subjects", cfg.subjects),
            ("storage", cfg.storage),
            ("retention", cfg.retention),
            ("replicas", cfg.num_replicas),
        ]
    if state is not None:
        rows += [
            ("messages", state.messages),
            ("bytes", size(state.bytes)),
            ("first seq", state.first_seq),
            ("last seq", state.last_seq),
            ("consumers", state.consumer_count),
        ]
    rows.append(("created", info.created))
    if info.domain:
        rows.append(("domain", info.domain))
    if info.cluster is not None and info.cluster.name:  # a single server names no cluster
        rows.append(("cluster", info.cluster.name))
        rows.append(("leader", info.cluster.leader))
    return kv_table("StreamInfo", None if cfg is None else cfg.name, rows)


def consumer_info(info: Any) -> str:
    """HTML for a ``ConsumerInfo`` snapshot."""
    cfg = info.config
    rows: list[tuple[str, Any]] = [("stream", info.stream_name)]
    if cfg is not None:
        if cfg.description:
            rows.append(("description", cfg.description))
        rows += [
            ("filter", cfg.filter_subject or cfg.filter_subjects or None),
            ("ack policy", cfg.ack_policy),
            ("deliver policy", cfg.deliver_policy),
        ]
    rows += [
        ("delivered", _seq_pair(info.delivered)),
        ("ack floor", _seq_pair(info.ack_floor)),
        ("num_pending", info.num_pending),
        ("num_ack_pending", info.num_ack_pending),
        ("num_redelivered", info.num_redelivered),
        ("num_waiting", info.num_waiting),
    ]
    if info.paused:
        rows.append(("paused", True))
    rows.append(("created", info.created))
    return kv_table("ConsumerInfo", info.name, rows)


def pub_ack(ack: Any) -> str:
    """HTML for a ``PubAck``."""
    rows: list[tuple[str, Any]] = [("stream", ack.stream), ("seq", ack.seq), ("duplicate", ack.duplicate)]
    if ack.domain:
        rows.append(("domain", ack.domain))
    return kv_table("PubAck", None, rows)


def _stats_items(stats: Any) -> list[tuple[str, Any]]:
    return [
        ("received", stats.received),
        ("handled", stats.handled),
        ("handler_errors", stats.handler_errors),
        ("pulls", stats.pulls),
        ("buffered", stats.buffered),
        ("warnings", stats.warnings),
    ]


def consume_stats(stats: Any) -> str:
    """HTML for a ``ConsumeStats`` snapshot: one row of counters."""
    return counters("ConsumeStats", _stats_items(stats))


def consume_handle(state: str, stats: Any, error: BaseException | None) -> str:
    """HTML for a consume handle: a state badge (running/draining/stopped/error), counters, the error."""
    colour = _STATE_COLOURS.get(state, "#555")
    badge = (f' <span class="jetstream-sync-state" style="color:{colour};font-weight:bold">'
             f"{html.escape(state)}</span>")
    footer = ""
    if error is not None:
        text = f"{type(error).__name__}: {error}"
        footer = f'<div style="color:{_STATE_COLOURS["error"]}">{html.escape(text)}</div>'
    return counters("ConsumeHandle", _stats_items(stats), extra=badge, footer=footer)
