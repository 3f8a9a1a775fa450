# Options of the "jetstream" data source: names checked against the ones it knows, values parsed and
# validated where the query is planned (the driver) into picklable settings.
# Rule 1: every bad option is a ValueError naming the option and what is allowed, raised before anything
#         is sent; names are case-insensitive, an unknown one gets the closest known name as a hint.
# Rule 2: no pyspark here and no I/O but reading credential files (shipped to executors as contents);
#         ReadSettings.js() hands out _connections' per-process cached connection.
"""Parsing of the ``jetstream`` data source options (documented in :mod:`jetstream_sync.spark.datasource`)."""

from __future__ import annotations

import datetime as _dt
import difflib
import json
import math
from typing import Any, Mapping

import attrs

import jetstream_sync as jss
from jetstream_sync.config import validate_stream_name

from ._connections import ConnectionOptions, jetstream_for

#: Sent to the server by default: the connection name shown by `nats server report connections`.
_DEFAULT_NAME = "jetstream-sync-spark"


def lower_keys(options: Mapping[str, Any]) -> dict[str, str]:
    """The options with their names in lower case (Spark's are case-insensitive); None values left out."""
    return {str(k).lower(): v for k, v in options.items() if v is not None}


_CONNECTION_OPTIONS = ("servers", "connectionName", "timeout", "domain", "user", "password", "token", "credsFile",
                       "userCredentials", "nkeysSeedFile", "nkeysSeed", "tlsCaFile", "tlsCertFile", "tlsKeyFile",
                       "tlsHostname")
_READ_OPTIONS = ("stream", "subject", "startingOffsets", "endingOffsets", "startingTimestamp", "minPartitions",
                 "maxMessagesPerTrigger", "failOnDataLoss", "includeHeaders", "mode", "durable", "ackWait")
WRITE_OPTIONS = ("subject", "maxPending", "ackTimeout")
#: Options of Spark's own that it may hand to every source or sink (``load(path)``, checkpoints, ...).
_SPARK_OPTIONS = ("path", "paths", "checkpointLocation", "queryName")


def check_option_names(opts: Mapping[str, Any], ours: tuple[str, ...], what: str) -> None:
    """A ValueError for the first option name this source does not know, suggesting the closest one."""
    spelled = {name.lower(): name for name in (*_CONNECTION_OPTIONS, *ours)}
    spark_own = {name.lower() for name in _SPARK_OPTIONS}
    for key in opts:
        if key in spelled or key in spark_own:
            continue
        close = difflib.get_close_matches(key, list(spelled), n=1, cutoff=0.6)
        hint = f" Did you mean {spelled[close[0]]!r}?" if close else ""
        valid = ", ".join(sorted(dict.fromkeys(spelled.values()), key=str.lower))
        raise ValueError(f"unknown option {key!r} for a jetstream {what}.{hint} Valid options: {valid} "
                         f"(names are case-insensitive)")


def int_option(opts: Mapping[str, str], key: str, minimum: int) -> int | None:
    raw = opts.get(key.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"option {key} must be an integer >= {minimum}, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"option {key} must be an integer >= {minimum}, got {raw!r}")
    return value


def float_option(opts: Mapping[str, str], key: str, default: float) -> float:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = float("nan")
    if not value > 0 or math.isinf(value):
        raise ValueError(f"option {key} must be a number of seconds > 0, got {raw!r}")
    return value


def _bool_option(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"option {key} must be true or false, got {raw!r}")


def str_option(opts: Mapping[str, str], key: str) -> str | None:
    raw = opts.get(key.lower())
    if raw is None:
        return None
    text = str(raw).strip()
    return text or None


def connection_options(opts: Mapping[str, str]) -> ConnectionOptions:
    """ConnectionOptions from data source options; reads credential files here (the driver)."""
    return ConnectionOptions.from_paths(
        str_option(opts, "servers") or "nats://127.0.0.1:4222",
        name=str_option(opts, "connectionName") or _DEFAULT_NAME,
        timeout=float_option(opts, "timeout", 5.0),
        user=str_option(opts, "user"),
        password=opts.get("password"),
        token=opts.get("token"),
        creds_file=str_option(opts, "credsFile") or str_option(opts, "userCredentials"),
        nkeys_seed_file=str_option(opts, "nkeysSeedFile") or str_option(opts, "nkeysSeed"),
        tls_ca_file=str_option(opts, "tlsCaFile"),
        tls_cert_file=str_option(opts, "tlsCertFile"),
        tls_key_file=str_option(opts, "tlsKeyFile"),
        tls_hostname=str_option(opts, "tlsHostname"),
    )


def _parse_offsets(raw: Any, option: str, stream: str) -> str | int:
    """``"earliest"``, ``"latest"`` or an inclusive/exclusive stream sequence from ``{"<stream>": n}``."""
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    example = json.dumps({stream: 42})
    try:
        parsed = json.loads(text)
    except ValueError:
        raise ValueError(f"option {option} must be 'earliest', 'latest' or JSON like {example}, got {raw!r}") from None
    if not isinstance(parsed, dict) or set(parsed) != {stream}:
        raise ValueError(f"option {option}: the JSON must name exactly the stream being read, as in {example}; "
                         f"got {raw!r}")
    value = parsed[stream]
    if isinstance(value, bool) or not isinstance(value, int) or value < -2 or value == 0:
        raise ValueError(f"option {option}: {stream!r} must map to a stream sequence >= 1 "
                         f"(or -2 for earliest, -1 for latest), got {value!r}")
    if value == -2:
        return "earliest"
    if value == -1:
        return "latest"
    return value


def _parse_timestamp(raw: Any) -> _dt.datetime:
    text = str(raw).strip()
    try:
        return _dt.datetime.fromtimestamp(int(text) / 1000, tz=_dt.timezone.utc)
    except ValueError:
        pass
    except (OverflowError, OSError):
        raise ValueError(f"option startingTimestamp is out of range: {raw!r}") from None
    try:
        ts = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"option startingTimestamp must be milliseconds since the epoch or an ISO 8601 time, "
                         f"got {raw!r}") from None
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=_dt.timezone.utc)


@attrs.frozen(kw_only=True)
class ReadSettings:
    """Everything a read needs, parsed once on the driver; picklable."""

    conn: ConnectionOptions
    domain: str | None
    stream: str
    subject: str | None
    starting: str | int
    ending: str | int
    starting_timestamp: _dt.datetime | None
    min_partitions: int | None
    max_per_trigger: int | None
    fail_on_data_loss: bool
    include_headers: bool

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, streaming: bool) -> "ReadSettings":
        opts = lower_keys(options)
        check_option_names(opts, _READ_OPTIONS, "streaming read" if streaming else "read")
        stream = str_option(opts, "stream")
        if stream is None:
            raise ValueError("option stream is required to read: .option('stream', 'ORDERS')")
        validate_stream_name(stream, "option stream")
        starting = _parse_offsets(opts.get("startingoffsets", "latest" if streaming else "earliest"),
                                  "startingOffsets", stream)
        if starting == "latest" and not streaming:
            raise ValueError("option startingOffsets='latest' is not valid for a batch read (it is always empty); "
                             "use 'earliest' or a sequence")
        if streaming and "endingoffsets" in opts:
            raise ValueError("option endingOffsets is for batch reads only; a streaming read has no end")
        ending = _parse_offsets(opts.get("endingoffsets", "latest"), "endingOffsets", stream)
        if ending == "earliest":
            raise ValueError("option endingOffsets='earliest' is not valid (it is always empty); "
                             "use 'latest' or a sequence")
        if not streaming and "maxmessagespertrigger" in opts:
            raise ValueError("option maxMessagesPerTrigger is for streaming reads only")
        if isinstance(starting, int) and isinstance(ending, int) and ending < starting:
            raise ValueError(f"option endingOffsets (sequence {ending}, exclusive) is before startingOffsets "
                             f"(sequence {starting}, inclusive): the range would be empty")
        ts = opts.get("startingtimestamp")
        return cls(
            conn=connection_options(opts), domain=str_option(opts, "domain"), stream=stream,
            subject=str_option(opts, "subject"), starting=starting, ending=ending,
            starting_timestamp=None if ts is None else _parse_timestamp(ts),
            min_partitions=int_option(opts, "minPartitions", 1),
            max_per_trigger=int_option(opts, "maxMessagesPerTrigger", 1),
            fail_on_data_loss=_bool_option(opts, "failOnDataLoss", True),
            include_headers=_bool_option(opts, "includeHeaders", True),
        )

    def js(self) -> jss.JetStream:
        return jetstream_for(self.conn, domain=self.domain)
