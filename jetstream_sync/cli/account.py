# ``jetstream-sync account info``: the account's JetStream usage and limits ($JS.API.INFO).
from __future__ import annotations

import argparse
from typing import Any

from ._output import Output, fmt_int, fmt_limit, fmt_size
from ._session import Session

__all__ = ["register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``account`` command and its ``info`` subcommand to ``sub`` (a sub-parsers action)."""
    p = sub.add_parser("account", parents=[common], help="account information")
    cmds = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    info = cmds.add_parser("info", parents=[common], help="JetStream usage and limits of the account")
    info.set_defaults(handler=cmd_info)


def cmd_info(args: argparse.Namespace, session: Session, out: Output) -> int:
    """``account info``: usage, limits and API counters (``--json``: the AccountInfo)."""
    client = session.client()
    info = session.js().account_info()
    if out.json:
        out.emit(info.to_dict())
        return 0
    out.block(None, [("Connected to", client.connected_url), ("Domain", info.domain)])
    out.line()
    out.block("Usage:", [
        ("Memory", fmt_size(info.memory)),
        ("Storage", fmt_size(info.storage)),
        ("Streams", fmt_int(info.streams)),
        ("Consumers", fmt_int(info.consumers)),
    ])
    lim = info.limits
    if lim is not None:
        out.line()
        out.block("Limits:", [
            ("Max memory", fmt_limit(lim.max_memory, "bytes")),
            ("Max storage", fmt_limit(lim.max_storage, "bytes")),
            ("Max streams", fmt_limit(lim.max_streams)),
            ("Max consumers", fmt_limit(lim.max_consumers)),
            ("Max ack pending", fmt_limit(lim.max_ack_pending)),
            ("Max bytes required", "true" if lim.max_bytes_required else "false"),
        ])
    if info.api is not None:
        out.line()
        out.block("API:", [("Level", info.api.level), ("Requests", fmt_int(info.api.total)),
                           ("Errors", fmt_int(info.api.errors))])
    return 0
