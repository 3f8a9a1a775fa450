# ``jetstream-sync kv``: the key-value store with the nats CLI's spellings. Buckets: add, info (status),
# ls, del/rm BUCKET; keys: put, get, create, update, del/rm BUCKET KEY, purge, history, keys, ls BUCKET,
# watch, revert, compact. A bucket is the stream KV_<bucket>, shared with every other client.
# Rule 1: bucket names and keys are checked while parsing (exit 2 naming them), before connecting.
# Rule 2: a missing bucket or key is exit 3 naming it; KeyExists and a revision mismatch are exit 1.
# Rule 3: `watch` prints each entry as it arrives, flushed (also into a pipe); Ctrl-C ends it (exit 130).
# The key checks live in jetstream_sync.kv, which loads the client: imported when a key is parsed.
from __future__ import annotations

import argparse
import base64
import functools
import sys
from typing import Any, Callable

import jetstream_sync as jss

from ._args import UsageError, age, duration, int_at_least, size
from ._errors import NotFound
from ._output import (
    Output,
    fmt_age,
    fmt_bool,
    fmt_duration,
    fmt_int,
    fmt_limit,
    fmt_size,
    fmt_time,
    payload_text,
    print_message,
)
from ._prompt import can_ask, confirm_or_force, force_flag
from ._session import Session

__all__ = ["register"]

#: The most values a bucket keeps per key (the server's limit for key-value buckets).
MAX_HISTORY = 64
#: How much of a value a table shows (as the nats CLI: the first and last 15 characters of a longer one).
SHOWN_VALUE = 40


# ---------------------------------------------------------------------------------------------
# Argument parsers (argparse prefixes "argument KEY: ")
# ---------------------------------------------------------------------------------------------


def _checked(check: Callable[[str], str], text: str) -> str:
    try:
        return check(text)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def bucket_name(text: str) -> str:
    """A bucket name: letters, digits, ``_`` and ``-``."""
    from .._codec import check_bucket  # late: only kv commands need it

    return _checked(check_bucket, text)


def key_name(text: str) -> str:
    """A key: letters, digits and ``-/_=.``; no leading or trailing ``.``, no ``..``."""
    from .._codec import check_key  # late: as bucket_name

    return _checked(check_key, text)


def key_filter(text: str) -> str:
    """A key or a filter of keys: ``*`` stands for one token, a trailing ``>`` for the rest."""
    from .._codec import check_key  # late: as bucket_name

    return _checked(lambda t: check_key(t, wildcards=True, name="key filter"), text)


def history(text: str) -> int:
    """``--history``: values kept per key, 1 to 64."""
    value = int_at_least(1)(text)
    if value > MAX_HISTORY:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: a bucket keeps 1 to {MAX_HISTORY} values per key")
    return value


def key_ttl(text: str) -> float | str:
    """A per-key TTL: a duration (at least 1s), or ``never``."""
    return "never" if text.strip().lower() == "never" else duration(text)


# ---------------------------------------------------------------------------------------------
# The command tree
# ---------------------------------------------------------------------------------------------


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``kv`` command and its subcommands to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser("kv", parents=[common], help="key-value buckets: put, get, watch keys",
                       description="Create, inspect and delete key-value buckets; put, get, update, delete and "
                                   "watch their keys. A bucket BUCKET is the stream KV_BUCKET, shared with every "
                                   "NATS client (the nats CLI, nats.go, nats-py).")
    cmds = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    _register_buckets(cmds, common)
    _register_writes(cmds, common)
    _register_reads(cmds, common)


def _bucket_arg(p: argparse.ArgumentParser, text: str = "the bucket") -> None:
    p.add_argument("bucket", metavar="BUCKET", type=bucket_name, help=text)


def _register_buckets(cmds: Any, common: argparse.ArgumentParser) -> None:
    add = cmds.add_parser("add", aliases=["new"], parents=[common], help="create a bucket",
                          description="Create a key-value bucket (the stream KV_BUCKET, made as the nats CLI makes "
                                      "it). Creating a bucket that exists with the same config succeeds; with "
                                      "another config it fails.")
    _bucket_arg(add, "the bucket's name: letters, digits, '_' and '-'")
    g = add.add_argument_group("bucket config")
    g.add_argument("--history", type=history, default=1, metavar="N", help="values kept per key, 1 to 64 (default 1)")
    g.add_argument("--ttl", type=age, default=None, metavar="DURATION",
                   help="how long a value lives, e.g. 24h (default: for ever)")
    g.add_argument("--max-value-size", type=size, default=None, metavar="SIZE", help="largest value, e.g. 1MiB")
    g.add_argument("--max-bucket-size", type=size, default=None, metavar="SIZE", help="largest bucket, e.g. 1GiB")
    g.add_argument("--storage", choices=["file", "memory"], default=None, help="storage backend (default file)")
    g.add_argument("--replicas", type=int_at_least(1), default=1, metavar="N", help="replicas, 1 to 5 (default 1)")
    g.add_argument("--compress", action="store_true", help="compress the bucket's data (s2)")
    g.add_argument("--description", metavar="TEXT", help="a description of the bucket")
    g.add_argument("--limit-marker-ttl", "--marker-ttl", type=duration, default=None, metavar="DURATION",
                   help="allow per-key TTLs (create --ttl, purge --ttl) and keep the markers of removed keys "
                        "this long (at least 1s)")
    add.set_defaults(handler=cmd_add)

    info = cmds.add_parser("info", aliases=["status"], parents=[common], help="show a bucket's config and state")
    _bucket_arg(info, "the bucket to show")
    info.set_defaults(handler=cmd_info)

    ls = cmds.add_parser("ls", aliases=["list"], parents=[common], help="list buckets, or the keys of a bucket",
                         description="Without BUCKET: a table of the account's buckets. With BUCKET: its keys.")
    ls.add_argument("bucket", metavar="BUCKET", nargs="?", type=bucket_name, help="list this bucket's keys")
    ls.add_argument("-n", "--names", action="store_true", help="bucket names only")
    ls.set_defaults(handler=cmd_ls)

    rm = cmds.add_parser("del", aliases=["rm"], parents=[common], help="delete a key, or a whole bucket",
                         description="With KEY: delete the key (a delete marker is its new revision; its history "
                                     "is kept). Without KEY: delete the bucket and every key in it. Asks first on "
                                     "a terminal; -f deletes without asking (and is needed without a terminal).")
    _bucket_arg(rm)
    rm.add_argument("key", metavar="KEY", nargs="?", type=key_name, help="the key to delete (default: the bucket)")
    force_flag(rm)
    rm.set_defaults(handler=cmd_del)

    compact = cmds.add_parser("compact", parents=[common], help="remove the history of deleted keys",
                              description="Remove the delete and purge markers older than --older-than, and every "
                                          "revision before them; a younger marker keeps only itself. Asks first on "
                                          "a terminal; -f compacts without asking (and is needed without one).")
    _bucket_arg(compact, "the bucket to compact")
    compact.add_argument("--older-than", type=duration, default=1800.0, metavar="DURATION",
                         help="only markers older than this (default 30m; 0: every marker)")
    force_flag(compact)
    compact.set_defaults(handler=cmd_compact)


def _value_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("value", metavar="VALUE", nargs="?", default=None,
                   help="the value (default: read from stdin, which must not be a terminal)")


def _register_writes(cmds: Any, common: argparse.ArgumentParser) -> None:
    put = cmds.add_parser("put", parents=[common], help="store a value",
                          description="Store VALUE (or stdin) as KEY's new value; prints its revision.")
    _bucket_arg(put)
    put.add_argument("key", metavar="KEY", type=key_name, help="the key")
    _value_arg(put)
    put.set_defaults(handler=cmd_put)

    create = cmds.add_parser("create", parents=[common], help="store a value only if the key has none",
                             description="Store VALUE only if KEY has no value (never written, deleted or purged); "
                                         "fails (exit 1) when it has one.")
    _bucket_arg(create)
    create.add_argument("key", metavar="KEY", type=key_name, help="the key")
    _value_arg(create)
    create.add_argument("--ttl", type=key_ttl, default=None, metavar="DURATION",
                        help="remove the key after this long (a bucket made with --limit-marker-ttl)")
    create.set_defaults(handler=cmd_create)

    update = cmds.add_parser("update", parents=[common], help="store a value only if the key is at a revision",
                             description="Store VALUE only if KEY's last revision is --last (compare and set); fails "
                                         "(exit 1) when another write came first.")
    _bucket_arg(update)
    update.add_argument("key", metavar="KEY", type=key_name, help="the key")
    _value_arg(update)
    update.add_argument("--last", type=int_at_least(0), required=True, metavar="REVISION",
                        help="the revision the key must be at (0: it never had a value)")
    update.set_defaults(handler=cmd_update)

    purge = cmds.add_parser("purge", parents=[common], help="remove a key and its history",
                            description="Replace every revision of KEY with one purge marker. Asks first on a "
                                        "terminal; -f purges without asking (and is needed without a terminal).")
    _bucket_arg(purge)
    purge.add_argument("key", metavar="KEY", type=key_name, help="the key to purge")
    purge.add_argument("--ttl", type=key_ttl, default=None, metavar="DURATION",
                       help="remove the purge marker itself after this long (a bucket made with --limit-marker-ttl)")
    force_flag(purge)
    purge.set_defaults(handler=cmd_purge)

    revert = cmds.add_parser("revert", parents=[common], help="store a previous revision's value again",
                             description="Store the value KEY had at REVISION as its new value, only if nobody "
                                         "wrote the key meanwhile. Asks first on a terminal; -f reverts without "
                                         "asking (and is needed without a terminal).")
    _bucket_arg(revert)
    revert.add_argument("key", metavar="KEY", type=key_name, help="the key")
    revert.add_argument("revision", metavar="REVISION", type=int_at_least(1), help="the revision to go back to")
    force_flag(revert)
    revert.set_defaults(handler=cmd_revert)


def _register_reads(cmds: Any, common: argparse.ArgumentParser) -> None:
    get = cmds.add_parser("get", parents=[common], help="read a key's value",
                          description="Print KEY's value (or its value at --revision). Exit 3 when it has none.")
    _bucket_arg(get)
    get.add_argument("key", metavar="KEY", type=key_name, help="the key")
    get.add_argument("--revision", type=int_at_least(1), default=None, metavar="N", help="the value at revision N")
    get.add_argument("--raw", action="store_true", help="print only the value, byte for byte")
    get.set_defaults(handler=cmd_get)

    hist = cmds.add_parser("history", parents=[common], help="every revision the bucket keeps of a key",
                           description="Every revision of KEY the bucket keeps, oldest first, delete and purge "
                                       "markers included.")
    _bucket_arg(hist)
    hist.add_argument("key", metavar="KEY", type=key_name, help="the key")
    hist.set_defaults(handler=cmd_history)

    keys = cmds.add_parser("keys", parents=[common], help="list the keys that have a value",
                           description="Print the keys that have a value, sorted, one per line; FILTERs are "
                                       "matched by the server ('*' a token, a trailing '>' the rest).")
    _bucket_arg(keys)
    keys.add_argument("filters", metavar="FILTER", nargs="*", type=key_filter, help="only keys matching these")
    keys.set_defaults(handler=cmd_keys)

    watch = cmds.add_parser("watch", parents=[common], help="print values, then each change as it is stored",
                            description="Print the current value of each key (of KEYs, filters allowed), then each "
                                        "change as it is stored: [time] PUT BUCKET > KEY #revision: value. Runs "
                                        "until --count entries or Ctrl-C.")
    _bucket_arg(watch)
    watch.add_argument("keys", metavar="KEY", nargs="*", type=key_filter,
                       help="keys or filters to watch ('*' a token, a trailing '>' the rest; default every key)")
    which = watch.add_mutually_exclusive_group()
    which.add_argument("--history", action="store_true", help="begin with every revision kept, not only the last")
    which.add_argument("--updates-only", action="store_true", help="only changes stored from now on")
    watch.add_argument("--ignore-deletes", action="store_true", help="leave out delete and purge markers")
    watch.add_argument("--count", type=int_at_least(1), default=None, metavar="N", help="stop after N entries")
    watch.set_defaults(handler=cmd_watch)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _not_found_is_3(handler: Callable[[argparse.Namespace, Session, Output], int]) -> Callable[..., int]:
    """A handler whose missing bucket or key ends as exit 3, one line naming it."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace, session: Session, out: Output) -> int:
        try:
            return handler(args, session, out)
        except jss.BucketNotFoundError:
            raise NotFound(f"key-value bucket {args.bucket!r} not found") from None
        except jss.KeyNotFoundError as exc:
            raise NotFound(str(exc)) from None

    return run


def _kv(session: Session, bucket: str) -> jss.KeyValue:
    return session.js().key_value(bucket)


def _value(args: argparse.Namespace) -> bytes | str:
    """VALUE, else stdin read to its end (a terminal is refused: nothing was piped in)."""
    if args.value is not None:
        return args.value
    if can_ask():
        raise UsageError(f"kv {args.subcommand}: give VALUE, or pipe the value on stdin")
    return sys.stdin.buffer.read()


def _value_fields(value: bytes) -> dict[str, Any]:
    try:
        return {"value": value.decode("utf-8"), "value_encoding": "utf-8"}
    except UnicodeDecodeError:
        return {"value": base64.b64encode(value).decode("ascii"), "value_encoding": "base64"}


def entry_doc(entry: jss.KeyValueEntry) -> dict[str, Any]:
    """An entry for --json: the value as UTF-8 text when it is valid UTF-8, else base64
    (``value_encoding`` says which); ``created`` in RFC 3339 with the server's nanoseconds."""
    return {"bucket": entry.bucket, "key": entry.key, "revision": entry.revision, "operation": str(entry.operation),
            "created": fmt_time(entry.created), "size": len(entry.value), **_value_fields(entry.value)}


def _short(value: bytes) -> str:
    """A value for a table cell: its text on one line, cut in the middle past 40 characters."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(value)} bytes of binary data>"
    text = text.replace("\n", "\\n")
    return text if len(text) <= SHOWN_VALUE else f"{text[:15]}...{text[-15:]}"


def _status_doc(status: jss.KeyValueStatus) -> dict[str, Any]:
    """A bucket for --json: the KeyValueStatus fields (durations in seconds) and the stream's info."""
    return {"bucket": status.bucket, "values": status.values, "history": status.history, "ttl": status.ttl,
            "limit_marker_ttl": status.limit_marker_ttl, "bytes": status.bytes,
            "is_compressed": status.is_compressed, "backing_store": status.backing_store,
            "metadata": status.metadata, "stream_info": status.stream_info.to_dict()}


def _written(out: Output, args: argparse.Namespace, revision: int, said: str, **extra: Any) -> None:
    if out.json:
        out.emit({"bucket": args.bucket, "key": args.key, "revision": revision, **extra})
    else:
        out.line(f"{said} revision {revision}")


# ---------------------------------------------------------------------------------------------
# Buckets
# ---------------------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv add BUCKET [flags]``: create a bucket; prints its info."""
    fields: dict[str, Any] = {"history": args.history, "ttl": args.ttl or None, "replicas": args.replicas,
                              "compression": args.compress, "description": args.description,
                              "limit_marker_ttl": args.limit_marker_ttl, "max_value_size": args.max_value_size,
                              "max_bytes": args.max_bucket_size, "storage": args.storage}
    jss.KeyValueConfig(bucket=args.bucket, **fields)  # a bad field is refused before connecting (exit 2)
    status = session.js().create_key_value(args.bucket, **fields).status()
    if out.json:
        out.emit(_status_doc(status))
    else:
        out.line(f"created key-value bucket {args.bucket}")
        show_info(out, status)
    return 0


def show_info(out: Output, status: jss.KeyValueStatus) -> None:
    """Print a bucket's status as key/value blocks."""
    info = status.stream_info
    c, s = info.config, info.state
    out.block(None, [("Key-value bucket", status.bucket), ("Created", fmt_time(info.created)),
                     ("Description", c.description)])
    out.line()
    metadata = ", ".join(f"{k}={v}" for k, v in sorted(status.metadata.items()) if not k.startswith("_nats."))
    out.block("Configuration:", [
        ("History kept", status.history),
        ("Max age (TTL)", fmt_duration(status.ttl, zero="unlimited")),
        ("Limit marker TTL", fmt_duration(status.limit_marker_ttl) if status.limit_marker_ttl else None),
        ("Max value size", fmt_limit(c.max_msg_size, "bytes")),
        ("Max bucket size", fmt_limit(c.max_bytes, "bytes")),
        ("Storage", str(c.storage)),
        ("Replicas", c.num_replicas),
        ("Compressed", fmt_bool(status.is_compressed)),
        ("Backing store", f"{status.backing_store} stream {c.name}"),
        ("Republish", f"{c.republish.src or '>'} -> {c.republish.dest}" if c.republish else None),
        ("Mirror", c.mirror.name[3:] if c.mirror and c.mirror.name.startswith("KV_") else
         (c.mirror.name if c.mirror else None)),
        ("Sources", ", ".join(src.name for src in c.sources) if c.sources else None),
        ("Metadata", metadata or None),
    ])
    out.line()
    out.block("State:", [
        ("Values stored", fmt_int(status.values)),
        ("Keys", fmt_int(s.num_subjects or 0) if s is not None else None),
        ("Bytes", fmt_size(status.bytes)),
        ("Last update", f"{fmt_time(s.last_ts)} ({fmt_age(s.last_ts)})" if s is not None and s.last_ts else None),
    ])
    if info.cluster is not None and (info.cluster.replicas or info.cluster.name):
        out.line()
        out.block("Cluster:", [("Name", info.cluster.name), ("Leader", info.cluster.leader),
                               ("Replicas", ", ".join(r.name or "?" for r in info.cluster.replicas or []) or None)])


@_not_found_is_3
def cmd_info(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv info BUCKET``: config and state (``--json``: the status fields and the stream info)."""
    status = _kv(session, args.bucket).status()
    if out.json:
        out.emit(_status_doc(status))
    else:
        show_info(out, status)
    return 0


@_not_found_is_3
def cmd_ls(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv ls [--names]``: the account's buckets; ``kv ls BUCKET``: its keys."""
    if args.bucket is not None:
        keys = sorted(_kv(session, args.bucket).keys())
        if out.json:
            out.emit(keys)
        elif not keys:
            out.line(f"no keys in bucket {args.bucket}")
        else:
            for key in keys:
                out.line(key)
        return 0
    js = session.js()
    if args.names:
        names = sorted(js.key_value_names())
        if out.json:
            out.emit(names)
        else:
            for name in names:
                out.line(name)
        return 0
    statuses = sorted(js.key_values(), key=lambda st: st.bucket)
    if out.json:
        out.emit([_status_doc(st) for st in statuses])
        return 0
    if not statuses:
        out.line("no key-value buckets")
        return 0
    out.table(["BUCKET", "DESCRIPTION", "HISTORY", "TTL", "VALUES", "SIZE", "LAST UPDATE"],
              [[st.bucket, st.stream_info.config.description or "-", st.history,
                fmt_duration(st.ttl, zero="-"), fmt_int(st.values), fmt_size(st.bytes),
                fmt_age(st.stream_info.state.last_ts if st.stream_info.state else None) or "-"] for st in statuses])
    return 0


@_not_found_is_3
def cmd_del(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv del BUCKET KEY [-f]``: delete a key; ``kv del BUCKET [-f]`` (or ``rm``): delete the bucket."""
    command = f"kv {args.subcommand}"
    if args.key is None:
        if not confirm_or_force(args, command, f"delete key-value bucket {args.bucket}"):
            out.line(f"bucket {args.bucket} not deleted")
            return 0
        session.js().delete_key_value(args.bucket)
        if out.json:
            out.emit({"bucket": args.bucket, "deleted": True})
        else:
            out.line(f"deleted key-value bucket {args.bucket}")
        return 0
    if not confirm_or_force(args, command, f"delete key {args.key} of bucket {args.bucket}"):
        out.line(f"key {args.key} not deleted")
        return 0
    revision = _kv(session, args.bucket).delete(args.key)
    _written(out, args, revision, f"deleted key {args.key} of bucket {args.bucket}: delete marker at",
             operation="DEL")
    return 0


@_not_found_is_3
def cmd_compact(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv compact BUCKET [--older-than D] [-f]``: remove the history of deleted and purged keys."""
    if not confirm_or_force(args, "kv compact", f"remove the history of the deleted keys of bucket {args.bucket}"):
        out.line(f"bucket {args.bucket} not compacted")
        return 0
    cleaned = _kv(session, args.bucket).purge_deletes(older_than=args.older_than)
    if out.json:
        out.emit({"bucket": args.bucket, "keys_compacted": cleaned})
    else:
        out.line(f"compacted {cleaned:,} deleted key{'s' * (cleaned != 1)} of bucket {args.bucket}")
    return 0


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------


@_not_found_is_3
def cmd_put(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv put BUCKET KEY [VALUE]``: store a value (stdin without VALUE); prints its revision."""
    value = _value(args)
    revision = _kv(session, args.bucket).put(args.key, value)
    _written(out, args, revision, f"stored key {args.key} of bucket {args.bucket}:")
    return 0


@_not_found_is_3
def cmd_create(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv create BUCKET KEY [VALUE] [--ttl D]``: store a value only if the key has none (exit 1 if it has)."""
    value = _value(args)
    revision = _kv(session, args.bucket).create(args.key, value, ttl=args.ttl)
    _written(out, args, revision, f"created key {args.key} of bucket {args.bucket}:")
    return 0


@_not_found_is_3
def cmd_update(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv update BUCKET KEY [VALUE] --last REVISION``: compare and set (exit 1 on another revision)."""
    value = _value(args)
    revision = _kv(session, args.bucket).update(args.key, value, args.last)
    _written(out, args, revision, f"updated key {args.key} of bucket {args.bucket}:")
    return 0


@_not_found_is_3
def cmd_purge(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv purge BUCKET KEY [--ttl D] [-f]``: replace every revision of the key with a purge marker."""
    if not confirm_or_force(args, "kv purge", f"purge key {args.key} of bucket {args.bucket}"):
        out.line(f"key {args.key} not purged")
        return 0
    revision = _kv(session, args.bucket).purge(args.key, ttl=args.ttl)
    _written(out, args, revision, f"purged key {args.key} of bucket {args.bucket}: purge marker at",
             operation="PURGE")
    return 0


@_not_found_is_3
def cmd_revert(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv revert BUCKET KEY REVISION [-f]``: store the value of REVISION again, if nobody wrote meanwhile."""
    if not args.force and not can_ask():
        confirm_or_force(args, "kv revert", f"revert key {args.key} of bucket {args.bucket}")  # raises, naming -f
    kv = _kv(session, args.bucket)
    old = kv.get(args.key, revision=args.revision)
    last = kv.history(args.key)[-1].revision
    if not confirm_or_force(args, "kv revert", f"revert key {args.key} of bucket {args.bucket} to revision "
                                               f"{args.revision}", [f"Value at revision {old.revision}: "
                                                                    f"{_short(old.value)}"]):
        out.line(f"key {args.key} not reverted")
        return 0
    revision = kv.update(args.key, old.value, last)
    _written(out, args, revision, f"reverted key {args.key} of bucket {args.bucket} to revision {args.revision}:",
             reverted_to=args.revision)
    return 0


@_not_found_is_3
def cmd_get(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv get BUCKET KEY [--revision N] [--raw]``: print the value (exit 3 when the key has none)."""
    if args.raw and out.json:
        raise UsageError("kv get: --raw and --json are exclusive")
    entry = _kv(session, args.bucket).get(args.key, revision=args.revision)
    if args.raw:
        out.stream.flush()
        sys.stdout.buffer.write(entry.value)
        sys.stdout.buffer.flush()
    elif out.json:
        out.emit(entry_doc(entry))
    else:
        print_message(out, f"{entry.bucket} #{entry.revision}", entry.key, None, entry.value, entry.created)
    return 0


@_not_found_is_3
def cmd_history(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv history BUCKET KEY``: every revision kept, oldest first (exit 3 when there is none)."""
    entries = _kv(session, args.bucket).history(args.key)
    if out.json:
        out.emit([entry_doc(e) for e in entries])
        return 0
    out.table(["KEY", "REVISION", "OP", "CREATED", "LENGTH", "VALUE"],
              [[e.key, e.revision, str(e.operation), fmt_time(e.created), len(e.value), _short(e.value)]
               for e in entries])
    return 0


@_not_found_is_3
def cmd_keys(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv keys BUCKET [FILTER...]``: the keys with a value, sorted (nothing for an empty bucket)."""
    keys = sorted(_kv(session, args.bucket).keys(*args.filters))
    if out.json:
        out.emit(keys)
    else:
        for key in keys:
            out.line(key)
    return 0


def _print_entry(out: Output, entry: jss.KeyValueEntry) -> None:
    """An entry as the nats CLI prints it, with its revision: ``[time] PUT BUCKET > KEY #3: value``."""
    head = f"[{fmt_time(entry.created)}] {entry.operation} {entry.bucket} > {entry.key} #{entry.revision}"
    out.line(f"{head}: {payload_text(entry.value)}" if entry.operation is jss.KeyValueOp.PUT else head)
    out.stream.flush()


@_not_found_is_3
def cmd_watch(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``kv watch BUCKET [KEY...]``: the current values, then each change as it is stored (``--json``: one
    object per line, flushed). Runs until ``--count`` entries or Ctrl-C (exit 130)."""
    kv = _kv(session, args.bucket)
    n = 0
    with kv.watch(args.keys or ">", include_history=args.history, updates_only=args.updates_only,
                  ignore_deletes=args.ignore_deletes, timeout=session.timeout) as watcher:
        for entry in watcher:
            n += 1
            if out.json:
                out.json_line(entry_doc(entry))
            else:
                _print_entry(out, entry)
            if args.count is not None and n >= args.count:
                break
    return 0
