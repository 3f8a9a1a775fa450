# ``jetstream-sync stream add|ls|info|edit|cp|purge|rmm|get|export|rm``: stream management (``export``
# lives in its own module, ``export``).
# Every config flag writes to dest "cfg.<field>" with default SUPPRESS, so `edit` and `cp`
# change exactly the fields given and keep the rest of the server's config.
from __future__ import annotations

import argparse
import json
from typing import Any

import jetstream_sync as jss

from ._args import (
    UsageError,
    config_fields,
    config_flag,
    age,
    duration,
    evolve,
    file_path,
    int_at_least,
    key_value,
    limit,
    merge_nested,
    read_json_config,
    size,
    split_list,
)
from ._output import (
    Output,
    fmt_age,
    fmt_bool,
    fmt_duration,
    fmt_int,
    fmt_limit,
    fmt_size,
    fmt_time,
    message_dict,
    print_message,
)
from ._errors import CommandError, NotFound
from .export import register_export
from ._prompt import ask, can_ask, checked, choice, confirm_or_force, force_flag, nonempty
from ._session import Session

__all__ = ["register"]



def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``stream`` command and its subcommands to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser("stream", aliases=["str"], parents=[common], help="manage streams",
                       description="Create, inspect, change and delete streams; read and delete messages.")
    cmds = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    _register_add_ls_info(cmds, common)
    _register_edit_cp_purge(cmds, common)
    _register_rmm_get_rm(cmds, common)
    register_export(cmds, common)


def _register_add_ls_info(cmds: Any, common: argparse.ArgumentParser) -> None:
    add = cmds.add_parser("add", parents=[common], help="create a stream",
                          description="Create a stream from flags and/or a JSON config file. Creating a stream "
                                      "that exists with the same config succeeds; with another config it fails.")
    add.add_argument("stream", metavar="NAME", nargs="?", help="stream name (may come from --config)")
    add.add_argument("--config", metavar="FILE", type=file_path,
                     help="JSON stream config as the server takes it (durations in ns); flags override it")
    _config_flags(add)
    add.set_defaults(handler=cmd_add)

    ls = cmds.add_parser("ls", parents=[common], help="list streams")
    ls.add_argument("--subject", help="only streams capturing this subject")
    ls.add_argument("--names", action="store_true", help="names only")
    ls.set_defaults(handler=cmd_ls)

    info = cmds.add_parser("info", parents=[common], help="show a stream's config and state")
    info.add_argument("stream", metavar="NAME", help="the stream to show")
    info.set_defaults(handler=cmd_info)


def _register_edit_cp_purge(cmds: Any, common: argparse.ArgumentParser) -> None:
    edit = cmds.add_parser("edit", parents=[common], help="change a stream's config",
                           description="Change only the fields given; everything else is kept as the server has it. "
                                       "On a terminal, shows the changes (old -> new) and asks first; -f changes "
                                       "without asking (and is needed without a terminal).")
    edit.add_argument("stream", metavar="NAME", help="the stream to change")
    edit.add_argument("--config", metavar="FILE", type=file_path,
                      help="JSON with the fields to change (server spelling); flags override it")
    _config_flags(edit)
    force_flag(edit)
    edit.set_defaults(handler=cmd_edit)

    cp = cmds.add_parser("cp", parents=[common], help="copy a stream's config to a new stream",
                         description="Create DEST with SOURCE's config (not its messages); flags override fields. "
                                     "Give --subjects unless the copy should share no subjects with the source.")
    cp.add_argument("source", metavar="SOURCE", help="the stream whose config to copy")
    cp.add_argument("stream", metavar="DEST", help="the name of the new stream")
    _config_flags(cp)
    cp.set_defaults(handler=cmd_cp)

    purge = cmds.add_parser("purge", parents=[common], help="remove messages",
                            description="Remove every message, or those on --subject, below --seq, "
                                        "or all but the last --keep.")
    purge.add_argument("stream", metavar="NAME", help="the stream to purge")
    purge.add_argument("--subject", help="only messages on this subject (wildcards allowed)")
    which = purge.add_mutually_exclusive_group()
    which.add_argument("--seq", type=int_at_least(1), help="remove messages below this sequence")
    which.add_argument("--keep", type=int_at_least(0), help="keep this many of the newest messages")
    force_flag(purge)
    purge.set_defaults(handler=cmd_purge)


def _register_rmm_get_rm(cmds: Any, common: argparse.ArgumentParser) -> None:
    rmm = cmds.add_parser("rmm", parents=[common], help="delete one message")
    rmm.add_argument("stream", metavar="NAME", help="the stream holding the message")
    rmm.add_argument("seq", metavar="SEQ", type=int_at_least(1), help="the message's stream sequence")
    rmm.add_argument("--erase", action="store_true", help="overwrite it on disk too")
    force_flag(rmm)
    rmm.set_defaults(handler=cmd_rmm)

    get = cmds.add_parser("get", parents=[common], help="read one message, or many with --batch",
                          description="Read the message at SEQ, or the last one on --last-for SUBJECT. With "
                                      "--batch N, read up to N messages in stream order (from SEQ or --seq, else "
                                      "from the first; only those on --subject when given) in as few requests as "
                                      "the server allows; several --last-for (or --batch with --last-for) read the "
                                      "last message of each subject. Reading several needs a stream that allows "
                                      "direct gets and nats-server 2.11. With --json, one JSON document per line.")
    get.add_argument("stream", metavar="NAME", help="the stream holding the message")
    get.add_argument("seq", metavar="SEQ", nargs="?", type=int_at_least(1),
                     help="the message's stream sequence (or give --last-for); with --batch, the first to read")
    get.add_argument("--last-for", metavar="SUBJECT", action="extend", nargs="+",
                     help="the last message on this subject; several subjects (wildcards allowed) read the last "
                          "of each, in stream order")
    get.add_argument("--batch", metavar="N", type=int_at_least(1),
                     help="read up to N messages (with --last-for: at most N subjects' last messages)")
    get.add_argument("--seq", dest="from_seq", metavar="SEQ", type=int_at_least(1),
                     help="with --batch: start at this sequence (as SEQ does)")
    get.add_argument("--subject", metavar="SUBJECT", help="with --batch: only messages on this subject (wildcards "
                                                          "allowed)")
    get.set_defaults(handler=cmd_get)

    rm = cmds.add_parser("rm", parents=[common], help="delete a stream",
                         description="Delete the stream, its messages and its consumers. Asks first on a "
                                     "terminal; -f deletes without asking (and is needed without a terminal).")
    rm.add_argument("stream", metavar="NAME", help="the stream to delete")
    force_flag(rm)

    # The JetStream model's `str template add`: gone from nats-server; say so rather than "invalid choice".
    template = cmds.add_parser("template", parents=[common])
    template.add_argument("rest", nargs=argparse.REMAINDER, help="ignored: templates are gone")
    template.set_defaults(handler=cmd_template)
    rm.set_defaults(handler=cmd_rm)



def _config_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("stream config (only the flags given are set)")
    config_flag(g, "--subjects", field="subjects", type=split_list, action="extend", metavar="SUBJECT",
         help="subjects to store, wildcards allowed; repeat or comma-separate")
    config_flag(g, "--description", field="description", metavar="TEXT")
    config_flag(g, "--storage", field="storage", choices=["file", "memory"])
    config_flag(g, "--retention", field="retention", choices=["limits", "interest", "workqueue"])
    config_flag(g, "--replicas", field="num_replicas", type=int_at_least(1), metavar="N")
    config_flag(g, "--max-msgs", field="max_msgs", type=limit, metavar="N", help="-1 for unlimited")
    config_flag(g, "--max-bytes", field="max_bytes", type=size, metavar="SIZE", help="e.g. 1GiB; -1 for unlimited")
    config_flag(g, "--max-age", field="max_age", type=age, metavar="DURATION",
         help="e.g. 24h, 1y; -1 or 0 for unlimited")
    config_flag(g, "--max-msg-size", field="max_msg_size", type=size, metavar="SIZE", help="-1 for unlimited")
    config_flag(g, "--max-msgs-per-subject", field="max_msgs_per_subject", type=limit, metavar="N",
         help="-1 for unlimited")
    config_flag(g, "--max-consumers", field="max_consumers", type=limit, metavar="N", help="-1 for unlimited")
    config_flag(g, "--discard", field="discard", choices=["old", "new"], help="what a full stream discards")
    config_flag(g, "--discard-new-per-subject", field="discard_new_per_subject", action=argparse.BooleanOptionalAction,
         help="with --discard new: refuse new messages per subject")
    config_flag(g, "--dupe-window", "--duplicate-window", field="duplicate_window", type=duration, metavar="DURATION",
         help="how long Nats-Msg-Id duplicates are detected, e.g. 2m")
    config_flag(g, "--allow-rollup", field="allow_rollup_hdrs", action=argparse.BooleanOptionalAction,
         help="allow the Nats-Rollup header")
    config_flag(g, "--deny-delete", field="deny_delete", action=argparse.BooleanOptionalAction,
         help="forbid deleting messages")
    config_flag(g, "--deny-purge", field="deny_purge", action=argparse.BooleanOptionalAction, help="forbid purging")
    config_flag(g, "--allow-direct", field="allow_direct", action=argparse.BooleanOptionalAction,
         help="answer direct gets from any replica")
    config_flag(g, "--no-ack", field="no_ack", action="store_const", const=True, help="do not acknowledge publishes")
    config_flag(g, "--ack", field="no_ack", action="store_const", const=False, help="acknowledge publishes (default)")
    config_flag(g, "--compression", field="compression", choices=["none", "s2"], help="on-disk compression")
    config_flag(g, "--first-seq", field="first_seq", type=int_at_least(1), metavar="N", help="first sequence number")
    config_flag(g, "--allow-msg-ttl", field="allow_msg_ttl", action=argparse.BooleanOptionalAction,
         help="honour per-message TTLs (Nats-TTL header)")
    config_flag(g, "--subject-delete-marker-ttl", field="subject_delete_marker_ttl", type=duration, metavar="DURATION")
    config_flag(g, "--sealed", field="sealed", action="store_const", const=True,
         help="accept no more messages or deletes (cannot be undone)")
    config_flag(g, "--metadata", field="metadata", type=key_value, action="append", metavar="KEY=VALUE",
         help="user metadata; repeat for more")
    config_flag(g, "--mirror", field="mirror.name", metavar="STREAM", help="mirror this stream")
    config_flag(g, "--source", field="sources", type=split_list, action="extend", metavar="STREAM",
         help="source messages from these streams; repeat or comma-separate")
    config_flag(g, "--placement-cluster", field="placement.cluster", metavar="CLUSTER")
    config_flag(g, "--placement-tags", field="placement.tags", type=split_list, action="extend", metavar="TAG")
    config_flag(g, "--republish-source", field="republish.src", metavar="SUBJECT")
    config_flag(g, "--republish-destination", field="republish.dest", metavar="SUBJECT")
    config_flag(g, "--republish-headers-only", field="republish.headers_only", action="store_const", const=True)


def _given(args: argparse.Namespace) -> dict[str, Any]:
    fields = config_fields(args)
    if "sources" in fields:
        fields["sources"] = [{"name": n} for n in fields["sources"]]
    return fields


def _stream(js: jss.JetStream, name: str) -> jss.Stream:
    try:
        return js.stream(name)
    except jss.StreamNotFoundError:
        raise NotFound(f"stream {name!r} not found") from None


def _print_created(out: Output, verb: str, stream: jss.Stream) -> None:
    if out.json:
        out.emit(stream.cached_info.to_dict())
    else:
        out.line(f"{verb} stream {stream.name}")
        show_info(out, stream.cached_info)


def cmd_add(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream add NAME [--config FILE] [flags]``: create a stream; prints its info."""
    fields = _given(args)
    doc = read_json_config(args.config) if args.config else {}
    name = args.stream or doc.get("name")
    if not name:
        if not can_ask():
            raise UsageError("stream add: the stream NAME is required (as an argument or in --config)")
        name = ask("Stream name", parse=checked(nonempty, lambda n: jss.StreamConfig(name=n)))
    jss.StreamConfig(name=name)  # a bad NAME is refused before any question (ValueError: exit 2)
    if not any(fields.get(k) or doc.get(k) for k in ("subjects", "mirror", "sources")):
        if not can_ask():
            raise UsageError("stream add: --subjects is required (or --mirror, --source, --config); "
                             "there is no terminal to ask on")
        fields = _ask_missing(name, fields)
    if doc:
        try:
            base = jss.StreamConfig.from_response({**doc, "name": name})
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--config: {exc}") from None
        for key in ("mirror", "placement", "republish"):
            if isinstance(fields.get(key), dict):
                fields[key] = merge_nested(getattr(base, key), fields[key])
        cfg = evolve(base, **fields)
    else:
        cfg = jss.StreamConfig(name=name, **fields)
    stream = session.js().create_stream(cfg)
    _print_created(out, "created", stream)
    return 0


def _subjects(text: str) -> list[str]:
    return split_list(text.replace(" ", ","))


# The questions of the JetStream model's walkthrough (`jsm str add ORDERS`), in its order: (config
# field, question, default answer, parser of the answer). Only settings not given as flags are asked.
_QUESTIONS: list[tuple[str, str, str, Any]] = [
    ("subjects", "Subjects to consume", "", _subjects),
    ("storage", "Storage backend", "file", choice(["file", "memory"])),
    ("retention", "Retention Policy", "Limits", choice(["limits", "interest", "workqueue"])),
    ("max_msgs", "Message count limit", "-1", limit),
    ("max_bytes", "Message size limit", "-1", size),
    ("max_age", "Maximum message age limit", "-1", age),
    ("max_msg_size", "Maximum individual message size", "-1", size),
    ("num_replicas", "Number of replicas", "1", int_at_least(1)),
]


def _ask_missing(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The walkthrough's questions for the settings ``fields`` lacks (blocks on the terminal); each
    answer is checked as the config checks it, and asked again with the reason when it is wrong."""
    asked = dict(fields)
    for field, question, default, parse in _QUESTIONS:
        if field not in asked:
            check = (lambda f: lambda value: jss.StreamConfig(name=name, **{f: value}))(field)
            asked[field] = ask(question, default or (name if field == "subjects" else ""), checked(parse, check))
    return asked


#: Fields shown as durations in an edit's changes (the others as the server's JSON spells them).
_DURATION_FIELDS = {"max_age", "duplicate_window", "subject_delete_marker_ttl"}


def _changes(current: jss.StreamConfig, new: jss.StreamConfig) -> list[str]:
    """One ``  field: old -> new`` line per field ``new`` changes, with the server's field names."""
    before, after = current.to_dict(), new.to_dict()

    def shown(config: jss.StreamConfig, doc: dict[str, Any], key: str) -> str:
        if key not in doc:
            return "(unset)"
        if key in _DURATION_FIELDS:
            return fmt_duration(getattr(config, key), zero="unlimited")
        return json.dumps(doc[key], ensure_ascii=False)

    return [f"  {key}: {shown(current, before, key)} -> {shown(new, after, key)}"
            for key in sorted(before.keys() | after.keys()) if before.get(key) != after.get(key)]


def cmd_edit(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream edit NAME [flags] [-f]``: change only the given fields; prints the new info.

    On a terminal, the changes are shown and confirmed first (nothing to change: no question); ``-f``
    skips that, and without a terminal ``-f`` is required (UsageError before anything is sent)."""
    fields = _given(args)
    if args.config:
        file_fields = read_json_config(args.config)
        file_fields.pop("name", None)
    else:
        file_fields = {}
    if not fields and not file_fields:
        raise UsageError("stream edit: nothing to change: give at least one config flag or --config")
    if not args.force and not can_ask():
        confirm_or_force(args, "stream edit", f"edit stream {args.stream}")  # raises, naming -f
    js = session.js()
    current = _stream(js, args.stream).cached_info.config
    if file_fields:
        try:
            merged = jss.StreamConfig.from_response({**current.to_dict(), **file_fields})
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--config: {exc}") from None
    else:
        merged = current
    for key in ("mirror", "placement", "republish"):
        if isinstance(fields.get(key), dict):
            fields[key] = merge_nested(getattr(merged, key), fields[key])
    cfg = evolve(merged, **fields)
    changes = _changes(current, cfg)
    if changes and not confirm_or_force(args, "stream edit", f"edit stream {args.stream}",
                                        [f"Changes to stream {args.stream}:", *changes]):
        out.line(f"stream {args.stream} not edited")
        return 0
    try:
        stream = js.update_stream(cfg)
    except jss.StreamNotFoundError:
        raise NotFound(f"stream {args.stream!r} not found") from None
    _print_created(out, "updated", stream)
    return 0


def cmd_cp(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream cp SOURCE DEST [flags]``: create DEST with SOURCE's config; prints DEST's info."""
    js = session.js()
    source = _stream(js, args.source).cached_info.config
    fields = _given(args)
    for key in ("mirror", "placement", "republish"):
        if isinstance(fields.get(key), dict):
            fields[key] = merge_nested(getattr(source, key), fields[key])
    # The server's own metadata (_nats.*) describes the source, not the copy.
    metadata = {k: v for k, v in (source.metadata or {}).items() if not k.startswith("_nats.")}
    cfg = evolve(source, name=args.stream, metadata=metadata or None, sealed=None)
    cfg = evolve(cfg, **fields)
    stream = js.create_stream(cfg)
    _print_created(out, "created", stream)
    return 0


def cmd_ls(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream ls [--subject S] [--names]``: a table of streams (or a JSON list)."""
    js = session.js()
    if args.names:
        names = sorted(js.stream_names(args.subject))
        if out.json:
            out.emit(names)
        else:
            for name in names:
                out.line(name)
        return 0
    infos = sorted(js.streams(args.subject), key=lambda i: i.config.name)
    if out.json:
        out.emit([i.to_dict() for i in infos])
        return 0
    if not infos:
        out.line("no streams")
        return 0
    out.table(
        ["NAME", "SUBJECTS", "STORAGE", "REPLICAS", "MESSAGES", "BYTES", "CONSUMERS", "LAST MESSAGE"],
        [[i.config.name, ",".join(i.config.subjects or []) or "-", str(i.config.storage),
          i.config.num_replicas, fmt_int(i.state.messages), fmt_size(i.state.bytes),
          i.state.consumer_count, fmt_age(i.state.last_ts) or "-"] for i in infos])
    return 0


def show_info(out: Output, info: jss.StreamInfo) -> None:
    """Print a stream's info as key/value blocks."""
    c, s = info.config, info.state
    out.block(None, [("Stream", c.name), ("Created", fmt_time(info.created)),
                     ("Description", c.description), ("Domain", info.domain)])
    out.line()
    rows: list[tuple[str, Any]] = [
        ("Subjects", ", ".join(c.subjects or []) or None),
        ("Storage", str(c.storage)),
        ("Retention", str(c.retention)),
        ("Replicas", c.num_replicas),
        ("Discard", str(c.discard)),
        ("Max messages", fmt_limit(c.max_msgs)),
        ("Max bytes", fmt_limit(c.max_bytes, "bytes")),
        ("Max age", fmt_duration(c.max_age, zero="unlimited")),
        ("Max message size", fmt_limit(c.max_msg_size, "bytes")),
        ("Max msgs per subject", fmt_limit(c.max_msgs_per_subject)),
        ("Max consumers", fmt_limit(c.max_consumers)),
        ("Duplicate window", fmt_duration(c.duplicate_window)),
        ("Compression", str(c.compression) if c.compression else None),
        ("Allow rollup", fmt_bool(c.allow_rollup_hdrs)),
        ("Allow direct", fmt_bool(c.allow_direct)),
        ("Deny delete", fmt_bool(c.deny_delete)),
        ("Deny purge", fmt_bool(c.deny_purge)),
        ("No ack", fmt_bool(c.no_ack) if c.no_ack else None),
        ("Sealed", "true" if c.sealed else None),
        ("Allow msg TTL", "true" if c.allow_msg_ttl else None),
        ("Mirror", c.mirror.name if c.mirror else None),
        ("Sources", ", ".join(src.name for src in c.sources) if c.sources else None),
        ("Placement", _placement(c.placement)),
        ("Republish", f"{c.republish.src or '>'} -> {c.republish.dest}" if c.republish else None),
        ("Metadata", ", ".join(f"{k}={v}" for k, v in sorted((c.metadata or {}).items())
                               if not k.startswith("_nats.")) or None),
    ]
    out.block("Configuration:", rows)
    out.line()
    out.block("State:", [
        ("Messages", fmt_int(s.messages)),
        ("Bytes", fmt_size(s.bytes)),
        ("First sequence", _seq_at(s.first_seq, s.first_ts)),
        ("Last sequence", _seq_at(s.last_seq, s.last_ts)),
        ("Deleted messages", fmt_int(s.num_deleted or 0)),
        ("Subjects", fmt_int(s.num_subjects or 0)),
        ("Consumers", fmt_int(s.consumer_count or 0)),
    ])
    if info.cluster is not None and (info.cluster.replicas or info.cluster.name):
        out.line()
        out.block("Cluster:", [("Name", info.cluster.name), ("Leader", info.cluster.leader),
                               ("Replicas", ", ".join(r.name or "?" for r in info.cluster.replicas or []) or None)])


def _placement(p: Any) -> str | None:
    if p is None or (not p.cluster and not p.tags):
        return None
    return ", ".join(filter(None, [f"cluster {p.cluster}" if p.cluster else "",
                                   f"tags {','.join(p.tags)}" if p.tags else ""]))


def _seq_at(seq: int | None, ts: Any) -> str:
    return f"{fmt_int(seq or 0)} @ {fmt_time(ts)}" if ts else fmt_int(seq or 0)


def cmd_info(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream info NAME``: config and state (``--json``: the StreamInfo as the server sends it)."""
    info = _stream(session.js(), args.stream).cached_info
    if out.json:
        out.emit(info.to_dict())
    else:
        show_info(out, info)
    return 0


def cmd_purge(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream purge NAME [--subject S] [--seq N | --keep N]``: prints how many were removed."""
    what = f"purge stream {args.stream}" + (f" of the messages on {args.subject}" if args.subject else "")
    if not confirm_or_force(args, "stream purge", what):
        out.line(f"stream {args.stream} not purged")
        return 0
    stream = _stream(session.js(), args.stream)
    purged = stream.purge(subject=args.subject, sequence=args.seq, keep=args.keep)
    if out.json:
        out.emit({"stream": stream.name, "purged": purged})
    else:
        out.line(f"purged {purged:,} message{'s' * (purged != 1)} from stream {stream.name}")
    return 0


def cmd_rmm(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream rmm NAME SEQ [--erase] [-f]``: delete one message (asks first on a terminal)."""
    if not confirm_or_force(args, "stream rmm", f"delete message {args.seq} from stream {args.stream}"):
        out.line(f"message {args.seq} not deleted")
        return 0
    stream = _stream(session.js(), args.stream)
    try:
        stream.delete_msg(args.seq, erase=args.erase)
    except jss.MessageNotFoundError:
        raise NotFound(f"no message {args.seq} in stream {stream.name!r}") from None
    if out.json:
        out.emit({"stream": stream.name, "seq": args.seq, "deleted": True})
    else:
        out.line(f"deleted message {args.seq} from stream {stream.name}")
    return 0


def cmd_get(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream get NAME SEQ`` or ``stream get NAME --last-for SUBJECT``: print one message; with
    ``--batch N`` (or several ``--last-for``), print many, read with batch direct gets."""
    last_for = args.last_for or []
    if args.batch is not None or len(last_for) > 1:
        return _get_many(args, session, out, last_for)
    if args.from_seq is not None or args.subject is not None:
        raise UsageError("stream get: --seq and --subject go with --batch N")
    if (args.seq is None) == (not last_for):
        raise UsageError("stream get: give either SEQ or --last-for SUBJECT")
    stream = _stream(session.js(), args.stream)
    try:
        msg = stream.get_msg(args.seq) if args.seq is not None else stream.get_last_msg(last_for[0])
    except jss.MessageNotFoundError:
        where = f"at sequence {args.seq}" if args.seq is not None else f"on subject {last_for[0]!r}"
        raise NotFound(f"no message {where} in stream {stream.name!r}") from None
    if out.json:
        out.emit(message_dict(stream=stream.name, seq=msg.seq, time=msg.time, subject=msg.subject,
                              data=msg.data, headers=msg.headers))
    else:
        print_message(out, f"{stream.name} #{msg.seq}", msg.subject, msg.headers, msg.data, msg.time)
    return 0


def _get_many(args: argparse.Namespace, session: Session, out: Output, last_for: list[str]) -> int:
    """``stream get NAME --batch N [SEQ | --seq N] [--subject S]`` or ``--last-for S...``: print each
    message as it is read (JSON: one document per line)."""
    if args.seq is not None and args.from_seq is not None:
        raise UsageError("stream get: give the first sequence once, as SEQ or as --seq")
    start = args.seq if args.seq is not None else args.from_seq
    if last_for and (start is not None or args.subject is not None):
        raise UsageError("stream get: --last-for reads the last message of each subject; SEQ, --seq and "
                         "--subject go with --batch alone")
    stream = _stream(session.js(), args.stream)
    if not stream.cached_info.config.allow_direct:
        raise CommandError(f"stream {stream.name!r} does not allow direct gets, which reading several messages "
                           f"needs: allow them with `jetstream-sync stream edit {stream.name} --allow-direct -f`")
    if last_for:
        msgs = stream.get_last_for(last_for, batch=args.batch)
        where = f"on {', '.join(repr(s) for s in last_for)}"
    else:
        msgs = stream.get_batch(args.batch, seq=start, subject=args.subject)
        where = (f"from sequence {start}" if start is not None else "") + \
            (f" on subject {args.subject!r}" if args.subject is not None else "")
    count = 0
    for msg in msgs:
        count += 1
        if out.json:
            out.json_line(message_dict(stream=stream.name, seq=msg.seq, time=msg.time, subject=msg.subject,
                                       data=msg.data, headers=msg.headers))
        else:
            print_message(out, f"{stream.name} #{msg.seq}", msg.subject, msg.headers, msg.data, msg.time)
    if not count:
        raise NotFound(f"no messages {where.strip() + ' ' if where.strip() else ''}in stream {stream.name!r}")
    return 0


def cmd_template(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream template ...``: stream templates were removed from nats-server; exit 1 saying so."""
    raise CommandError("stream templates were removed from nats-server in 2.14: create "
                       "each stream with `stream add`, or one stream for all with --subjects 'CLIENT.*'")


def cmd_rm(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``stream rm NAME [-f]``: delete the stream (asks first on a terminal)."""
    if not confirm_or_force(args, "stream rm", f"delete stream {args.stream}"):
        out.line(f"stream {args.stream} not deleted")
        return 0
    try:
        session.js().delete_stream(args.stream)
    except jss.StreamNotFoundError:
        raise NotFound(f"stream {args.stream!r} not found") from None
    if out.json:
        out.emit({"stream": args.stream, "deleted": True})
    else:
        out.line(f"deleted stream {args.stream}")
    return 0
