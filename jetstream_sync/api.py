# The JetStream API as data: subject templates, domain/prefix handling and
# decoding of response envelopes.
#
# Rule 1: nothing here sends anything; callers own the I/O.
# Rule 2: every API subject of the package is built by ApiPrefix, so a domain
#         or custom prefix is honoured by every request, direct get included.
from __future__ import annotations

import json
from typing import Any, Mapping

from .errors import api_error_from

__all__ = ["ApiPrefix", "DEFAULT_PREFIX", "decode"]

DEFAULT_PREFIX = "$JS.API"


class ApiPrefix:
    """Builds ``$JS.API.*`` (or ``$JS.<domain>.API.*`` / a custom prefix) subjects. Immutable."""

    __slots__ = ("prefix", "domain")

    def __init__(self, domain: str | None = None, api_prefix: str | None = None) -> None:
        if domain is not None and api_prefix is not None:
            raise ValueError("domain and api_prefix are exclusive: give one or the other")
        if domain is not None:
            if not isinstance(domain, str) or not domain or any(c in domain for c in " .*>\t"):
                raise ValueError(f"domain must be a non-empty name without spaces, dots or wildcards, got {domain!r}")
            prefix = f"$JS.{domain}.API"
        elif api_prefix is not None:
            if not isinstance(api_prefix, str):
                raise TypeError(f"api_prefix must be a str, got {type(api_prefix).__name__}")
            prefix = api_prefix.rstrip(".")
            if not prefix or any(c in prefix for c in " \t\r\n*>") or "" in prefix.split("."):
                raise ValueError(f"api_prefix must be a subject prefix without spaces, wildcards or empty tokens, "
                                 f"got {api_prefix!r}")
        else:
            prefix = DEFAULT_PREFIX
        self.prefix = prefix
        self.domain = domain

    def __call__(self, *tokens: str) -> str:
        return ".".join((self.prefix, *tokens))

    # Streams
    def account_info(self) -> str:
        return self("INFO")

    def stream_create(self, name: str) -> str:
        return self("STREAM.CREATE", name)

    def stream_update(self, name: str) -> str:
        return self("STREAM.UPDATE", name)

    def stream_info(self, name: str) -> str:
        return self("STREAM.INFO", name)

    def stream_delete(self, name: str) -> str:
        return self("STREAM.DELETE", name)

    def stream_purge(self, name: str) -> str:
        return self("STREAM.PURGE", name)

    def stream_list(self) -> str:
        return self("STREAM.LIST")

    def stream_names(self) -> str:
        return self("STREAM.NAMES")

    def msg_get(self, stream: str) -> str:
        return self("STREAM.MSG.GET", stream)

    def msg_delete(self, stream: str) -> str:
        return self("STREAM.MSG.DELETE", stream)

    def direct_get(self, stream: str) -> str:
        return self("DIRECT.GET", stream)

    # Consumers
    def consumer_create(self, stream: str, name: str | None, filter_subject: str | None = None) -> str:
        if name is None:
            return self("CONSUMER.CREATE", stream)
        if filter_subject:
            return self("CONSUMER.CREATE", stream, name, filter_subject)
        return self("CONSUMER.CREATE", stream, name)

    def consumer_info(self, stream: str, name: str) -> str:
        return self("CONSUMER.INFO", stream, name)

    def consumer_delete(self, stream: str, name: str) -> str:
        return self("CONSUMER.DELETE", stream, name)

    def consumer_list(self, stream: str) -> str:
        return self("CONSUMER.LIST", stream)

    def consumer_names(self, stream: str) -> str:
        return self("CONSUMER.NAMES", stream)

    def consumer_pause(self, stream: str, name: str) -> str:
        return self("CONSUMER.PAUSE", stream, name)

    def msg_next(self, stream: str, consumer: str) -> str:
        return self("CONSUMER.MSG.NEXT", stream, consumer)

    def consumer_unpin(self, stream: str, consumer: str) -> str:
        return self("CONSUMER.UNPIN", stream, consumer)

    def consumer_leader_elected(self, stream: str, consumer: str) -> str | None:
        """The subject of the advisory the server publishes when ``consumer`` gets a new leader, or None
        with a custom API prefix: the advisories are published in the account that holds the stream,
        which such a prefix reaches through an import, so they are not seen here."""
        if self.domain is None and self.prefix != DEFAULT_PREFIX:
            return None
        return f"$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.{stream}.{consumer}"

    def describe(self, subject: str) -> str:
        """What a request on ``subject`` does, in words, with the subject: for error messages.

        ``$JS.API.CONSUMER.CREATE.ORDERS.C`` gives ``create consumer 'C' on stream 'ORDERS'
        ($JS.API.CONSUMER.CREATE.ORDERS.C)``. No I/O.
        """
        return f"{_parse(self._tokens(subject))[0]} ({subject})"

    def about(self, subject: str) -> dict[str, str | None]:
        """What a request on ``subject`` is about, as ``APIError`` keywords: ``operation`` (in words),
        ``stream`` and ``consumer`` (None where the subject names none). No I/O."""
        words, stream, consumer = _parse(self._tokens(subject))
        return {"operation": words, "stream": stream, "consumer": consumer}

    def _tokens(self, subject: str) -> list[str]:
        return subject[len(self.prefix) + 1:].split(".")


_STREAM_OPS = {"CREATE": "create stream", "UPDATE": "update stream", "INFO": "stream info of",
               "DELETE": "delete stream", "PURGE": "purge stream", "MSG.GET": "get message from stream",
               "MSG.DELETE": "delete message from stream"}
_CONSUMER_OPS = {"CREATE": "create consumer", "INFO": "consumer info of", "DELETE": "delete consumer",
                 "MSG.NEXT": "pull request to consumer", "PAUSE": "pause or resume consumer",
                 "UNPIN": "unpin consumer"}


def _parse(tokens: list[str]) -> tuple[str, str | None, str | None]:
    """(the request in words, its stream, its consumer) from the tokens after the API prefix."""
    kind, rest = tokens[0], tokens[1:]
    if tokens == ["INFO"]:
        return "account info", None, None
    if kind == "DIRECT" and rest[:1] == ["GET"] and len(rest) > 1:
        return f"direct get from stream {rest[1]!r}", rest[1], None
    if kind in ("STREAM", "CONSUMER") and rest[:1] in (["LIST"], ["NAMES"]):
        if kind == "STREAM":
            return "list streams", None, None
        stream = (rest[1:] or [None])[0]
        return f"list consumers of stream {stream or '?'!r}", stream, None
    two = ".".join(rest[:2])
    op, args = (two, rest[2:]) if two in ("MSG.GET", "MSG.DELETE", "MSG.NEXT") else (rest[0] if rest else "", rest[1:])
    if kind == "STREAM" and op in _STREAM_OPS and args:
        return f"{_STREAM_OPS[op]} {args[0]!r}", args[0], None
    if kind == "CONSUMER" and op in _CONSUMER_OPS and args:
        if len(args) == 1:
            return f"{_CONSUMER_OPS[op]} on stream {args[0]!r}", args[0], None
        return f"{_CONSUMER_OPS[op]} {args[1]!r} on stream {args[0]!r}", args[0], args[1]
    return "JetStream API request", None, None


def decode(data: bytes, about: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Decode a JetStream API response; raise the matching ``APIError`` for an error envelope, naming
    what ``about`` says the request was about (:meth:`ApiPrefix.about`)."""
    try:
        resp = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"the server sent a response that is not JSON: {data[:200]!r}") from exc
    if not isinstance(resp, dict):
        raise ValueError(f"the server sent an unexpected response: {data[:200]!r}")
    err = resp.get("error")
    if err:
        raise api_error_from(err, **(about or {}))
    return resp
