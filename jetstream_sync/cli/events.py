# ``jetstream-sync events`` and ``consumer events STREAM CONSUMER``: JetStream advisories and ack
# samples as they arrive, as readable blocks ("Acknowledgement Sample", "Stream Sequence: 40",
# "Deliveries", "Delay") or, with --json, one JSON object per line with the server's field names.
# Rule: every event is flushed as it is printed (also into a pipe); Ctrl-C ends it (exit 130).
from __future__ import annotations

import argparse
from typing import Any

import jetstream_sync as jss

from ._args import int_at_least
from ._output import Output, fmt_duration, fmt_time
from ._session import Session

__all__ = ["describe", "register", "run_events"]

#: The title each event class (by name: the classes load with the first event) prints under (the
#: JetStream model's wording where it has one).
TITLES = {
    "ConsumerAckMetric": "Acknowledgement Sample",
    "MaxDeliveriesExceeded": "Delivery Exceeded",
    "MessageTerminated": "Message Terminated",
    "MessageNaked": "Message NAKed",
    "ConsumerAction": "Consumer Action",
    "StreamAction": "Stream Action",
    "LeaderElected": "Leader Elected",
    "ApiAudit": "API Access",
}


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the top-level ``events`` command."""
    p = sub.add_parser("events", parents=[common], help="print JetStream advisories and ack samples",
                       description="Subscribe to $JS.EVENT.<FILTER> and print each advisory or ack sample as it "
                                   "arrives (--json: one object per line). Runs until --count events or Ctrl-C.")
    p.add_argument("--filter", default=">", metavar="FILTER",
                   help="the subject after $JS.EVENT. (default '>': all; e.g. 'ADVISORY.CONSUMER.>', 'METRIC.>')")
    p.add_argument("--count", type=int_at_least(1), default=None, metavar="N", help="stop after N events")
    p.set_defaults(handler=cmd_events)


def describe(event: jss.Event) -> list[str]:
    """An event as readable lines: a title line, then ``Key: value`` lines."""
    title = TITLES.get(type(event).__name__, event.type or "Unknown event")
    lines = [f"[{fmt_time(event.timestamp)}] [{event.id or '-'}] {title}"]
    stream, consumer = getattr(event, "stream", None), getattr(event, "consumer", None)
    if consumer:
        lines.append(f"  Consumer: {stream} > {consumer}")
    elif stream:
        lines.append(f"  Stream: {stream}")
    if isinstance(event, jss.UnknownEvent):
        lines.append(f"  Raw: {event.raw}")
        return lines
    labels = {"stream_seq": "Stream Sequence", "consumer_seq": "Consumer Sequence", "deliveries": "Deliveries",
              "reason": "Reason", "action": "Action", "leader": "Leader", "subject": "Subject"}
    for field, label in labels.items():
        value = getattr(event, field, None)
        if value not in (None, ""):
            lines.append(f"  {label}: {value}")
    if isinstance(event, jss.ConsumerAckMetric) and event.ack_time is not None:
        lines.append(f"  Delay: {fmt_duration(event.ack_time)}")
    if isinstance(event, jss.LeaderElected) and event.replicas:
        lines.append(f"  Replicas: {', '.join(event.replicas)}")
    return lines


def run_events(events: jss.EventStream, out: Output, count: int | None) -> int:
    """Print events until ``count`` of them (or Ctrl-C, which the command line turns into exit 130)."""
    n = 0
    with events:
        for event in events:
            n += 1
            if out.json:
                out.json_line(dict(event.raw))
            else:
                for line in describe(event):
                    out.line(line)
                out.line()
                out.stream.flush()
            if count is not None and n >= count:
                break
    return 0


def cmd_events(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``events [--filter F] [--count N]``."""
    return run_events(session.js().events(args.filter), out, args.count)
