# Counters (ADR-49; nats-server 2.12, the stream made with ``allow_msg_counter``): ``Counter``, what
# ``js.counter(stream)`` returns. Every subject of such a stream is a counter: a publish carrying
# ``Nats-Incr: <n>`` (and no data) makes the server add n to the subject's last value and store the
# total as ``{"val":"<decimal>"}``; its PubAck carries the total as ``val``.
#
# Rule 1: values are Python ints of any size, sent and read as decimal strings (the server counts with
#         big integers), never through a float or a fixed-width int.
# Rule 2: increments are publishes through the context (``js.publish``: its window and its errors);
#         reads are gets of a subject's last message, direct when the stream allows it.
# Rule 3: arguments are checked before anything is sent.
from __future__ import annotations

import json
import numbers
from typing import Any, Iterable

from . import errors
from ._protocol import DEFAULT, Timeout, check_subject
from .config import StreamInfo

__all__ = ["Counter", "INCREMENT"]

#: The header of an increment.
INCREMENT = "Nats-Incr"


def _check_exact(subject: Any, name: str) -> str:
    check_subject(subject, name)
    if any(token in ("*", ">") for token in subject.split(".")):
        raise ValueError(f"{name} must be one counter's subject, without wildcards, got {subject!r}")
    return subject


class Counter:
    """The counters of a stream made with ``allow_msg_counter=True`` (``js.counter(stream)``): every
    subject of the stream is one counter. Thread-safe.

    Every call blocks the calling thread for at most ``timeout`` seconds (default: the context's),
    waking every 0.25 s so Ctrl-C lands. Values are Python ints of any size, negative too.
    """

    def __init__(self, js: Any, info: StreamInfo) -> None:  # js: its JetStream context, a layer above
        cfg = info.config
        assert cfg is not None
        if not cfg.allow_msg_counter:
            raise errors.CounterDisabledError(400, 10168, "message counters is disabled", stream=cfg.name,
                                              operation=f"counter of stream {cfg.name!r}")
        self._js = js
        self._jsapi = js._jsapi
        #: The stream whose subjects are the counters.
        self.stream_name: str = cfg.name
        self._direct = bool(cfg.allow_direct)

    def __repr__(self) -> str:
        return f"<Counter of stream {self.stream_name!r}>"

    def add(self, subject: str, n: int, *, timeout: Timeout = DEFAULT) -> int:
        """Add ``n`` (an int of any size; negative subtracts) to the counter ``subject``; return its new total.

        One publish with the header ``Nats-Incr: <n>``, blocking on its PubAck for at most ``timeout``;
        not retried (a second attempt would count twice). The stream that captures ``subject`` counts
        it: make it this one.

        Raises TypeError for an ``n`` that is not an int (bool neither), ValueError for a bad subject
        (nothing sent); ``CounterDisabledError`` when the stream capturing ``subject`` does not count,
        ``NoRespondersError`` when no stream captures it, ``TimeoutError``, ``ClientClosedError``.
        """
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"n must be an int, got {type(n).__name__}")
        ack = self._js.publish(check_subject(subject), b"", headers={INCREMENT: f"{int(n):+d}"}, timeout=timeout)
        value = ack.extra.get("val")
        if not isinstance(value, str):
            raise errors.JetStreamError(f"the PubAck of an increment of {subject!r} carries no total (stored in "
                                        f"stream {ack.stream!r} at {ack.seq}): is that stream a counter stream?")
        return int(value)

    def get(self, subject: str, *, timeout: Timeout = DEFAULT) -> int:
        """The counter ``subject``'s value: its last message's (one get, retried; direct when the stream
        allows direct gets, else through the stream's leader). Blocks at most ``timeout`` per attempt.

        Raises ``CounterNotFoundError`` when nothing was ever added to ``subject``, ValueError for a
        subject with wildcards (nothing sent), ``StreamNotFoundError``, ``TimeoutError``.
        """
        value = self._value(_check_exact(subject, "subject"), timeout)
        if value is None:
            raise errors.CounterNotFoundError(self.stream_name, subject)
        return value

    def get_many(self, subjects: Iterable[str], *, timeout: Timeout = DEFAULT) -> dict[str, int]:
        """The values of the counters ``subjects``, by subject, in the order given; a subject nothing was
        added to is left out. One get per subject, as :meth:`get` makes it.

        Raises TypeError/ValueError for a bad subject or one with wildcards, before anything is sent;
        ``StreamNotFoundError``, ``TimeoutError``.
        """
        if isinstance(subjects, (str, bytes)) or not isinstance(subjects, Iterable):
            raise TypeError(f"subjects must be a list of subjects, got {type(subjects).__name__}")
        wanted = [_check_exact(s, f"subjects[{i}]") for i, s in enumerate(subjects)]
        found: dict[str, int] = {}
        for subject in wanted:
            value = self._value(subject, timeout)
            if value is not None:
                found[subject] = value
        return found

    def _value(self, subject: str, timeout: Timeout) -> int | None:
        get = self._jsapi.direct_get if self._direct else self._jsapi.msg_get
        try:
            msg = get(self.stream_name, last_by_subj=subject, timeout=timeout)
        except errors.MessageNotFoundError:
            return None
        try:
            return int(json.loads(msg.data)["val"])
        except (ValueError, TypeError, KeyError) as exc:
            raise errors.JetStreamError(f"the last message on {subject!r} in stream {self.stream_name!r} (at "
                                        f"{msg.seq}) is not a counter's value: {msg.data[:100]!r}") from exc
