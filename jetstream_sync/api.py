# The JetStream API as data: subject templates, domain/prefix handling and
# decoding of response envelopes.
#
# Rule 1: nothing here sends anything; callers own the I/O.
# Rule 2: every API subject of the package is built by ApiPrefix, so a domain
#         or custom prefix is honoured by every request, direct get included.
from __future__ import annotations

import json
from typing import Any

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

    def msg_next(self, stream: str, consumer: str) -> str:
        return self("CONSUMER.MSG.NEXT", stream, consumer)


def decode(data: bytes) -> dict[str, Any]:
    """Decode a JetStream API response; raise the matching ``APIError`` for an error envelope."""
    try:
        resp = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"the server sent a response that is not JSON: {data[:200]!r}") from exc
    if not isinstance(resp, dict):
        raise ValueError(f"the server sent an unexpected response: {data[:200]!r}")
    err = resp.get("error")
    if err:
        raise api_error_from(err)
    return resp
