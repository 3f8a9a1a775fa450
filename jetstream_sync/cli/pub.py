# ``jetstream-sync pub SUBJECT [DATA]``: publish to a stream and wait for every PubAck.
# One message goes through js.publish(); --count N keeps up to the context's window of
# publish_async() in flight and counts acks (in order) into the progress bar on stderr.
from __future__ import annotations

import argparse
import collections
import sys
import time
from typing import Any

import jetstream_sync as jss

from ._args import UsageError, header, int_at_least
from ._errors import CommandError, exit_code, one_line
from ._output import Output, fmt_int, progress_bar
from ._session import Session

__all__ = ["register", "render"]

PLACEHOLDER = "{count}"


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``pub`` command to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser(
        "pub", parents=[common], help="publish messages to a stream",
        description="Publish DATA to SUBJECT and wait for the stream's acknowledgement. In DATA, --msg-id and "
                    "header values, {count} is replaced by the message number (1..N), so --count 100 "
                    "--msg-id 'order-{count}' gives 100 distinct ids.")
    p.add_argument("subject", metavar="SUBJECT", help="the subject to publish to (a stream must capture it)")
    p.add_argument("data", metavar="DATA", nargs="?", default=None, help="payload (default: empty)")
    p.add_argument("--stdin", action="store_true", help="read the payload from stdin instead of DATA")
    p.add_argument("--count", type=int_at_least(1), default=1, metavar="N", help="messages to publish (default 1)")
    p.add_argument("--msg-id", metavar="ID", help="Nats-Msg-Id, for deduplication; {count} is the message number")
    p.add_argument("-H", "--header", type=header, action="append", default=[], metavar="KEY:VALUE",
                   help="a header; repeat for more (a repeated KEY gets several values)")
    p.add_argument("--expect-stream", metavar="STREAM", help="fail unless the subject is stored by this stream")
    p.add_argument("--expect-last-seq", type=int_at_least(0), metavar="SEQ",
                   help="fail unless the stream's last sequence is SEQ")
    p.add_argument("--expect-last-subject-seq", type=int_at_least(0), metavar="SEQ",
                   help="fail unless the last sequence on SUBJECT is SEQ")
    p.add_argument("--expect-last-msg-id", metavar="ID", help="fail unless the stream's last Nats-Msg-Id is ID")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.set_defaults(handler=cmd_pub)


def render(template: str | None, n: int) -> str | None:
    """``template`` with every ``{count}`` replaced by ``n`` (other braces are left alone)."""
    return None if template is None else template.replace(PLACEHOLDER, str(n))


def _payload(args: argparse.Namespace) -> bytes | str:
    if args.stdin:
        if args.data is not None:
            raise UsageError("pub: give DATA or --stdin, not both")
        return sys.stdin.buffer.read()
    return args.data or ""


def _message(args: argparse.Namespace, payload: bytes | str, n: int) -> tuple[Any, dict[str, Any]]:
    data = render(payload, n) if isinstance(payload, str) else payload
    headers: dict[str, list[str]] = {}
    for key, value in args.header:
        headers.setdefault(key, []).append(render(value, n))  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {
        "headers": headers or None,
        "msg_id": render(args.msg_id, n),
        "expected_stream": args.expect_stream,
        "expected_last_seq": args.expect_last_seq,
        "expected_last_subject_seq": args.expect_last_subject_seq,
        "expected_last_msg_id": args.expect_last_msg_id,
    }
    return data, kwargs


def cmd_pub(args: argparse.Namespace, session: Session, out: Output) -> int:
    """Publish ``--count`` messages; print a summary (or one JSON object). Exit 1 if any failed."""
    payload = _payload(args)
    js = session.js()
    started = time.perf_counter()
    acks: list[jss.PubAck] = []
    failure: tuple[int, BaseException] | None = None
    if args.count == 1:
        data, kwargs = _message(args, payload, 1)
        acks.append(js.publish(args.subject, data, **kwargs))
    else:
        pending: collections.deque = collections.deque()

        def harvest(block: bool) -> None:
            nonlocal failure
            while pending and (block or pending[0][1].done()):
                n, fut = pending.popleft()
                try:
                    acks.append(fut.result())
                except jss.JetStreamError as exc:
                    if failure is None:
                        failure = (n, exc)
                bar.update(1)

        with progress_bar(args.count, args.progress, desc=args.subject) as bar:
            n = 0
            try:
                for n in range(1, args.count + 1):
                    data, kwargs = _message(args, payload, n)
                    pending.append((n, js.publish_async(args.subject, data, **kwargs)))
                    harvest(block=False)
                    if failure is not None:
                        break
                js.publish_async_complete()
            except KeyboardInterrupt:
                harvest(block=False)
                # Message n may have been sent even if publish_async did not return.
                in_doubt = n - len(acks) - (failure is not None)
                unknown = f"; up to {in_doubt:,} more may have been stored" if in_doubt > 0 else ""
                hint = "; rerun with the same --msg-id to store the rest exactly once" if args.msg_id else ""
                raise CommandError(f"interrupted: {len(acks):,} of {args.count:,} messages acknowledged"
                                   f"{unknown}{hint}", 130) from None
            harvest(block=True)
    elapsed = time.perf_counter() - started
    if failure is not None:
        n, exc = failure
        raise CommandError(f"message {n} of {args.count} failed: {one_line(exc)} ({len(acks)} stored)",
                           exit_code(exc))
    _report(args, out, acks, elapsed)
    return 0


def _report(args: argparse.Namespace, out: Output, acks: list[jss.PubAck], elapsed: float) -> None:
    stored = [a for a in acks if not a.duplicate]
    duplicates = len(acks) - len(stored)
    seqs = [a.seq for a in acks]
    last = acks[-1]
    if out.json:
        out.emit({"subject": args.subject, "stream": last.stream, "count": len(acks), "duplicates": duplicates,
                  "first_seq": min(seqs), "last_seq": max(seqs), "seconds": round(elapsed, 6),
                  "domain": last.domain})
        return
    dup = f", {duplicates:,} duplicate{'s' * (duplicates != 1)}" if duplicates else ""
    if len(acks) == 1:
        out.line(f"published 1 message to {args.subject}: stream {last.stream} seq {last.seq}"
                 f"{' (duplicate)' if last.duplicate else ''}")
        return
    rate = len(acks) / elapsed if elapsed > 0 else float("inf")
    out.line(f"published {fmt_int(len(acks))} messages to {args.subject} in {elapsed:.2f} s "
             f"({rate:,.0f} msgs/s), last seq {max(seqs)}{dup}")
