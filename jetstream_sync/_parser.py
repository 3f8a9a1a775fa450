# The NATS wire-protocol parser of the connection: nats-py's ``Parser`` made cheap per message. It
# reads the server's bytes into operations and hands messages of a raw inbox subscription straight
# to their handler; ``_nats`` installs it on its client.
#
# Rule 1: nats-py's semantics are kept: the client sees the same calls with the same arguments in the
#         same order (``_process_msg`` with hdr None and reply b"" when absent, ``_process_err`` with
#         the lower-cased quoted text, ``_process_ping``/``_pong``/``_info``), a ProtocolError for an
#         unknown or malformed line, and ``reset()`` drops whatever is unparsed. A message whose sid
#         has a raw handler is handed over as ``Nats._process_msg`` does, without a coroutine; it is
#         counted in ``nc.stats`` before the parser next awaits the client or returns.
# Rule 2: per message the work is positions in one ``bytes`` object: no regex, no buffer deletions,
#         no copies but the control line (split on whitespace) and the header and payload slices;
#         the rare operations (+OK, -ERR, PING, PONG, INFO) go through nats-py's regexes on their
#         own line.
# Rule 3: loop thread only; no I/O, no JetStream semantics. Only ``_nats`` imports it.
from __future__ import annotations

import json
import logging
from typing import Any

from nats.errors import ProtocolError
from nats.protocol.parser import (AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD, ERR_RE, INFO_RE, OK_RE, PING_RE,
                                  PONG_RE)
from nats.protocol.parser import Parser as _NatsParser

__all__ = ["Parser"]

log = logging.getLogger(__name__)


class Parser(_NatsParser):
    """nats-py's parser, with messages on a raw subscription (``nc._raw_handlers``) handled inline.

    ``buf`` holds the unparsed tail of the stream (``bytes``, empty when
    there is none); ``state`` is AWAITING_MSG_PAYLOAD while that tail is a
    message whose payload has not fully arrived.
    """

    _generation = 0

    def reset(self) -> None:
        super().reset()
        self.buf: bytes = b""  # type: ignore[assignment]
        # The tail and what arrived after it, until ``_need`` bytes are there to resume parsing (a
        # large payload arrives in many reads and is joined once).
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0
        # An await on the client may reset the parser (a reconnect): the parse in progress then stops.
        self._generation += 1

    async def parse(self, data: bytes = b"") -> None:
        """Parse ``data`` (what the connection read) after the unparsed tail of earlier calls."""
        if type(data) is not bytes:
            data = bytes(data)
        if self.buf:
            chunks = self._chunks
            chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return
            data = b"".join(chunks)
            self.buf = b""
            self._chunks = []
        nc = self.nc
        handlers = nc._raw_handlers
        stats = nc.stats
        generation = self._generation
        find = data.find
        end = len(data)
        pos = 0
        count = size_sum = 0  # raw messages not yet added to stats (added before any await and at the end)
        try:
            while pos < end:
                eol = find(b"\r\n", pos)
                if eol < 0:
                    self._keep(data, pos, end - pos + 1, AWAITING_CONTROL_LINE)
                    return
                args = data[pos:eol].split()
                n = len(args)
                op = args[0] if n else b""
                if op == b"MSG":
                    hsize = 0
                    if n == 5:
                        _, subject, sid, reply, size = args
                    elif n == 4:
                        _, subject, sid, size = args
                        reply = b""
                    else:
                        raise ProtocolError("nats: malformed MSG")
                    try:
                        sid = int(sid)
                        size = int(size)
                    except ValueError:
                        raise ProtocolError("nats: malformed MSG") from None
                    if size < 0:
                        raise ProtocolError("nats: malformed MSG")
                elif op == b"HMSG":
                    if n == 6:
                        _, subject, sid, reply, hsize, size = args
                    elif n == 5:
                        _, subject, sid, hsize, size = args
                        reply = b""
                    else:
                        raise ProtocolError("nats: malformed MSG")
                    try:
                        sid = int(sid)
                        hsize = int(hsize)
                        size = int(size)
                    except ValueError:
                        raise ProtocolError("nats: malformed MSG") from None
                    if not 0 <= hsize <= size:
                        raise ProtocolError("nats: malformed MSG")
                else:
                    if count:
                        stats["in_msgs"] += count
                        stats["in_bytes"] += size_sum
                        count = size_sum = 0
                    pos = await self._control(data, pos, eol)
                    if self._generation != generation:
                        return
                    continue
                start = eol + 2
                stop = start + size
                if stop + 2 > end:
                    self._keep(data, pos, stop + 2 - pos, AWAITING_MSG_PAYLOAD)
                    return
                pos = stop + 2  # the CRLF after the payload is skipped, not checked (as nats-py does)
                if hsize:
                    hdr = data[start:start + hsize]
                    payload = data[start + hsize:stop]
                else:
                    hdr = None
                    payload = data[start:stop]
                handler = handlers.get(sid)
                if handler is not None:
                    count += 1
                    size_sum += len(payload)
                    try:
                        handler(subject, reply, payload, hdr or b"")
                    except Exception:  # a handler bug must not kill the reader task
                        log.exception("jetstream_sync: inbox handler failed")
                else:
                    if count:
                        stats["in_msgs"] += count
                        stats["in_bytes"] += size_sum
                        count = size_sum = 0
                    await nc._process_msg(sid, subject, reply, payload, hdr)
                    if self._generation != generation:
                        return
        except BaseException:
            # As nats-py's bytearray would: what was not consumed stays (a reconnect resets it).
            if self._generation == generation and pos < end:
                self._keep(data, pos, end - pos + 1, AWAITING_CONTROL_LINE)
            raise
        finally:
            if count:
                stats["in_msgs"] += count
                stats["in_bytes"] += size_sum
        self.state = AWAITING_CONTROL_LINE

    def _keep(self, data: bytes, pos: int, need: int, state: int) -> None:
        """Keep ``data[pos:]`` for the next call, which resumes once the tail is ``need`` bytes."""
        tail = data[pos:] if pos else data
        self.buf = tail
        self._chunks = [tail]
        self._have = len(tail)
        self._need = need
        self.state = state

    async def _control(self, data: bytes, pos: int, eol: int) -> int:
        """Handle the non-message line ``data[pos:eol]`` as nats-py does; return where the next op starts."""
        nc = self.nc
        line = data[pos:eol + 2]
        nxt = eol + 2
        if OK_RE.match(line):
            return nxt
        m = ERR_RE.match(line)
        if m:
            await nc._process_err(m.groups()[0].decode().lower())
            return nxt
        if PING_RE.match(line):
            await nc._process_ping()
            return nxt
        if PONG_RE.match(line):
            await nc._process_pong()
            return nxt
        m = INFO_RE.match(line)
        if m:
            info: Any = json.loads(m.groups()[0].decode())
            await nc._process_info(info)
            return nxt
        # nats-py raises this only while fewer than MAX_CONTROL_LINE_SIZE bytes are buffered, and
        # otherwise waits for more bytes that cannot make the line known: a complete unknown line is
        # an error however much follows it.
        raise ProtocolError("nats: unknown protocol")
