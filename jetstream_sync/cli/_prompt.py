# Questions on a terminal: the interactive forms of `stream add` and `consumer add`, and the
# "Really ...?" confirmation of rm, purge, rmm and edit. A question is asked only when stdin is a
# terminal; without one the caller gets a UsageError naming the flag that would have answered it.
# Each answer is checked when it is given (as the config will check it): a wrong one is asked again,
# with the reason, never refused after the last question.
# Prompts go to stderr, so stdout keeps only the command's result (also with --json).
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Sequence

from ._args import UsageError

__all__ = ["ask", "can_ask", "checked", "choice", "confirm_or_force", "force_flag", "nonempty"]


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
    ``default``); return what ``parse`` made of it. A refused answer (``parse`` raised ValueError or
    TypeError) is followed by the reason and the same question. Blocks on stdin."""
    shown = f" ({default})" if default != "" else ""
    while True:
        answer = _read(f"? {question}{shown} ") or default
        try:
            return parse(answer)
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            sys.stderr.write(f"  {exc}\n")


def checked(parse: Callable[[str], Any], check: Callable[[Any], object]) -> Callable[[str], Any]:
    """A parser: ``parse``, then ``check(value)``, which raises ValueError/TypeError saying what is wrong
    (e.g. building the config with that one field, so an answer is checked as the config will be)."""
    def run(text: str) -> Any:
        value = parse(text)
        check(value)
        return value
    return run


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
    """Add ``-f``/``--force`` (read by :func:`confirm_or_force`) to a deleting or changing command."""
    parser.add_argument("-f", "--force", action="store_true", help="do not ask for confirmation")


def confirm_or_force(args: argparse.Namespace, command: str, what: str, details: Sequence[str] = ()) -> bool:
    """True when ``what`` may go: ``-f`` was given, or the person at the terminal said yes.

    ``details`` (e.g. the fields an edit changes) are shown, on stderr, before the question.

    On the terminal, y/yes is a yes, n/no or an empty answer a no; anything else is asked again.
    Without ``-f`` and without a terminal: a UsageError naming ``-f`` (nothing is sent)."""
    if args.force:
        return True
    if not can_ask():
        raise UsageError(f"{command}: {what} needs confirming and there is no terminal to ask on: "
                         f"give -f (--force)")
    for line in details:
        sys.stderr.write(f"{line}\n")
    while True:
        answer = _read(f"? Really {what}? [y/N] ").lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            return False
        sys.stderr.write("  answer y (yes) or n (no)\n")
