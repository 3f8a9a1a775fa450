# ``jetstream-sync request SUBJECT [DATA]``: one core NATS request, printing the reply (the
# walkthrough's `nats-req`). On a subject a stream captures, the reply is the stream's PubAck.
from __future__ import annotations

import argparse
from typing import Any

import jetstream_sync as jss

from ._args import header, subject
from ._errors import CommandError
from ._output import Output, fmt_duration, message_dict, print_message
from ._session import Session

__all__ = ["register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``request`` command to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser("request", aliases=["req"], parents=[common], help="send a core request, print the reply",
                       description="Send DATA to SUBJECT as a core NATS request and print the one reply (on a "
                                   "subject a stream captures: its publish acknowledgement). Waits --timeout.")
    p.add_argument("subject", metavar="SUBJECT", type=subject, help="the subject to send the request to")
    p.add_argument("data", metavar="DATA", nargs="?", default="", help="the payload (default empty)")
    p.add_argument("-H", "--header", type=header, action="append", default=[], metavar="KEY:VALUE",
                   help="a header; repeat for more")
    p.set_defaults(handler=cmd_request)


def cmd_request(args: argparse.Namespace, session: Session, out: Output) -> int:
    """Print the reply (``--json``: subject, headers, data); no responders is an error at once (exit 1),
    no reply within ``--timeout`` too."""
    headers: dict[str, list[str]] = {}
    for key, value in args.header:
        headers.setdefault(key, []).append(value)
    try:
        reply = session.client().request(args.subject, args.data.encode(), headers=headers or None,
                                         timeout=session.timeout)
    except jss.NoRespondersError:
        raise CommandError(f"no responders on {args.subject!r}: nothing is subscribed to it") from None
    except jss.TimeoutError:
        raise CommandError(f"no reply from {args.subject!r} within {fmt_duration(session.timeout)}") from None
    # A plain reply shows the subject asked; a message a consumer delivered (a pull by hand), its own.
    shown = args.subject if reply.subject.startswith("_INBOX.") else reply.subject
    if out.json:
        out.emit(message_dict(subject=shown, data=reply.data, headers=reply.headers))
    else:
        print_message(out, "reply", shown, reply.headers, reply.data)
    return 0
