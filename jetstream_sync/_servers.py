# Server URLs and credential files, checked and shown before anything connects: the list of servers
# a connection is given (``$NATS_URL`` by default), URLs with their credentials masked for every message
# and log line, and credential files read once up front (never echoed).
#
# Rule 1: pure functions: no I/O but reading the credential files a caller named; no nats-py.
# Rule 2: a password or token never reaches an error text or a log line unmasked.
from __future__ import annotations

import os
import urllib.parse
from typing import Any, Mapping, Sequence

__all__ = ["DEFAULT_URL", "check_credential_files", "default_servers", "normalize_servers", "redact_text",
           "redact_url", "redact_urls"]


def redact_url(url: str) -> str:
    """``url`` with its credentials masked: ``nats://alice:***@host``, ``nats://***@host`` (a token)."""
    try:
        parts = urllib.parse.urlsplit(url if "://" in url else "nats://" + url)
    except ValueError:
        return "<unparsable URL>"
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, has_password, _ = userinfo.partition(":")
    masked = f"{user}:***" if has_password else "***"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{masked}@{hostport}"))


def redact_urls(servers: Sequence[str]) -> list[str]:
    return [redact_url(s) for s in servers]


def redact_text(text: str, servers: Sequence[str]) -> str:
    """``text`` with every server URL's credentials masked."""
    for url in servers:
        if "@" in url:
            text = text.replace(url, redact_url(url))
            userinfo = urllib.parse.urlsplit(url).netloc.rpartition("@")[0]
            for secret in userinfo.split(":")[-1:]:
                if secret:
                    text = text.replace(secret, "***")
    return text


def _read_credential_file(path: Any, name: str) -> str:
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path, got {type(path).__name__}")
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError as exc:
        raise ValueError(f"{name}: cannot read {os.fspath(path)!r}: {exc.strerror or exc}") from None


def check_credential_files(options: Mapping[str, Any]) -> None:
    """Check credential files before connecting (never echoing their content).

    nats-py reads them only once a server asks for a signature, and a creds
    file without a JWT block makes it loop forever on the event loop.
    """
    creds = options.get("user_credentials")
    if creds is not None:
        if isinstance(creds, tuple):
            if len(creds) != 2:
                raise ValueError("user_credentials: a tuple must be (jwt_file, seed_file)")
            _read_credential_file(creds[0], "user_credentials[0] (the JWT file)")
            _read_credential_file(creds[1], "user_credentials[1] (the seed file)")
        else:
            text = creds.data if hasattr(creds, "data") and isinstance(creds.data, str) else \
                _read_credential_file(creds, "user_credentials")
            lines = text.splitlines()
            jwt_at = next((i for i, line in enumerate(lines) if "BEGIN NATS USER JWT" in line), None)
            if jwt_at is None or jwt_at + 1 >= len(lines) or not lines[jwt_at + 1].strip() \
                    or not any("BEGIN USER NKEY SEED" in line for line in lines):
                raise ValueError("user_credentials: not a NATS creds file (it needs a 'BEGIN NATS USER JWT' "
                                 "block and a 'BEGIN USER NKEY SEED' block)")
    seed_file = options.get("nkeys_seed")
    if seed_file is not None:
        _read_credential_file(seed_file, "nkeys_seed")
    seed = options.get("nkeys_seed_str")
    if seed is not None and not isinstance(seed, str):
        raise TypeError(f"nkeys_seed_str must be a str, got {type(seed).__name__}")


DEFAULT_URL = "nats://127.0.0.1:4222"


def default_servers() -> str:
    """``$NATS_URL`` when set (the NATS tools' convention), else ``nats://127.0.0.1:4222``."""
    return os.environ.get("NATS_URL") or DEFAULT_URL


def normalize_servers(servers: Any) -> list[str]:
    if servers is None:
        servers = default_servers()
    if isinstance(servers, str):
        out = [s.strip() for s in servers.split(",") if s.strip()]
    elif isinstance(servers, (list, tuple)):
        out = list(servers)
    else:
        raise TypeError(f"servers must be a URL string or a list of URLs, got {type(servers).__name__}")
    if not out or not all(isinstance(s, str) and s for s in out):
        shown = redact_urls(out) if all(isinstance(s, str) for s in out) else f"a list of {len(out)} items"
        raise ValueError(f"servers must name at least one server URL (non-empty strings), got {shown!r}")
    for url in out:
        scheme, sep, _ = url.partition("://")
        if sep and scheme not in _SCHEMES:
            # nats-py would take "http" for a host name and report a DNS failure.
            raise ValueError(f"servers: {redact_url(url)!r} is not a NATS server URL (scheme {scheme!r}); a server "
                             f"URL starts with nats://, tls://, ws:// or wss:// (or is host:port)")
    return out


#: The URL schemes nats-py connects with.
_SCHEMES = ("nats", "tls", "ws", "wss")
