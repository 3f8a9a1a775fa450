# ``jetstream-sync consumer add|ls|info|next|sub|events|pause|resume|rm``: consumer management and
# pulling messages. Config flags write to dest "cfg.<field>" (default SUPPRESS), as in stream.py;
# `next` pulls with one fetch and acks what it printed, unless --no-ack.
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import jetstream_sync as jss

from ._args import (
    CFG,
    UsageError,
    config_fields,
    config_flag,
    deliver_start,
    filters,
    percent,
    read_json_config,
    duration,
    evolve,
    duration_list,
    file_path,
    int_at_least,
    key_value,
    limit,
    opt,
    size,
    subject,
    time_ago,
    time_ahead,
)
from ._errors import CommandError, NotFound
from ._prompt import ask, can_ask, checked, choice, confirm_or_force, force_flag, nonempty
from ._output import (
    Output,
    fmt_age,
    fmt_bool,
    fmt_duration,
    fmt_int,
    fmt_limit,
    fmt_time,
    message_dict,
    print_message,
)
from ._session import Session
from .events import run_events

__all__ = ["register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``consumer`` command and its subcommands to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser("consumer", aliases=["con"], parents=[common],
                       help="manage consumers and pull messages",
                       description="Create, inspect and delete consumers; pull messages with `next`.")
    cmds = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    _register_add_ls_info(cmds, common)
    _register_next_sub_events_rm(cmds, common)


def _register_add_ls_info(cmds: Any, common: argparse.ArgumentParser) -> None:
    add = cmds.add_parser("add", parents=[common], help="create a consumer",
                          description="Create a consumer: a pull consumer, or with --target a push consumer "
                                      "delivering to that subject. NAME makes it durable; with --ephemeral the "
                                      "server removes it after --inactive-threshold. On a terminal, a missing "
                                      "STREAM or NAME asks the settings not given as flags.")
    add.add_argument("stream", metavar="STREAM", nargs="?", help="the stream (asked on a terminal when missing)")
    add.add_argument("consumer", metavar="NAME", nargs="?", help="durable name (may come from --config)")
    add.add_argument("--ephemeral", action="store_true", help="an ephemeral consumer (NAME, if given, names it)")
    add.add_argument("--pull", action="store_true", help="a pull consumer (the default without --target)")
    add.add_argument("--config", metavar="FILE", type=file_path,
                     help="JSON consumer config as the server takes it (durations in ns); flags override it")
    _config_flags(add)
    add.set_defaults(handler=cmd_add)

    ls = cmds.add_parser("ls", parents=[common], help="list a stream's consumers")
    ls.add_argument("stream", metavar="STREAM", help="the stream whose consumers to list")
    ls.add_argument("--names", action="store_true", help="names only")
    ls.set_defaults(handler=cmd_ls)

    info = cmds.add_parser("info", parents=[common], help="show a consumer's config and progress")
    info.add_argument("stream", metavar="STREAM", help="the stream the consumer reads")
    info.add_argument("consumer", metavar="NAME", help="the consumer's name")
    info.set_defaults(handler=cmd_info)

    # --timeout is the request timeout here too (lookups, acks); how long the pull waits is --wait.


def _register_next_sub_events_rm(cmds: Any, common: argparse.ArgumentParser) -> None:
    nxt = cmds.add_parser("next", parents=[common], help="pull messages",
                          description="Pull up to --count messages with one request, print them and ack "
                                      "them (unless --no-ack). Exit 3 when none arrives within --wait.")
    nxt.add_argument("stream", metavar="STREAM", help="the stream the consumer reads")
    nxt.add_argument("consumer", metavar="NAME", help="the consumer's name")
    nxt.add_argument("--count", type=int_at_least(1), default=1, metavar="N", help="messages to pull (default 1)")
    nxt.add_argument("--ack", action=argparse.BooleanOptionalAction, default=True,
                     help="acknowledge each message printed (default: --ack)")
    nxt.add_argument("--wait", type=duration, default=None, metavar="DURATION",
                     help="how long the pull waits for messages (default: the request --timeout, 5s)")
    nxt.set_defaults(handler=cmd_next)

    sub_ = cmds.add_parser("sub", parents=[common], help="receive from a push consumer",
                           description="Subscribe to a push consumer's deliver subject (joining its deliver group "
                                       "when it has one), print each message as it arrives and ack it (unless "
                                       "--no-ack). Runs until --count messages or Ctrl-C.")
    sub_.add_argument("stream", metavar="STREAM", help="the stream the consumer reads")
    sub_.add_argument("consumer", metavar="NAME", help="the consumer's name")
    sub_.add_argument("--count", type=int_at_least(1), default=None, metavar="N", help="stop after N messages")
    sub_.add_argument("--ack", action=argparse.BooleanOptionalAction, default=True,
                      help="acknowledge each message printed (default: --ack)")
    sub_.set_defaults(handler=cmd_sub)

    ev = cmds.add_parser("events", parents=[common], help="print one consumer's advisories and ack samples",
                         description="Print the advisories and ack samples of one consumer as they arrive "
                                     "(--json: one object per line). Runs until --count events or Ctrl-C.")
    ev.add_argument("stream", metavar="STREAM", help="the stream the consumer reads")
    ev.add_argument("consumer", metavar="NAME", help="the consumer's name")
    ev.add_argument("--count", type=int_at_least(1), default=None, metavar="N", help="stop after N events")
    ev.set_defaults(handler=cmd_events)

    rm = cmds.add_parser("rm", parents=[common], help="delete a consumer",
                         description="Delete the consumer. Asks first on a terminal; -f deletes without asking "
                                     "(and is needed without a terminal).")
    rm.add_argument("stream", metavar="STREAM", help="the stream the consumer reads")
    rm.add_argument("consumer", metavar="NAME", help="the consumer's name")
    force_flag(rm)
    rm.set_defaults(handler=cmd_rm)

    pause = cmds.add_parser("pause", parents=[common], help="pause a consumer until a later time",
                            description="Pause the consumer: the server delivers nothing from it until UNTIL "
                                        "(or for --for), then goes on by itself (nats-server 2.11 or later). "
                                        "Asks first on a terminal; -f pauses without asking (and is needed "
                                        "without a terminal). On a terminal a missing UNTIL is asked for.")
    pause.add_argument("stream", metavar="STREAM", help="the stream the consumer reads")
    pause.add_argument("consumer", metavar="NAME", help="the consumer's name")
    pause.add_argument("until", metavar="UNTIL", nargs="?", type=pause_time,
                       help="an RFC 3339 time, '2024-05-01 12:00:00' (UTC) or a duration from now (e.g. 1h30m)")
    pause.add_argument("--for", dest="pause_for", type=duration, metavar="DURATION",
                       help="pause for this long from now (instead of UNTIL)")
    force_flag(pause)
    pause.set_defaults(handler=cmd_pause)

    resume = cmds.add_parser("resume", parents=[common], help="resume a paused consumer",
                             description="Resume a paused consumer now (nats-server 2.11 or later). Exits 1 when "
                                         "it is not paused. Asks first on a terminal; -f resumes without asking "
                                         "(and is needed without a terminal).")
    resume.add_argument("stream", metavar="STREAM", help="the stream the consumer reads")
    resume.add_argument("consumer", metavar="NAME", help="the consumer's name")
    force_flag(resume)
    resume.set_defaults(handler=cmd_resume)



def _config_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("consumer config (only the flags given are set)")
    config_flag(g, "--filter", field="filter_subjects", type=filters, action="extend", metavar="SUBJECT",
         help="only messages on these subjects; repeat or comma-separate; '' for all")
    config_flag(g, "--description", field="description", metavar="TEXT")
    config_flag(g, "--deliver", field="deliver", type=deliver_start, metavar="START",
         help="where to start: all (default), last, new, last-per-subject, a stream sequence (10), a duration "
              "ago (2m, 1h) or an RFC 3339 time")
    config_flag(g, "--start-seq", field="opt_start_seq", type=int_at_least(1), metavar="SEQ",
         help="start at this stream sequence")
    config_flag(g, "--start-time", field="opt_start_time", type=time_ago, metavar="TIME",
         help="start at this RFC 3339 time, or this long ago (e.g. 1h)")
    config_flag(g, "--ack", field="ack_policy", choices=["explicit", "all", "none"], help="ack policy (default explicit)")
    config_flag(g, "--ack-wait", field="ack_wait", type=duration, metavar="DURATION",
         help="redeliver when not acked within this (e.g. 30s)")
    config_flag(g, "--max-deliver", field="max_deliver", type=int_at_least(-1), metavar="N", help="-1 for unlimited")
    config_flag(g, "--max-ack-pending", field="max_ack_pending", type=limit, metavar="N", help="-1 for unlimited")
    config_flag(g, "--max-waiting", field="max_waiting", type=limit, metavar="N", help="max pull requests waiting")
    config_flag(g, "--replay", field="replay_policy", choices=["instant", "original"])
    config_flag(g, "--backoff", field="backoff", type=duration_list, action="extend", metavar="DURATIONS",
         help="redelivery delays, e.g. 1s,5s,30s")
    config_flag(g, "--inactive-threshold", field="inactive_threshold", type=duration, metavar="DURATION",
         help="remove the consumer after this long without activity")
    config_flag(g, "--max-batch", field="max_batch", type=limit, metavar="N", help="max messages one pull may ask for")
    config_flag(g, "--max-expires", field="max_expires", type=duration, metavar="DURATION",
         help="max expiry one pull may ask for")
    config_flag(g, "--max-pull-bytes", field="max_bytes", type=size, metavar="SIZE", help="max bytes one pull may ask for")
    config_flag(g, "--headers-only", field="headers_only", action="store_const", const=True,
         help="deliver headers only (with Nats-Msg-Size)")
    config_flag(g, "--replicas", field="num_replicas", type=int_at_least(0), metavar="N",
         help="replicas of the consumer state (0: as the stream)")
    config_flag(g, "--memory", field="mem_storage", action="store_const", const=True, help="keep the state in memory")
    config_flag(g, "--metadata", field="metadata", type=key_value, action="append", metavar="KEY=VALUE",
         help="user metadata; repeat for more")
    config_flag(g, "--sample", "--sample-freq", field="sample_freq", type=percent, metavar="PERCENT",
         help="sample this percentage of acks as events, e.g. 100 or 100%%")
    config_flag(g, "--target", field="deliver_subject", metavar="SUBJECT",
                help="deliver to SUBJECT: a push consumer (without it: a pull consumer)")
    config_flag(g, "--deliver-group", field="deliver_group", metavar="NAME",
                help="push: the queue group its subscribers share (no --flow-control or --heartbeat with it)")
    config_flag(g, "--flow-control", field="flow_control", action="store_const", const=True,
                help="push: let a slow subscriber pause delivery (needs --heartbeat)")
    config_flag(g, "--heartbeat", field="idle_heartbeat", type=duration, metavar="DURATION",
                help="push: idle heartbeat interval, e.g. 5s")
    config_flag(g, "--pause-until", field="pause_until", type=time_ahead, metavar="TIME",
         help="deliver nothing until this RFC 3339 time, or for this long (e.g. 10m)")


def pause_time(text: str) -> datetime:
    """UNTIL of ``consumer pause``: an RFC 3339 time, ``2024-05-01 12:00:00`` (UTC, as the nats CLI
    reads it) or a duration from now."""
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        pass
    try:
        return time_ahead(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"invalid time {text!r}: use RFC 3339 (2024-05-01T12:00:00Z), '2024-05-01 12:00:00' (UTC) or a "
            f"duration from now (e.g. 1h)") from None


def _consumer(js: jss.JetStream, stream: str, name: str) -> jss.Consumer:
    """A pull consumer's handle; a push consumer is a CommandError (exit 1) naming ``consumer sub``."""
    try:
        return _looked_up(lambda: js.consumer(stream, name), stream, name)
    except jss.ConsumerTypeError:
        raise CommandError(f"consumer {name!r} of stream {stream!r} is a push consumer: receive from it with "
                           f"`jetstream-sync consumer sub {stream} {name}`") from None


def consumer_info(js: jss.JetStream, stream: str, name: str) -> jss.ConsumerInfo:
    """Either kind's info; a missing stream or consumer is NotFound (exit 3)."""
    return _looked_up(lambda: js.consumer_info(stream, name), stream, name)


def _looked_up(lookup: Any, stream: str, name: str) -> Any:
    try:
        return lookup()
    except jss.StreamNotFoundError:
        raise NotFound(f"stream {stream!r} not found") from None
    except jss.ConsumerNotFoundError:
        raise NotFound(f"consumer {name!r} not found on stream {stream!r}") from None


def _from_file(path: str) -> jss.ConsumerConfig:
    doc = read_json_config(path)
    try:
        return jss.ConsumerConfig.from_response(doc)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--config: {exc}") from None


def build_config(args: argparse.Namespace) -> jss.ConsumerConfig:
    """The ConsumerConfig from --config, NAME and the config flags (flags win)."""
    fields = config_fields(args)
    fields.update(fields.pop("deliver", {}))
    subjects = fields.pop("filter_subjects", None)
    if subjects is not None:
        if len(subjects) <= 1:
            fields["filter_subject"], fields["filter_subjects"] = (subjects or [None])[0], None
        else:
            fields["filter_subject"], fields["filter_subjects"] = None, subjects
    if "opt_start_seq" in fields:
        fields.setdefault("deliver_policy", "by_start_sequence")
    if "opt_start_time" in fields:
        fields.setdefault("deliver_policy", "by_start_time")
    if args.consumer is not None:  # NAME wins over a name in --config
        durable = None if args.ephemeral else args.consumer
        fields.update(name=args.consumer if args.ephemeral else None, durable_name=durable)
    elif args.ephemeral:
        fields.update(durable_name=None)
    base = _from_file(args.config) if args.config else jss.ConsumerConfig()
    return evolve(base, **fields)


def check_push_flags(cfg: jss.ConsumerConfig) -> None:
    """The push-side rules, before anything is sent (the server would accept the first one)."""
    if cfg.deliver_group and (cfg.flow_control or cfg.idle_heartbeat):
        given = " and ".join(f for f, v in (("--flow-control", cfg.flow_control), ("--heartbeat", cfg.idle_heartbeat))
                             if v)
        raise UsageError(f"--deliver-group with {given}: the group's members would answer each other's flow "
                         f"control and heartbeats reach one random member; leave {given} out")
    if cfg.flow_control and not cfg.idle_heartbeat:
        raise UsageError("--flow-control needs --heartbeat (the server requires an idle heartbeat with it)")
    if not cfg.deliver_subject:
        for flag, value in (("--deliver-group", cfg.deliver_group), ("--flow-control", cfg.flow_control),
                            ("--heartbeat", cfg.idle_heartbeat)):
            if value:
                raise UsageError(f"{flag} is for push consumers: give --target SUBJECT too")


def _ask_missing(args: argparse.Namespace, js: jss.JetStream) -> None:
    """The walkthrough's questions (`jsm con add`) for what ``args`` lacks, answered into ``args``.

    Blocks on the terminal. Pull consumers are not asked for an ack or replay policy (explicit and
    instant are what pull consumers take)."""
    given = config_fields(args)
    if args.stream is None:
        names = sorted(js.stream_names())
        if not names:
            raise NotFound("no streams to add a consumer to: create one with `stream add`")
        sys.stderr.write(f"  streams: {', '.join(names)}\n")
        args.stream = ask("Select a Stream", names[0] if len(names) == 1 else "", choice(names))
    if args.consumer is None and not args.ephemeral:
        args.consumer = ask("Consumer name", parse=checked(nonempty, lambda n: jss.ConsumerConfig(durable_name=n)))
    if "deliver_subject" not in given and not args.pull:
        target = ask("Delivery target", parse=checked(lambda t: subject(t) if t else "",
                                                      lambda t: jss.ConsumerConfig(deliver_subject=t or None)))
        if target:
            setattr(args, CFG + "deliver_subject", target)
    push = bool(opt(args, CFG + "deliver_subject"))
    if not {"deliver", "opt_start_seq", "opt_start_time"} & given.keys():
        setattr(args, CFG + "deliver", ask("Start policy (all, last, 1h, msg sequence)", "all", deliver_start))
    if push and "ack_policy" not in given:
        setattr(args, CFG + "ack_policy", ask("Acknowledgement policy", "explicit", choice(["explicit", "all", "none"])))
    if push and "replay_policy" not in given:
        setattr(args, CFG + "replay_policy", ask("Replay policy", "instant", choice(["instant", "original"])))
    if "filter_subjects" not in given:
        setattr(args, CFG + "filter_subjects", ask("Filter Stream by subject (blank for all)", parse=checked(
            filters, lambda subjects: [jss.ConsumerConfig(filter_subject=s) for s in subjects])))
    if "max_deliver" not in given:
        setattr(args, CFG + "max_deliver", ask("Maximum Allowed Deliveries", "-1", checked(
            int_at_least(-1), lambda n: jss.ConsumerConfig(max_deliver=n))))


def cmd_add(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer add [STREAM] [NAME] [flags]``: create a consumer; prints its info.

    On a terminal, a missing STREAM or NAME asks the walkthrough's questions for every setting not
    given; without one, each is a usage error naming it."""
    named = args.consumer is not None or args.ephemeral or args.config
    if args.pull and opt(args, CFG + "deliver_subject"):
        raise UsageError("--pull with --target: a consumer with a delivery target is a push consumer; give one")
    if args.stream is not None:  # a bad STREAM or NAME is refused before any question (ValueError: exit 2)
        jss.StreamConfig(name=args.stream)
    if args.consumer is not None:
        jss.ConsumerConfig(name=args.consumer)
    if args.stream is None or not named:
        if not can_ask():
            missing = "STREAM" if args.stream is None else "NAME (or --ephemeral)"
            raise UsageError(f"consumer add: {missing} is required; there is no terminal to ask on")
        _ask_missing(args, session.js())
    cfg = build_config(args)
    check_push_flags(cfg)
    try:
        js = session.js()
        consumer = (js.create_push_consumer if cfg.deliver_subject else js.create_consumer)(args.stream, cfg)
    except jss.StreamNotFoundError:
        raise NotFound(f"stream {args.stream!r} not found") from None
    if out.json:
        out.emit(consumer.cached_info.to_dict())
    else:
        out.line(f"created consumer {consumer.name} on stream {consumer.stream_name}")
        show_info(out, consumer.cached_info)
    return 0


def cmd_ls(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer ls STREAM [--names]``: a table of the stream's consumers (or a JSON list)."""
    js = session.js()
    try:
        if args.names:
            names = sorted(js.consumer_names(args.stream))
        else:
            infos = sorted(js.consumers(args.stream), key=lambda i: i.name)
    except jss.StreamNotFoundError:
        raise NotFound(f"stream {args.stream!r} not found") from None
    if args.names:
        if out.json:
            out.emit(names)
        else:
            for name in names:
                out.line(name)
        return 0
    if out.json:
        out.emit([i.to_dict() for i in infos])
        return 0
    if not infos:
        out.line(f"no consumers on stream {args.stream}")
        return 0
    out.table(
        ["NAME", "FILTER", "ACK", "DELIVERED", "ACK FLOOR", "PENDING", "ACK PENDING", "REDELIVERED", "LAST DELIVERY"],
        [[i.name, _filters(i.config) or "-", str(i.config.ack_policy), fmt_int(i.delivered.stream_seq),
          fmt_int(i.ack_floor.stream_seq), fmt_int(i.num_pending), fmt_int(i.num_ack_pending),
          fmt_int(i.num_redelivered), fmt_age(i.delivered.last_active) or "-"] for i in infos])
    return 0


def _filters(c: jss.ConsumerConfig) -> str:
    return ", ".join(c.filter_subjects or ([c.filter_subject] if c.filter_subject else []))


def show_info(out: Output, info: jss.ConsumerInfo) -> None:
    """Print a consumer's info as key/value blocks."""
    c = info.config
    start = None
    if c.opt_start_seq:
        start = f"sequence {c.opt_start_seq}"
    elif c.opt_start_time:
        start = fmt_time(c.opt_start_time)
    out.block(None, [("Consumer", info.name), ("Stream", info.stream_name), ("Created", fmt_time(info.created)),
                     ("Durable", fmt_bool(bool(c.durable_name))), ("Description", c.description)])
    out.line()
    push = [("Delivery Subject", c.deliver_subject), ("Deliver Group", c.deliver_group),
            ("Flow Control", "true" if c.flow_control else None),
            ("Idle Heartbeat", fmt_duration(c.idle_heartbeat) if c.idle_heartbeat else None)]
    out.block("Configuration:", [
        *(push if c.deliver_subject else [("Pull Mode", "true")]),
        ("Filter", _filters(c) or None),
        ("Deliver policy", str(c.deliver_policy)),
        ("Start", start),
        ("Ack policy", str(c.ack_policy)),
        ("Ack wait", fmt_duration(c.ack_wait) if c.ack_policy is not jss.AckPolicy.NONE else None),
        ("Max deliver", fmt_limit(c.max_deliver)),
        ("Backoff", ", ".join(fmt_duration(b) for b in c.backoff) if c.backoff else None),
        ("Max ack pending", fmt_limit(c.max_ack_pending)),
        ("Max waiting", fmt_limit(c.max_waiting)),
        ("Replay policy", str(c.replay_policy)),
        ("Inactive threshold", fmt_duration(c.inactive_threshold) if c.inactive_threshold else None),
        ("Max batch", fmt_limit(c.max_batch) if c.max_batch else None),
        ("Max expires", fmt_duration(c.max_expires) if c.max_expires else None),
        ("Max pull bytes", fmt_limit(c.max_bytes, "bytes") if c.max_bytes else None),
        ("Headers only", "true" if c.headers_only else None),
        ("Sampling Rate", c.sample_freq.rstrip("%") if c.sample_freq else None),
        ("Replicas", c.num_replicas or None),
        ("Memory storage", "true" if c.mem_storage else None),
        ("Paused until", fmt_time(c.pause_until) if c.pause_until else None),
        ("Metadata", ", ".join(f"{k}={v}" for k, v in sorted((c.metadata or {}).items())
                               if not k.startswith("_nats.")) or None),
    ])
    out.line()
    out.block("State:", [
        ("Last delivered", f"stream seq {fmt_int(info.delivered.stream_seq)}, "
                           f"consumer seq {fmt_int(info.delivered.consumer_seq)}"),
        ("Ack floor", f"stream seq {fmt_int(info.ack_floor.stream_seq)}, "
                      f"consumer seq {fmt_int(info.ack_floor.consumer_seq)}"),
        ("Pending", fmt_int(info.num_pending)),
        ("Ack pending", fmt_int(info.num_ack_pending)),
        ("Redelivered", fmt_int(info.num_redelivered)),
        ("Waiting pulls", fmt_int(info.num_waiting)),
        ("Paused", f"true, {fmt_duration(round(info.pause_remaining or 0))} remaining" if info.paused else None),
    ])


def cmd_info(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer info STREAM NAME``: config and progress (``--json``: the ConsumerInfo)."""
    info = consumer_info(session.js(), args.stream, args.consumer)
    if out.json:
        out.emit(info.to_dict())
    else:
        show_info(out, info)
    return 0


def _message_doc(msg: jss.Msg, acked: bool) -> dict[str, Any]:
    md = msg.metadata
    return message_dict(stream=md.stream, seq=md.sequence.stream, consumer=md.consumer,
                        consumer_seq=md.sequence.consumer, delivered=md.num_delivered, pending=md.num_pending,
                        time=md.timestamp, acked=acked, subject=msg.subject, data=msg.data, headers=msg.headers)


def _print(out: Output, msg: jss.Msg) -> None:
    """A consumer's message for people, flushed at once."""
    md = msg.metadata
    print_message(out, f"{md.stream} #{md.sequence.stream}", msg.subject, msg.headers, msg.data, md.timestamp,
                  extra=f"  delivered {md.num_delivered}x, {md.num_pending:,} pending")
    out.stream.flush()


def cmd_next(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer next STREAM NAME [--count N] [--no-ack] [--wait D]``: pull, print, ack.

    One pull request for ``--count`` messages that waits at most ``--wait`` (default: the request
    timeout, ``--timeout``). Each message is
    printed, then acked and "Acknowledged message" printed once the server confirmed the ack
    (``--json``: all acked after the document is written). Exit 0 when at least one message
    arrived, 3 (with an error line) when none did.
    """
    consumer = _consumer(session.js(), args.stream, args.consumer)
    can_ack = args.ack and consumer.cached_info.config.ack_policy is not jss.AckPolicy.NONE
    # A message is acked only once its output has been written and flushed: an interrupt, a closed
    # pipe or an error before that leaves it unacked (NAKed when we still hold it) for redelivery.
    held: list[jss.Msg] = []
    docs: list[dict[str, Any]] = []
    received = 0
    wait = session.timeout if args.wait is None else args.wait
    batch = consumer.fetch(max_messages=args.count, expires=wait)
    try:
        for msg in batch:
            received += 1
            held.append(msg)
            if out.json:
                docs.append(_message_doc(msg, can_ack))
                continue
            _print(out, msg)
            if can_ack:
                msg.double_ack(session.timeout)  # confirmed by the server before we say so
                out.line("Acknowledged message")
                out.stream.flush()
            held.clear()
        if received == 0:
            raise NotFound(f"no message from consumer {consumer.name!r} within {fmt_duration(wait)}")
        if out.json:
            out.emit(docs)
            out.stream.flush()
            if can_ack:
                for msg in held:
                    msg.ack()
            held.clear()
    except BaseException:
        batch.stop()                    # no pull left waiting to receive the redeliveries
        if can_ack and held:
            try:
                session.client().flush()    # the unsubscribe first, then the NAKs
                for msg in held:            # pulled but not shown: back to the server at once
                    msg.nak()
                session.client().flush()
            except Exception:           # the original error is what the user hears about
                pass
        raise
    if can_ack and out.json:
        session.client().flush()        # the acks have reached the server before we exit
    return 0


def cmd_sub(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer sub STREAM NAME [--count N] [--no-ack]``: receive from a push consumer, print, ack.

    Each message is printed (``--json``: one JSON object per line, flushed) and acked only once
    printed; heartbeats and flow-control requests are answered, never printed or counted. Runs
    until ``--count`` messages arrived or Ctrl-C (exit 130, what was not printed is NAKed).
    """
    js = session.js()
    info = consumer_info(js, args.stream, args.consumer)
    if not info.config.deliver_subject:
        raise CommandError(f"consumer {args.consumer!r} of stream {args.stream!r} is a pull consumer: pull from "
                           f"it with `jetstream-sync consumer next {args.stream} {args.consumer}`")
    can_ack = args.ack and info.config.ack_policy is not jss.AckPolicy.NONE
    received = 0
    with js.push_consumer(args.stream, args.consumer).messages() as msgs:
        for msg in msgs:
            received += 1
            if out.json:
                out.json_line(_message_doc(msg, can_ack))
            else:
                _print(out, msg)
            if can_ack:
                msg.ack()
            if args.count is not None and received >= args.count:
                break
    return 0


def cmd_events(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer events STREAM NAME [--count N]``: the events of one consumer, pull or push."""
    js = session.js()
    info = consumer_info(js, args.stream, args.consumer)
    handle = (js.push_consumer if info.config.deliver_subject else js.consumer)(args.stream, args.consumer)
    return run_events(handle.events(), out, args.count)


def cmd_pause(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer pause STREAM NAME [UNTIL | --for DURATION] [-f]``: pause the consumer (asks first on a
    terminal, and for UNTIL when neither is given); prints until when. A time not in the future is a
    usage error (exit 2), a server older than 2.11 exit 1."""
    if args.until is not None and args.pause_for is not None:
        raise UsageError("consumer pause: give UNTIL or --for, not both")
    until = args.until
    if args.pause_for is not None:
        until = datetime.now(timezone.utc) + timedelta(seconds=args.pause_for)
    if until is None:
        if not can_ask():
            raise UsageError("consumer pause: UNTIL (a time or a duration) or --for DURATION is required; there is "
                             "no terminal to ask on")
        until = ask("Pause until (time or duration)", "1h", pause_time)
    if not confirm_or_force(args, "consumer pause",
                            f"pause consumer {args.consumer} of stream {args.stream} until {fmt_time(until)}"):
        out.line(f"consumer {args.consumer} not paused")
        return 0
    resp = _looked_up(lambda: session.js().pause_consumer(args.stream, args.consumer, until), args.stream,
                      args.consumer)
    if out.json:
        out.emit({"stream": args.stream, "consumer": args.consumer, **resp.to_dict()})
    else:
        out.line(f"paused consumer {args.consumer} of stream {args.stream} until {fmt_time(resp.pause_until)} "
                 f"({fmt_duration(round(resp.pause_remaining or 0))} remaining)")
    return 0


def cmd_resume(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer resume STREAM NAME [-f]``: resume a paused consumer (asks first on a terminal). One
    lookup first: a consumer that is not paused exits 1 with nothing changed, as in the nats CLI."""
    js = session.js()
    info = consumer_info(js, args.stream, args.consumer)
    if not info.paused:
        raise CommandError(f"consumer {args.consumer!r} of stream {args.stream!r} is not paused")
    if not confirm_or_force(args, "consumer resume", f"resume consumer {args.consumer} of stream {args.stream}"):
        out.line(f"consumer {args.consumer} not resumed")
        return 0
    resp = _looked_up(lambda: js.resume_consumer(args.stream, args.consumer), args.stream, args.consumer)
    if out.json:
        out.emit({"stream": args.stream, "consumer": args.consumer, "paused": resp.paused})
    else:
        out.line(f"resumed consumer {args.consumer} of stream {args.stream} (it was paused until "
                 f"{fmt_time(info.config.pause_until)})")
    return 0


def cmd_rm(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``consumer rm STREAM NAME [-f]``: delete the consumer (asks first on a terminal)."""
    if not confirm_or_force(args, "consumer rm", f"delete consumer {args.consumer} of stream {args.stream}"):
        out.line(f"consumer {args.consumer} not deleted")
        return 0
    try:
        session.js().delete_consumer(args.stream, args.consumer)
    except jss.StreamNotFoundError:
        raise NotFound(f"stream {args.stream!r} not found") from None
    except jss.ConsumerNotFoundError:
        raise NotFound(f"consumer {args.consumer!r} not found on stream {args.stream!r}") from None
    if out.json:
        out.emit({"stream": args.stream, "consumer": args.consumer, "deleted": True})
    else:
        out.line(f"deleted consumer {args.consumer} from stream {args.stream}")
    return 0
