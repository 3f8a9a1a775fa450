# ``jetstream-sync request SUBJECT [DATA]``: one core NATS request, printing the reply (the
# walkthrough's `nats-req`). On a subject a stream captures, the reply is the stream's PubAck.
from __future__ import annotations

import argparse
import secrets
import time
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
    p.add_argument("subject", metavar="SUBJECT", type=subject)
    p.add_argument("data", metavar="DATA", nargs="?", default="", help="the payload (default empty)")
    p.add_argument("-H", "--header", type=header, action="append", default=[], metavar="KEY:VALUE",
                   help="a header; repeat for more")
    p.set_defaults(handler=cmd_request)


def cmd_request(args: argparse.Namespace, session: Session, out: Output) -> int:
    """Print the reply (``--json``: subject, headers, data); no responders is an error (exit 1).

    The reply comes to an inbox of this request's own: a message a consumer delivers keeps its stream
    subject, so a shared reply subscription (nats-py's request) could not match it to the request."""
    headers: dict[str, list[str]] = {}
    for key, value in args.header:
        headers.setdefault(key, []).append(value)
    client = session.client()
    inbox = f"_INBOX.{secrets.token_hex(11)}"
    deadline = time.monotonic() + session.timeout
    with client.subscribe(inbox) as replies:
        client.publish(args.subject, args.data.encode(), reply=inbox, headers=headers or None)
        while True:
            # The server's "no responders" arrives as a status, which the stream reports as a warning.
            if any(isinstance(w, jss.NoRespondersError) for w in replies.warnings):
                raise CommandError(f"no responders on {args.subject!r}: nothing is subscribed to it")
            try:
                reply = replies.next(timeout=min(0.05, max(0.0, deadline - time.monotonic())))
                break
            except jss.TimeoutError:
                if time.monotonic() >= deadline:
                    raise CommandError(f"no reply from {args.subject!r} within "
                                       f"{fmt_duration(session.timeout)}") from None
    # A reply to the inbox shows the subject asked; a message a consumer delivered, its own.
    shown = args.subject if reply.subject == inbox else reply.subject
    if out.json:
        out.emit(message_dict(subject=shown, data=reply.data, headers=reply.headers))
    else:
        print_message(out, "reply", shown, reply.headers, reply.data)
    return 0
