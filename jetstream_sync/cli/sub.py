# ``jetstream-sync sub SUBJECT``: a core NATS subscription that prints what arrives, as `nats-sub`
# does ("[#1] Received on [ORDERS.processed]: 'order 1'"). On a push consumer's deliver subject the
# subject shown is the message's own (the stream subject it was stored under).
# Rule: each line is flushed as it is printed (also into a pipe); Ctrl-C ends it (exit 130).
from __future__ import annotations

import argparse
import time
from typing import Any


from ._args import int_at_least, subject
from ._output import Output, message_dict, payload_text
from ._session import Session

__all__ = ["register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``sub`` command to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser("sub", parents=[common], help="print messages published to a subject",
                       description="Subscribe to SUBJECT (core NATS; wildcards allowed) and print each message "
                                   "as it arrives: [#n] Received on [subject]: 'data'. Runs until --count "
                                   "messages or Ctrl-C.")
    p.add_argument("subject", metavar="SUBJECT", type=subject, help="the subject to subscribe to (wildcards allowed)")
    p.add_argument("--queue", metavar="GROUP", help="join this queue group (each message goes to one member)")
    p.add_argument("--count", type=int_at_least(1), default=None, metavar="N", help="stop after N messages")
    p.add_argument("-t", "--timestamp", action="store_true", help="begin each line with the local time it arrived")
    p.set_defaults(handler=cmd_sub)


def cmd_sub(args: argparse.Namespace, session: Session, out: Output) -> int:
    """Print ``[#n] Received on [subject]: 'data'`` per message (``--json``: one object per line)."""
    n = 0
    with session.client().subscribe(args.subject, queue=args.queue) as msgs:
        for msg in msgs:
            n += 1
            if out.json:
                out.json_line(message_dict(n=n, subject=msg.subject, data=msg.data, headers=msg.headers,
                                           reply=msg.reply or None))
            else:
                when = time.strftime("%Y/%m/%d %H:%M:%S ") if args.timestamp else ""
                out.line(f"{when}[#{n}] Received on [{msg.subject}]: {payload_text(msg.data)!r}")
                out.stream.flush()
            if args.count is not None and n >= args.count:
                break
    return 0


