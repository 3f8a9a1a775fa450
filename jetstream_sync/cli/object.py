# ``jetstream-sync object add|info|ls|rm|seal|put|get``: object stores and their objects, with the nats
# CLI's spellings (`nats object ...`). `info`, `ls` and `rm` act on the store given only STORE, on one
# object given STORE NAME. put and get stream the bytes (memory bounded by the library's windows, never
# by the object) and draw a byte progress bar on stderr for large objects when stderr is a terminal.
# Rule: nothing is replaced without -f or a "yes" on the terminal: not an object (put), not a local
# file (get); a get that fails leaves an existing file as it was (it writes a temporary file beside it).
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import IO, Any, Callable

import jetstream_sync as jss

from ._args import CONNECTION_NOTE, UsageError, age, common_options, header, int_at_least, key_value, size
from ._errors import CommandError, NotFound
from ._output import (Output, fmt_bool, fmt_duration, fmt_int, fmt_limit, fmt_size, fmt_time, progress_bar,
                      write_whole)
from ._prompt import can_ask, confirm_or_force, force_flag
from ._session import Session

__all__ = ["BAR_MIN_BYTES", "register"]

#: Objects of at least this many bytes get a progress bar (when stderr is a terminal, or with --progress).
BAR_MIN_BYTES = 1024 * 1024
#: The read buffer of a get (the reader hands out at most one chunk per read).
_READ_BYTES = 256 * 1024
_STDIO = "-"


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``object`` command and its subcommands to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser("object", aliases=["obj"], parents=[common], help="manage object stores and their objects",
                       description="Create, inspect, seal and delete object stores; put, get, inspect and delete "
                                   "their objects (files of any size, stored in chunks).")
    cmds = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    _register_store_commands(cmds, common)
    _register_object_commands(cmds, common)


def _register_store_commands(cmds: Any, common: argparse.ArgumentParser) -> None:
    add = cmds.add_parser("add", parents=[common], help="create an object store",
                          description="Create the object store STORE (the stream OBJ_STORE). Creating a store "
                                      "that exists with the same settings succeeds; with others it fails.")
    add.add_argument("store", metavar="STORE", help="the store's name (letters, digits, '_' and '-')")
    add.add_argument("--ttl", type=age, metavar="DURATION", help="how long objects are kept (default: for ever)")
    add.add_argument("--max-bucket-size", type=size, metavar="SIZE",
                     help="the largest the store may grow, e.g. 10GiB (default: -1, unlimited)")
    add.add_argument("--storage", choices=["file", "memory"], help="where the server keeps it (default file)")
    add.add_argument("--replicas", type=int_at_least(1), default=1, metavar="N", help="copies kept (default 1)")
    add.add_argument("--compress", action="store_true", help="compress the data on disk (s2)")
    add.add_argument("--description", metavar="TEXT", help="what the store holds")
    add.add_argument("--metadata", type=key_value, action="append", metavar="KEY=VALUE",
                     help="user metadata; repeat for more")
    add.set_defaults(handler=cmd_add)

    info = cmds.add_parser("info", parents=[common], help="show a store, or one object",
                           description="Show the store's settings and size, or with NAME one object's size, "
                                       "chunks, time, digest, headers and metadata.")
    info.add_argument("store", metavar="STORE", help="the object store")
    info.add_argument("name", metavar="NAME", nargs="?", help="the object (default: show the store)")
    info.set_defaults(handler=cmd_info)

    ls = cmds.add_parser("ls", parents=[common], help="list stores, or a store's objects",
                         description="List the object stores, or with STORE the objects in it: name, size, "
                                     "time and digest.")
    ls.add_argument("store", metavar="STORE", nargs="?", help="the store whose objects to list (default: the stores)")
    ls.add_argument("-n", "--names", action="store_true", help="names only")
    ls.set_defaults(handler=cmd_ls)

    rm = cmds.add_parser("rm", aliases=["del"], parents=[common], help="delete a store, or one object",
                         description="Delete the store and every object in it, or with NAME one object. Asks "
                                     "first on a terminal; -f deletes without asking (and is needed without a "
                                     "terminal).")
    rm.add_argument("store", metavar="STORE", help="the object store")
    rm.add_argument("name", metavar="NAME", nargs="?", help="the object to delete (default: the whole store)")
    force_flag(rm)
    rm.set_defaults(handler=cmd_rm)

    seal = cmds.add_parser("seal", parents=[common], help="seal a store: no more changes",
                           description="Seal the store: nothing can be put, changed or deleted in it any more, "
                                       "and that cannot be undone. Asks first on a terminal; -f seals without "
                                       "asking (and is needed without a terminal).")
    seal.add_argument("store", metavar="STORE", help="the object store to seal")
    force_flag(seal)
    seal.set_defaults(handler=cmd_seal)


def _register_object_commands(cmds: Any, common: argparse.ArgumentParser) -> None:
    # `--name` is the object's name, as in the nats CLI: this parser gets its own copy of the common options
    # without the connection's --name (give that before the command), so the shared copy stays whole.
    put = cmds.add_parser("put", parents=[common_options(shown=False)], conflict_handler="resolve",
                          epilog=f"{CONNECTION_NOTE} (--name only before it: after `object put`, --name is the "
                                 f"object's name)",
                          help="store a file as an object",
                          description="Store FILE (or stdin, FILE '-') as an object named after the file, or "
                                      "--name. Replacing an object asks first on a terminal; -f replaces without "
                                      "asking (and is needed without a terminal, or when FILE is '-').")
    put.add_argument("store", metavar="STORE", help="the object store")
    put.add_argument("file", metavar="FILE", type=_source, help="the file to store; '-' reads stdin")
    put.add_argument("--name", metavar="NAME",
                     help="the object's name (default: FILE's base name; required with '-'); here --name is not "
                          "the connection name, which goes before the command")
    put.add_argument("--description", metavar="TEXT", help="what the object is")
    put.add_argument("-H", "--header", type=header, action="append", default=[], metavar="KEY:VALUE",
                     help="a header stored with the object; repeat for more")
    put.add_argument("--metadata", type=key_value, action="append", metavar="KEY=VALUE",
                     help="user metadata; repeat for more")
    _progress_flag(put)
    force_flag(put)
    put.set_defaults(handler=cmd_put)

    get = cmds.add_parser("get", parents=[common], help="write an object to a file or stdout",
                          description="Write the object to --output (default: a file named after the object, in "
                                      "the current directory; '-' is stdout). The bytes are checked against the "
                                      "stored digest. Replacing a file asks first on a terminal; -f replaces "
                                      "without asking (and is needed without a terminal).")
    get.add_argument("store", metavar="STORE", help="the object store")
    get.add_argument("name", metavar="NAME", help="the object to read")
    get.add_argument("-O", "--output", metavar="PATH",
                     help="where to write it: a file, a directory to write it into, or '-' for stdout")
    _progress_flag(get)
    force_flag(get)
    get.set_defaults(handler=cmd_get)


def _progress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help=f"progress bar on stderr (default: for objects of {fmt_size(BAR_MIN_BYTES)} or more, "
                        f"when stderr is a terminal)")


def _source(text: str) -> str:
    """``put`` FILE: '-' (stdin), or a readable file that is not a directory (a pipe is fine)."""
    if text == _STDIO:
        return text
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory: give a file")
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"no such file: {text!r}")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: permission denied")
    return text


# ---------------------------------------------------------------------------------------------
# Lookups and the documents --json prints
# ---------------------------------------------------------------------------------------------


def _check_store(command: str, store: str) -> None:
    """Refuse a store name the server would refuse, before connecting (UsageError, exit 2)."""
    try:
        jss.ObjectStoreConfig(bucket=store)
    except ValueError:
        raise UsageError(f"object {command}: invalid object store name {store!r}: use letters, digits, "
                         f"'_' and '-'") from None


def _store(js: jss.JetStream, store: str) -> jss.ObjectStore:
    try:
        return js.object_store(store)
    except jss.BucketNotFoundError:
        raise NotFound(f"object store {store!r} not found") from None


def _object_info(store: jss.ObjectStore, name: str) -> jss.ObjectInfo:
    try:
        return store.info(name)
    except jss.ObjectNotFoundError as exc:
        raise NotFound(str(exc)) from None


#: The server's error code for a write to a sealed stream.
_SEALED = 10109


def _sealed(exc: jss.APIError, store: str) -> Exception:
    """What to raise for ``exc``: a write refused because the store is sealed says so, naming the store."""
    if exc.err_code == _SEALED:
        return CommandError(f"object store {store!r} is sealed: nothing can be put, changed or deleted in it")
    return exc


def info_dict(info: jss.ObjectInfo) -> dict[str, Any]:
    """An object's info for --json: its meta document as the store holds it (nats.go's field names)."""
    return json.loads(info.to_json())


def status_dict(status: jss.ObjectStoreStatus) -> dict[str, Any]:
    """A store's status for --json; ``ttl`` in nanoseconds, ``stream_info`` as the server sends it."""
    return {"bucket": status.bucket, "description": status.description, "ttl": round(status.ttl * 1e9),
            "storage": str(status.storage) if status.storage is not None else None, "replicas": status.replicas,
            "sealed": status.sealed, "size": status.size, "is_compressed": status.is_compressed,
            "metadata": status.metadata, "backing_store": status.backing_store,
            "stream_info": status.stream_info.to_dict()}


# ---------------------------------------------------------------------------------------------
# Human output
# ---------------------------------------------------------------------------------------------


def show_status(out: Output, status: jss.ObjectStoreStatus) -> None:
    """Print a store's status as key/value blocks."""
    info = status.stream_info
    cfg = info.config
    out.block(None, [("Object store", status.bucket), ("Created", fmt_time(info.created)),
                     ("Description", status.description)])
    out.line()
    metadata = ", ".join(f"{k}={v}" for k, v in sorted(status.metadata.items()) if not k.startswith("_nats."))
    out.block("Configuration:", [
        ("Stream", cfg.name if cfg is not None else None),
        ("Storage", str(status.storage) if status.storage is not None else None),
        ("Replicas", status.replicas),
        ("TTL", fmt_duration(status.ttl, zero="unlimited")),
        ("Max size", fmt_limit(cfg.max_bytes if cfg is not None else None, "bytes")),
        ("Compressed", fmt_bool(status.is_compressed)),
        ("Sealed", fmt_bool(status.sealed)),
        ("Metadata", metadata or None),
    ])
    out.line()
    out.block("State:", [("Size", fmt_size(status.size))])


def show_object(out: Output, info: jss.ObjectInfo) -> None:
    """Print an object's info as a key/value block."""
    rows: list[tuple[str, Any]] = [("Object", info.name), ("Store", info.bucket), ("Description", info.description)]
    if info.link is not None:
        rows.append(("Link to", _link_text(info.link)))
    else:
        rows += [("Size", f"{fmt_size(info.size)} ({fmt_int(info.size)} bytes)"), ("Chunks", fmt_int(info.chunks)),
                 ("Digest", info.digest or None)]
    rows.append(("Modified", fmt_time(info.mtime) or None))
    if info.deleted:
        rows.append(("Deleted", "true"))
    for key, values in info.headers.multi().items():
        rows.append((f"Header {key}", ", ".join(values)))
    rows += [(f"Metadata {k}", v) for k, v in sorted(info.metadata.items())]
    out.block(None, rows)


def _link_text(link: Any) -> str:
    return f"object store {link.bucket}" if not link.name else f"{link.bucket} > {link.name}"


# ---------------------------------------------------------------------------------------------
# Stores
# ---------------------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``object add STORE [flags]``: create an object store; prints its status."""
    _check_store("add", args.store)
    if args.max_bucket_size == 0:
        raise UsageError("object add: argument --max-bucket-size: must be above 0 (or -1 for unlimited)")
    store = session.js().create_object_store(
        args.store, description=args.description, ttl=args.ttl or None, max_bytes=args.max_bucket_size,
        storage=args.storage, replicas=args.replicas, compression=args.compress,
        metadata=dict(args.metadata) if args.metadata else None)
    status = store.status()
    if out.json:
        out.emit(status_dict(status))
    else:
        out.line(f"created object store {status.bucket}")
        show_status(out, status)
    return 0


def cmd_info(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``object info STORE [NAME]``: the store's status, or one object's info."""
    _check_store("info", args.store)
    store = _store(session.js(), args.store)
    if args.name is None:
        status = store.status()
        if out.json:
            out.emit(status_dict(status))
        else:
            show_status(out, status)
        return 0
    info = _object_info(store, args.name)
    if out.json:
        out.emit(info_dict(info))
    else:
        show_object(out, info)
    return 0


def cmd_ls(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``object ls [STORE] [--names]``: the object stores, or the objects of STORE (a table or JSON)."""
    if args.store is None:
        return _ls_stores(args, session, out)
    _check_store("ls", args.store)
    infos = sorted(_store(session.js(), args.store).list(), key=lambda i: i.name)
    if args.names:
        _print_names(out, [i.name for i in infos])
        return 0
    if out.json:
        out.emit([info_dict(i) for i in infos])
        return 0
    if not infos:
        out.line(f"no objects in object store {args.store}")
        return 0
    out.table(["NAME", "SIZE", "TIME", "DIGEST"],
              [[i.name, fmt_size(i.size) if i.link is None else "-", fmt_time(i.mtime) or "-",
                i.digest if i.link is None else f"link to {_link_text(i.link)}"] for i in infos])
    return 0


def _print_names(out: Output, names: list[str]) -> None:
    if out.json:
        out.emit(names)
    else:
        for name in names:
            out.line(name)


def _ls_stores(args: argparse.Namespace, session: Session, out: Output) -> int:
    js = session.js()
    if args.names:
        _print_names(out, sorted(js.object_store_names()))
        return 0
    stores = sorted(js.object_stores(), key=lambda s: s.bucket)
    if out.json:
        out.emit([status_dict(s) for s in stores])
        return 0
    if not stores:
        out.line("no object stores")
        return 0
    out.table(["STORE", "DESCRIPTION", "STORAGE", "REPLICAS", "SIZE", "TTL", "SEALED"],
              [[s.bucket, s.description or "-", str(s.storage) if s.storage is not None else "-", s.replicas,
                fmt_size(s.size), fmt_duration(s.ttl, zero="unlimited"), fmt_bool(s.sealed)] for s in stores])
    return 0


def cmd_rm(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``object rm STORE [NAME] [-f]``: delete the store, or one object (asks first on a terminal)."""
    _check_store("rm", args.store)
    if args.name is not None:
        return _rm_object(args, session, out)
    if not confirm_or_force(args, "object rm", f"delete object store {args.store} and every object in it"):
        out.line(f"object store {args.store} not deleted")
        return 0
    try:
        session.js().delete_object_store(args.store)
    except jss.BucketNotFoundError:
        raise NotFound(f"object store {args.store!r} not found") from None
    if out.json:
        out.emit({"bucket": args.store, "deleted": True})
    else:
        out.line(f"deleted object store {args.store}")
    return 0


def _rm_object(args: argparse.Namespace, session: Session, out: Output) -> int:
    if not confirm_or_force(args, "object rm", f"delete object {args.name} from object store {args.store}"):
        out.line(f"object {args.name} not deleted")
        return 0
    store = _store(session.js(), args.store)
    try:
        store.delete(args.name)
    except jss.ObjectNotFoundError as exc:
        raise NotFound(str(exc)) from None
    except jss.APIError as exc:
        raise _sealed(exc, args.store) from None
    if out.json:
        out.emit({"bucket": args.store, "name": args.name, "deleted": True})
    else:
        out.line(f"deleted object {args.name} from object store {args.store}")
    return 0


def cmd_seal(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``object seal STORE [-f]``: seal the store for good (asks first on a terminal); prints its status."""
    _check_store("seal", args.store)
    if not confirm_or_force(args, "object seal", f"seal object store {args.store} (this cannot be undone)"):
        out.line(f"object store {args.store} not sealed")
        return 0
    status = _store(session.js(), args.store).seal()
    if out.json:
        out.emit(status_dict(status))
    else:
        out.line(f"sealed object store {status.bucket}")
        show_status(out, status)
    return 0


# ---------------------------------------------------------------------------------------------
# Objects: put and get
# ---------------------------------------------------------------------------------------------


class _Bar:
    """``progress(done, total)`` of a put or get: a byte bar on stderr, drawn once the object proves large
    (its size, or the bytes so far when the size is unknown, reaches BAR_MIN_BYTES) and stderr is a
    terminal; ``--progress`` draws it for any size, ``--no-progress`` never. Runs on the calling thread."""

    def __init__(self, wanted: bool | None, desc: str) -> None:
        self._wanted = wanted
        self._desc = desc
        self._tty = wanted is None and sys.stderr.isatty()
        self._bar: Any = None
        self._done = 0

    def __call__(self, done: int, total: int | None) -> None:
        if self._bar is None:
            if not (self._wanted or self._tty and (total if total is not None else done) >= BAR_MIN_BYTES):
                return
            self._bar = progress_bar(total, True, self._desc, unit="iB", unit_scale=True, unit_divisor=1024)
        self._bar.update(done - self._done)
        self._done = done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def cmd_put(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``object put STORE FILE [--name NAME] [flags]``: store a file (or stdin) as an object; prints its info.

    Replacing a live object needs -f or a yes on the terminal (asked before FILE is read)."""
    _check_store("put", args.store)
    from_stdin = args.file == _STDIO
    if args.name is not None:
        name = args.name
    elif from_stdin:
        raise UsageError("object put: give --name NAME for data read from stdin")
    else:
        name = os.path.basename(os.path.normpath(args.file))
    if not name:
        raise UsageError("object put: --name must not be empty")
    store = _store(session.js(), args.store)
    if not args.force:
        try:
            store.info(name)
        except jss.ObjectNotFoundError:
            pass
        else:
            what = f"replace object {name} of object store {args.store}"
            if from_stdin and can_ask():  # stdin holds the data: it cannot also answer the question
                raise UsageError(f"object put: {what} needs confirming and stdin is the data: give -f (--force)")
            if not confirm_or_force(args, "object put", what):
                out.line(f"object {name} not replaced")
                return 0
    headers: dict[str, list[str]] = {}
    for key, value in args.header:
        headers.setdefault(key, []).append(value)
    bar = _Bar(args.progress, name)
    source: IO[bytes] = sys.stdin.buffer if from_stdin else open(args.file, "rb")  # noqa: SIM115 - closed below
    try:
        info = store.put(name, source, description=args.description, headers=headers or None,
                         metadata=dict(args.metadata) if args.metadata else None, progress=bar)
    except jss.APIError as exc:
        raise _sealed(exc, args.store) from None
    finally:
        bar.close()
        if not from_stdin:
            source.close()
    if out.json:
        out.emit(info_dict(info))
    else:
        out.line(f"stored object {info.name} in object store {args.store}")
        show_object(out, info)
    return 0


def _target(args: argparse.Namespace, out: Output) -> str | None:
    """Where ``get`` writes: a path, or None for stdout (refused with --json, which prints there too)."""
    if args.output == _STDIO:
        if out.json:
            raise UsageError("object get: --json and --output - both write to stdout: give --output PATH")
        return None
    if args.output == "":
        raise UsageError("object get: --output must not be empty: give a path, a directory or '-'")
    if args.output is not None and not os.path.isdir(args.output):
        return args.output
    base = os.path.basename(args.name.rstrip("/"))
    if base in ("", ".", ".."):
        raise UsageError(f"object get: object {args.name!r} names no file: give --output PATH")
    return base if args.output is None else os.path.join(args.output, base)


def cmd_get(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``object get STORE NAME [--output PATH|-] [-f]``: write the object's bytes, checked against its digest.

    An existing file is replaced only after -f or a yes on the terminal (without a terminal and -f: a
    UsageError before connecting), and only once every byte was read and checked: a failed or
    interrupted get leaves it as it was, and leaves no partial file."""
    _check_store("get", args.store)
    target = _target(args, out)
    replacing = target is not None and os.path.isfile(target)
    what = f"overwrite {target}"
    if replacing and not args.force and not can_ask():
        confirm_or_force(args, "object get", what)  # raises, naming -f
    store = _store(session.js(), args.store)
    info = _object_info(store, args.name)
    if info.link is not None and not info.link.name:
        raise CommandError(f"object {args.name!r} of object store {args.store!r} links to the whole object store "
                           f"{info.link.bucket!r}: there are no bytes to get (list it with `object ls "
                           f"{info.link.bucket}`)")
    if replacing and not confirm_or_force(args, "object get", what):
        out.line(f"{target} not overwritten")
        return 0
    bar = _Bar(args.progress, args.name)
    try:
        with store.get(args.name) as reader:
            if target is None:
                _copy(reader, sys.stdout.buffer, bar)
                sys.stdout.buffer.flush()
                return 0
            _write_file(reader, target, bar)
    except jss.ObjectNotFoundError as exc:  # deleted (or its link's target) since the lookup
        raise NotFound(str(exc)) from None
    finally:
        bar.close()
    if out.json:
        out.emit({**info_dict(reader.info), "path": target})
    else:
        out.line(f"wrote object {args.name} ({fmt_size(reader.info.size)}) to {target}")
    return 0


def _copy(reader: Any, sink: IO[bytes], progress: Callable[[int, int | None], Any]) -> None:
    buffer = memoryview(bytearray(_READ_BYTES))
    done = 0
    while True:
        n = reader.readinto(buffer)
        if not n:
            return
        sink.write(buffer[:n])
        done += n
        progress(done, reader.info.size)


def _write_file(reader: Any, target: str, progress: Callable[[int, int | None], Any]) -> None:
    """Write ``reader`` to ``target``, whole or not at all (``write_whole``)."""
    def write(path: str) -> None:
        with open(path, "wb") as sink:
            _copy(reader, sink, progress)

    write_whole(target, write)
