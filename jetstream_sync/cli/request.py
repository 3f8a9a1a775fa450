# ``jetstream-sync request SUBJECT [DATA]``: one core NATS request, printing the reply (the
# walkthrough's `nats-req`). On a subject a stream captures, the reply is the stream's PubAck.
from __future__ import annotations

import argparse
from typing import Any

import jetstream_sync as jss

from ._args import header, subject
from ._errors import CommandError
from ._output import Output, message_dict, print_message
from ._session import Session

__all__ = ["register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``request`` command to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser("request", aliases=["req"], parents=[common], help="send a core request, print the reply",
                       description="Send DATA to SUBJECT as a core NATS request and print the one reply (on a "
                                   "subject a stream captures: its publish acknowledgement). Waits --timeout.")
    p.add_argument("subject", metavar="SUBJECT", type=subject)
    p.add_argument("data", metavar="DATA", nargs="?", default="", help="the payload (default empty)")
    p.add_argument("-H", "--header", type=header, action="append", default=[], metavar="KEY:VALUE",
                   help="a header; repeat for more")
    p.set_defaults(handler=cmd_request)


def cmd_request(args: argparse.Namespace, session: Session, out: Output) -> int:
    """Print the reply (``--json``: subject, headers, data); no responders is an error (exit 1)."""
    headers: dict[str, list[str]] = {}
    for key, value in args.header:
        headers.setdefault(key, []).append(value)
    try:
        reply = session.client().request(args.subject, args.data.encode(), headers=headers or None,
                                         timeout=session.timeout)
    except jss.NoRespondersError:
        raise CommandError(f"no responders on {args.subject!r}: nothing is subscribed to it") from None
    if out.json:
        out.emit(message_dict(subject=args.subject, data=reply.data, headers=reply.headers))
    else:
        print_message(out, "reply", args.subject, reply.headers, reply.data)
    return 0
