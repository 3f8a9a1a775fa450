# Reading an object's bytes: ``ObjectReader``, a file-like reader fed by an ordered consumer on the
# object's chunk subject, its buffering bounded by the pull's byte budget (never by the object).
#
# Rule 1: the digest and the size are checked as the last chunk arrives, before its bytes are handed
#         out: a reader that ran to the end without ``DigestMismatchError`` read exactly what was stored.
# Rule 2: a reader closed early (or left by an exception) stops its consumer, which deletes the
#         server-side consumer: nothing is left behind.
# Rule 3: user-thread only; waits are the message stream's (wakeful, Ctrl-C stops it).
from __future__ import annotations

import hashlib
import io
from typing import Any, Callable

from . import errors
from .object_meta import ObjectInfo, chunk_subject, digest_of

__all__ = ["READ_BUFFER_BYTES", "REPLICA_SETTLE", "ObjectReader"]

#: At most this many bytes of chunks wait in the reader's buffer (the ordered pull's byte budget).
READ_BUFFER_BYTES = 8 * 1024 * 1024
#: Seconds a reader of a replicated store waits for chunks its consumer's node has not stored yet (a
#: replica catching up after a restart) before it calls the object short.
REPLICA_SETTLE = 10.0


class ObjectReader(io.RawIOBase):
    """An object's bytes as a binary file (``store.get(name)``): ``read``, ``readinto``, ``readall``,
    ``readline`` and iteration as ``io.RawIOBase`` gives them, a context manager; ``info`` is the
    object's :class:`ObjectInfo`. Not seekable. Use from one thread.

    Each read blocks until the next chunk is there, at most ``timeout`` seconds per chunk
    (``TimeoutError``; ``ObjectNotFoundError`` when the object was deleted or replaced meanwhile). Raises ``DigestMismatchError`` when the bytes read do not match the stored
    digest or size (before the last chunk is handed out). Closing it early deletes its consumer.
    """

    def __init__(self, js: Any, stream: str, info: ObjectInfo, timeout: float | None,
                 store_info: Callable[[], ObjectInfo | None] = lambda: None, settle: float = 0.0) -> None:
        super().__init__()
        self.info = info
        #: The object's info as the store has it now (None: gone), asked when a chunk is late.
        self._store_info = store_info
        self._timeout = timeout
        self._settle = settle
        #: The chunk after the one being handed out, taken early to tell a lagging replica from a short object.
        self._ahead: Any = None
        self._left = info.chunks
        self._chunk = memoryview(b"")
        self._hash = hashlib.sha256()
        self._read = 0
        self._msgs: Any = None
        self._oc: Any = None
        if info.chunks:
            self._oc = js.ordered_consumer(stream, filter_subject=chunk_subject(info.bucket, info.nuid))
            self._msgs = self._oc.messages(max_bytes=READ_BUFFER_BYTES)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` with the next bytes (at most one chunk's worth); 0 at the end of the object."""
        if self.closed:
            raise ValueError("I/O operation on a closed ObjectReader")
        view = memoryview(buffer).cast("B")
        if not view.nbytes:
            return 0
        chunk = self._chunk
        if not chunk:
            if not self._left:
                return 0
            chunk = self._chunk = memoryview(self._next_chunk())
        n = min(view.nbytes, chunk.nbytes)
        view[:n] = chunk[:n]
        self._chunk = chunk[n:]
        return n

    def _next_chunk(self) -> bytes:
        msg, self._ahead = self._ahead, None
        if msg is None:
            msg = self._receive(self._timeout)
        data = msg.data
        self._hash.update(data)
        self._read += len(data)
        self._left -= 1
        if not self._left:
            self._finish()
        elif not msg.metadata_numbers()[2]:
            # Nothing more is stored for this object on the consumer's node, and its meta promised more
            # chunks. On a replicated store that node may be a replica still storing them: wait a little.
            try:
                if self._settle <= 0:
                    raise errors.TimeoutError("no settle time")
                wait = self._settle if self._timeout is None else min(self._settle, self._timeout)
                self._ahead = self._receive(wait)
            except errors.TimeoutError:
                self._stop()
                info = self.info
                raise errors.DigestMismatchError(
                    f"object {info.name!r} of store {info.bucket!r}: its chunks end after "
                    f"{info.chunks - self._left} of {info.chunks} ({self._read} of {info.size} bytes)",
                    info.digest, digest_of(self._hash)) from None
        return data

    def _receive(self, timeout: float | None) -> Any:
        try:
            return self._msgs.next(timeout)
        except StopIteration:
            raise errors.JetStreamError(f"reading object {self.info.name!r}: the read was stopped") from None
        except errors.TimeoutError:
            self._replaced()
            raise

    def _replaced(self) -> None:
        """A chunk did not come in time: if the object was replaced or deleted meanwhile (its chunks
        purged), say that instead of the timeout."""
        info = self.info
        try:
            now = self._store_info()
        except errors.JetStreamError:
            return  # the timeout says enough
        if now is None or now.deleted or now.nuid != info.nuid:
            self._stop()
            what = "deleted" if now is None or now.deleted else "replaced by a new version"
            raise errors.ObjectNotFoundError(info.bucket, info.name, f"object {info.name!r} of store "
                                             f"{info.bucket!r} was {what} while it was read")

    def _finish(self) -> None:
        """The last chunk arrived: stop the consumer and check size and digest."""
        self._stop()
        info = self.info
        actual = digest_of(self._hash)
        if self._read != info.size:
            raise errors.DigestMismatchError(
                f"object {info.name!r} of store {info.bucket!r}: read {self._read} bytes in {info.chunks} chunks, "
                f"its meta says {info.size}", info.digest, actual)
        if info.digest and actual != info.digest:
            raise errors.DigestMismatchError(
                f"object {info.name!r} of store {info.bucket!r}: the bytes read hash to {actual}, its meta says "
                f"{info.digest}", info.digest, actual)

    def _stop(self) -> None:
        msgs, self._msgs = self._msgs, None
        if msgs is not None:
            msgs.stop()

    def readall(self) -> bytes:
        """Every byte left, in one ``bytes`` (the chunks joined once at the end: one copy of the object)."""
        if self.closed:
            raise ValueError("I/O operation on a closed ObjectReader")
        parts = [self._chunk.tobytes()] if self._chunk else []
        self._chunk = memoryview(b"")
        while self._left:
            parts.append(self._next_chunk())
        return b"".join(parts)

    def close(self) -> None:
        """Stop reading; a consumer still running is deleted (without waiting for the server). Idempotent."""
        if not self.closed:
            self._stop()
        super().close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._read} of {self.info.size} bytes read"
        return f"<ObjectReader {self.info.bucket}/{self.info.name} {state}>"
