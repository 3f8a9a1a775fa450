# Questions on a terminal: the interactive forms of `stream add` and `consumer add`, and the
# "Really delete ...?" confirmation of rm, purge and rmm. A question is asked only when stdin is a
# terminal; without one the caller gets a UsageError naming the flag that would have answered it.
# Prompts go to stderr, so stdout keeps only the command's result (also with --json).
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Sequence

from ._args import UsageError

__all__ = ["ask", "can_ask", "choice", "confirm_or_force", "force_flag", "nonempty"]


def can_ask() -> bool:
    """True when stdin is a terminal a person can answer on."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # no stdin, or a closed one
        return False


def _read(prompt: str) -> str:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise UsageError(f"no answer to {prompt.strip()!r}: input ended")
    return line.strip()


def ask(question: str, default: str = "", parse: Callable[[str], Any] = str) -> Any:
    """Ask ``? question (default) `` until ``parse`` accepts the answer (an empty answer takes
    ``default``); return what ``parse`` made of it. Blocks on stdin."""
    shown = f" ({default})" if default != "" else ""
    while True:
        answer = _read(f"? {question}{shown} ") or default
        try:
            return parse(answer)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            sys.stderr.write(f"  {exc}\n")


def choice(options: Sequence[str]) -> Callable[[str], str]:
    """A parser for one of ``options``, any case (``Limits`` is ``limits``)."""
    def parse(text: str) -> str:
        for option in options:
            if text.strip().lower() == option.lower():
                return option
        raise ValueError(f"answer one of: {', '.join(options)}")
    return parse


def nonempty(text: str) -> str:
    """A parser for an answer that must not be blank."""
    if not text.strip():
        raise ValueError("an answer is required")
    return text.strip()


def force_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``-f``/``--force`` (read by :func:`confirm_or_force`) to a deleting command."""
    parser.add_argument("-f", "--force", action="store_true", help="do not ask for confirmation")


def confirm_or_force(args: argparse.Namespace, command: str, what: str) -> bool:
    """True when ``what`` may go: ``-f`` was given, or the person at the terminal said yes.

    Without ``-f`` and without a terminal: a UsageError naming ``-f`` (nothing is sent)."""
    if args.force:
        return True
    if not can_ask():
        raise UsageError(f"{command}: {what} needs confirming and there is no terminal to ask on: "
                         f"give -f (--force)")
    return _read(f"? Really {what}? [y/N] ").lower() in ("y", "yes")
