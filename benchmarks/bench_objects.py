# Charter: object-store put and get throughput of jetstream_sync against nats-py's own object store and
# against the raw limit (the same chunks as a publish_async loop and as an ordered-consumer read of a plain
# stream), same server, same process, rounds interleaved; then the peak RSS growth of a put and a get, each
# in a process of its own. Every case must store or read exactly the expected bytes (checked untimed).
# Public jetstream_sync API only, plus the object store's two window constants (the raw cases use the same).
"""Benchmark the object store: jetstream_sync versus nats-py asyncio and versus the raw limit.

    .venv/bin/python benchmarks/bench_objects.py                  # 256 MiB, file storage, 3 rounds
    .venv/bin/python benchmarks/bench_objects.py --storage memory --size 64
    .venv/bin/python benchmarks/bench_objects.py --server nats://127.0.0.1:4222

Without ``--server`` an embedded nats-server (``jetstream_sync.server.NatsServer``, a private store
directory) is started and stopped. Prints MB/s per case (each round and the median), the ratios the
project targets, and the peak RSS growth of a put and of a get measured in child processes. nats-py's
``get`` grows its result by re-copying it for every chunk (quadratic time), so it reads a smaller object
(``--nats-get-size``); its MB/s is what is compared. Exits 1 if a case fails or stores or reads other
than the expected bytes; BELOW a target is not a failure (the figures are noisy), only a report.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Callable

import nats
from nats.js.api import ObjectStoreConfig as NatsObjectStoreConfig
from nats.js.api import StorageType as NatsStorageType

import jetstream_sync as jss
from jetstream_sync.object_reader import READ_BUFFER_BYTES
from jetstream_sync.object_store import PUT_WINDOW_BYTES
from jetstream_sync.server import NatsServer

from _common import cpu_seconds, fail, library_revision, load, rotated

MiB = 1024 * 1024
#: The store every put case writes into (made fresh, untimed, before each case; deleted after).
PUT_BUCKET = "BENCH_OBJ_PUT"
#: The store the get cases read: "big" (--size), "small" (--nats-get-size) and "tiny" (for warming up),
#: put once before the rounds.
GET_BUCKET = "BENCH_OBJ_GET"
#: Plain streams of the raw cases: one made fresh for each raw put, one filled once for the raw reads.
RAW_PUT_STREAM, RAW_PUT_SUBJECT = "BENCH_OBJ_RAW_PUT", "bench.objects.raw.put"
RAW_GET_STREAM, RAW_GET_SUBJECT = "BENCH_OBJ_RAW_GET", "bench.objects.raw.get"
#: The store the RSS child puts into.
RSS_BUCKET = "BENCH_OBJ_RSS"
#: The object the RSS children warm up with (one chunk: code paths and connections warm, no big buffers).
WARM_SIZE = 64 * 1024
#: The reader's buffer of the streaming get (and of its RSS child), as an application would use one.
READ_INTO = 1 * MiB
#: Upper bound on any one case; a healthy case takes seconds.
CASE_TIMEOUT = 600.0
TARGETS = (
    # (label, numerator case, denominator case, target ratio): higher is better
    ("put()                   vs nats-py obs.put     ", "jss_put", "nats_put", 1.5),
    ("get() + readinto        vs nats-py obs.get     ", "jss_get", "nats_get", 5.0),
    ("get_bytes()             vs nats-py obs.get     ", "jss_get_bytes", "nats_get", 5.0),
    ("put()                   vs raw publish_async   ", "jss_put", "raw_put", 0.8),
    ("get() + readinto        vs raw fetch loop      ", "jss_get", "raw_fetch", 0.8),
    ("get() + readinto        vs raw ordered messages", "jss_get", "raw_messages", 0.8),
)
#: What the digest costs: the raw cases with the SHA-256 of every chunk added (the lowest an object
#: store's put and get can cost), against the raw cases and against put() and get().
SHA_RATIOS = (
    ("raw publish_async + SHA-256 vs raw publish_async   ", "raw_put_sha", "raw_put"),
    ("raw messages + SHA-256      vs raw ordered messages", "raw_messages_sha", "raw_messages"),
    ("put()                       vs raw publish_async + SHA-256", "jss_put", "raw_put_sha"),
    ("get() + readinto            vs raw messages + SHA-256", "jss_get", "raw_messages_sha"),
)
#: The peak RSS growth of put() and get() stays below this many MiB (what the tests ask of 64 MiB objects).
RSS_LIMIT_MIB = 32
RSS_CHILDREN = (
    # (key, label, client, operation)
    ("jss_put", "jss        put(pathlib.Path)", "jss", "put"),
    ("jss_get", f"jss        get() + readinto({READ_INTO // MiB} MiB)", "jss", "get"),
    ("nats_put", "nats-py    obs.put(open file)", "nats", "put"),
    ("nats_get", "nats-py    obs.get()", "nats", "get"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=256, help="object MiB of every case but nats-py's get (default 256)")
    p.add_argument("--nats-get-size", type=int, default=32,
                   help="object MiB of nats-py's get, quadratic in the size (default 32)")
    p.add_argument("--chunk-size", type=int, default=128 * 1024, help="chunk bytes (default 131072, the default)")
    p.add_argument("--storage", choices=("file", "memory"), default="file", help="stream storage (default file)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported (default 3)")
    p.add_argument("--no-rss", action="store_true", help="skip the peak RSS growth children")
    p.add_argument("--server", default=None, help="NATS URL; default: start an embedded nats-server")
    # A child measuring the peak RSS growth of one operation (started by the parent).
    p.add_argument("--rss-child", nargs=4, metavar=("CLIENT", "OP", "BUCKET", "ARG"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name, minimum in (("size", 1), ("nats_get_size", 1), ("chunk_size", 1), ("rounds", 1)):
        if getattr(args, name) < minimum:
            p.error(f"--{name.replace('_', '-')} must be >= {minimum}")
    if args.nats_get_size > args.size:
        p.error("--nats-get-size must be <= --size")
    return args


def nats_digest(data: bytes) -> str:
    """The object digest as every client writes it (``SHA-256=`` and URL-safe base64)."""
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


class Sink:
    """Where nats-py's ``get(writeinto=)`` writes: counts the bytes and drops them."""

    def __init__(self) -> None:
        self.n = 0

    def write(self, data: bytes) -> int:
        self.n += len(data)
        return len(data)


# -- the timed cases ----------------------------------------------------------------------
# Each returns the time it took (wall and this process's CPU) and what it moved; what it stored or
# read is checked by the harness, untimed.

@dataclass
class Timed:
    seconds: float  # wall clock
    cpu: float      # this process's CPU seconds, all threads


class Clock:
    """Started when made; ``stop()`` gives the wall and CPU seconds since."""

    def __init__(self) -> None:
        self.cpu0 = cpu_seconds()
        self.t0 = time.perf_counter()

    def stop(self) -> Timed:
        seconds = time.perf_counter() - self.t0
        return Timed(seconds, cpu_seconds() - self.cpu0)


async def nats_put(njs: Any, data: bytes) -> Timed:
    obs = await njs.object_store(PUT_BUCKET)
    clock = Clock()
    await obs.put("big", data)
    return clock.stop()


def jss_put(js: jss.JetStream, data: bytes, chunk_size: int) -> Timed:
    store = js.object_store(PUT_BUCKET)
    clock = Clock()
    store.put("big", data, chunk_size=chunk_size)
    return clock.stop()


def raw_put(js_window: jss.JetStream, subject: str, data: bytes, chunk_size: int,
            sha: Any = None) -> tuple[Timed, list]:
    """The chunks as a plain publish_async loop through a window of the same bytes as put()'s (and each
    chunk into ``sha`` first, when given: the raw work plus the digest every object store computes)."""
    futures = []
    clock = Clock()
    for i in range(0, len(data), chunk_size):
        chunk = data[i:i + chunk_size]
        if sha is not None:
            sha.update(chunk)
        futures.append(js_window.publish_async(subject, chunk))
    js_window.publish_async_complete(timeout=CASE_TIMEOUT)
    return clock.stop(), futures


async def nats_get(njs: Any, name: str) -> tuple[Timed, bytes]:
    obs = await njs.object_store(GET_BUCKET)
    clock = Clock()
    result = await obs.get(name)
    return clock.stop(), result.data


async def nats_get_writeinto(njs: Any, name: str) -> tuple[Timed, int]:
    obs = await njs.object_store(GET_BUCKET)
    sink = Sink()
    clock = Clock()
    await obs.get(name, writeinto=sink)
    return clock.stop(), sink.n


def jss_get(js: jss.JetStream, name: str) -> tuple[Timed, int]:
    """Stream the object through a 1 MiB buffer (the reader checks size and digest at the end)."""
    store = js.object_store(GET_BUCKET)
    buf = memoryview(bytearray(READ_INTO))
    n = 0
    clock = Clock()
    with store.get(name) as reader:
        while k := reader.readinto(buf):
            n += k
    return clock.stop(), n


def jss_get_bytes(js: jss.JetStream, name: str) -> tuple[Timed, bytes]:
    store = js.object_store(GET_BUCKET)
    clock = Clock()
    data = store.get_bytes(name)
    return clock.stop(), data


def raw_fetch(js: jss.JetStream, chunks: int, batch: int) -> tuple[Timed, int, int]:
    """An ordered consumer's fetch loop over the chunk messages, ``batch`` (the reader's budget) a pull."""
    n = count = 0
    clock = Clock()
    oc = js.ordered_consumer(RAW_GET_STREAM)
    try:
        while count < chunks:
            for msg in oc.fetch(max_messages=min(batch, chunks - count), expires=30.0):
                n += len(msg.data)
                count += 1
        return clock.stop(), n, count
    finally:
        oc.close()


def raw_messages(js: jss.JetStream, chunks: int, sha: Any = None) -> tuple[Timed, int, int]:
    """An ordered consumer's ``messages(max_bytes=)`` with the reader's byte budget, as the reader pulls
    (each chunk into ``sha`` too, when given)."""
    n = count = 0
    clock = Clock()
    oc = js.ordered_consumer(RAW_GET_STREAM)
    try:
        stream = oc.messages(max_bytes=READ_BUFFER_BYTES)
        try:
            while count < chunks:
                data = stream.next(timeout=30.0).data
                if sha is not None:
                    sha.update(data)
                n += len(data)
                count += 1
        finally:
            stream.stop()
        return clock.stop(), n, count
    finally:
        oc.close()


# -- the harness ------------------------------------------------------------------------------

@dataclass
class Case:
    key: str
    label: str
    size: int  # object bytes
    run: Callable[[], Timed]  # checks its own result (untimed) and exits loudly on a wrong one


@dataclass
class RoundResult:
    rate: float    # MB/s (10^6 bytes per second)
    cpu_ms: float  # client process CPU per MiB, all threads, while timed


class Bench:
    """Owns the server, both connections, the asyncio loop (main thread), the data and the prepared objects."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.size = args.size * MiB
        self.nats_size = args.nats_get_size * MiB
        self.chunk = args.chunk_size
        self.chunks = -(-self.size // self.chunk)
        self.window = max(2, PUT_WINDOW_BYTES // self.chunk)
        self.storage = jss.StorageType(args.storage)
        self.data = os.urandom(self.size)
        self.digest = nats_digest(self.data)
        self.stack = contextlib.ExitStack()
        try:
            self._connect()
        except BaseException:
            self.stack.close()
            raise
        big, small = self.size, self.nats_size
        self.cases = [
            Case("nats_put", "nats-py    obs.put(bytes)", big, self.case_nats_put),
            Case("jss_put", "jss        put(bytes)", big, self.case_jss_put),
            Case("raw_put", f"jss raw    publish_async loop w={self.window}", big, self.case_raw_put),
            Case("nats_get", "nats-py    obs.get()", small, self.case_nats_get),
            Case("nats_get_writeinto", "nats-py    obs.get(writeinto=)", big, self.case_nats_get_writeinto),
            Case("jss_get", f"jss        get() + readinto({READ_INTO // MiB} MiB)", big, self.case_jss_get),
            Case("jss_get_bytes", "jss        get_bytes()", big, self.case_jss_get_bytes),
            Case("raw_fetch", f"jss raw    ordered fetch({self.window}) loop", big, self.case_raw_fetch),
            Case("raw_messages", f"jss raw    ordered messages({READ_BUFFER_BYTES // MiB} MiB)", big,
                 self.case_raw_messages),
            # The raw work plus the SHA-256 of every chunk: what no object store can go below.
            Case("raw_put_sha", f"jss raw    publish_async loop w={self.window} + SHA-256", big,
                 self.case_raw_put_sha),
            Case("raw_messages_sha", f"jss raw    ordered messages({READ_BUFFER_BYTES // MiB} MiB) + SHA-256", big,
                 self.case_raw_messages_sha),
        ]

    def _connect(self) -> None:
        args = self.args
        self.loop = asyncio.new_event_loop()
        self.stack.callback(self.loop.close)
        self.url = args.server or self._start_server()
        self.nc = self.loop.run_until_complete(nats.connect(self.url, name="bench-nats-py"))
        self.stack.callback(lambda: self.loop.run_until_complete(self.nc.close()))
        self.njs = self.nc.jetstream()
        self.client = self.stack.enter_context(jss.connect(self.url, name="bench-jss", timeout=60.0))
        self.js = self.client.jetstream()
        self.js_window = self.client.jetstream(max_pending=self.window)

    def _start_server(self) -> str:
        server = NatsServer()
        server.start()
        self.stack.callback(server.stop)
        return server.url

    def aio(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, CASE_TIMEOUT))

    def close(self) -> None:
        for bucket in (PUT_BUCKET, GET_BUCKET, RSS_BUCKET):
            with contextlib.suppress(jss.BucketNotFoundError):
                self.js.delete_object_store(bucket)
        for stream in (RAW_PUT_STREAM, RAW_GET_STREAM):
            with contextlib.suppress(jss.StreamNotFoundError):
                self.js.delete_stream(stream)
        self.stack.close()

    def server_version(self) -> str:
        v = self.nc.connected_server_version
        return f"{v.major}.{v.minor}.{v.patch}" + (f"-{v.prerelease}" if v.prerelease else "")

    # -- setup (untimed) --------------------------------------------------------------------

    def prepare(self) -> None:
        """Put the objects the get cases read and fill the raw read stream, once; both checked."""
        with contextlib.suppress(jss.BucketNotFoundError):
            self.js.delete_object_store(GET_BUCKET)
        store = self.js.create_object_store(GET_BUCKET, storage=self.storage)
        t0 = time.perf_counter()
        info = store.put("big", self.data, chunk_size=self.chunk)
        seconds = time.perf_counter() - t0
        small = store.put("small", self.data[:self.nats_size], chunk_size=self.chunk)
        store.put("tiny", self.data[:WARM_SIZE], chunk_size=self.chunk)
        if info.digest != self.digest or small.digest != nats_digest(self.data[:self.nats_size]):
            fail(f"preparing {GET_BUCKET}: stored digests {info.digest}, {small.digest} are not the data's")
        print(f"prepared: objects big ({self.size / MiB:,.0f} MiB) and small ({self.nats_size / MiB:,.0f} MiB) in "
              f"store {GET_BUCKET} ({self.size / seconds / 1e6:,.0f} MB/s, jss put)", flush=True)
        self.fresh_stream(RAW_GET_STREAM, RAW_GET_SUBJECT)
        _, futures = raw_put(self.js_window, RAW_GET_SUBJECT, self.data, self.chunk)
        self.check_stream(f"preparing {RAW_GET_STREAM}", RAW_GET_STREAM, futures)
        print(f"prepared: {self.chunks:,} chunk messages in plain stream {RAW_GET_STREAM}", flush=True)

    def warm_up(self) -> None:
        """Each client's put and get once, untimed, before the rounds (nats-py's get at full size: its first
        run in a process pays for fresh memory at every step of its growing result)."""
        async def nats_warm() -> None:
            obs = await self.njs.object_store(GET_BUCKET)
            await obs.put("warm", self.data[:WARM_SIZE])
            await obs.get("tiny", writeinto=Sink())
            await obs.get("small")

        self.aio(nats_warm())
        jss_get(self.js, "tiny")
        jss_get_bytes(self.js, "tiny")

    def fresh_stream(self, name: str, subject: str) -> None:
        with contextlib.suppress(jss.StreamNotFoundError):
            self.js.delete_stream(name)
        self.js.create_stream(name=name, subjects=[subject], storage=self.storage)

    def fresh_store(self, nats_made: bool) -> None:
        """An empty PUT_BUCKET, made by the client about to write into it (each its own object store)."""
        with contextlib.suppress(jss.BucketNotFoundError):
            self.js.delete_object_store(PUT_BUCKET)
        if nats_made:
            storage = NatsStorageType.FILE if self.args.storage == "file" else NatsStorageType.MEMORY
            self.aio(self.njs.create_object_store(PUT_BUCKET, config=NatsObjectStoreConfig(storage=storage)))
        else:
            self.js.create_object_store(PUT_BUCKET, storage=self.storage)

    def check_stream(self, what: str, stream: str, futures: list) -> None:
        failed = [f for f in futures if not f.done() or f.exception() is not None]
        state = self.js.stream(stream).info().state
        if failed:
            first = failed[0].exception() if failed[0].done() else "not done"
            fail(f"{what}: {len(failed)} of {len(futures)} publish futures failed or unresolved (first: {first!r})")
        if state.messages != self.chunks:
            fail(f"{what}: stream {stream} holds {state.messages} messages, expected exactly {self.chunks}")

    def check_put(self, what: str) -> None:
        """PUT_BUCKET must hold "big" with the data's size, chunk count and digest, and nothing else."""
        store = self.js.object_store(PUT_BUCKET)
        info = store.info("big")
        state = store.status().stream_info.state
        if (info.size, info.chunks, info.digest) != (self.size, self.chunks, self.digest):
            fail(f"{what}: stored object has size {info.size}, {info.chunks} chunks, digest {info.digest}; expected "
                 f"{self.size}, {self.chunks}, {self.digest}")
        if state.messages != self.chunks + 1:
            fail(f"{what}: store holds {state.messages} messages, expected {self.chunks} chunks and one meta")

    # -- the cases, each checking its outcome (untimed) -------------------------------------------

    def case_nats_put(self) -> Timed:
        self.fresh_store(nats_made=True)
        timed = self.aio(nats_put(self.njs, self.data))
        self.check_put("nats-py obs.put")
        self.js.delete_object_store(PUT_BUCKET)
        return timed

    def case_jss_put(self) -> Timed:
        self.fresh_store(nats_made=False)
        timed = jss_put(self.js, self.data, self.chunk)
        self.check_put("jss put")
        self.js.delete_object_store(PUT_BUCKET)
        return timed

    def case_raw_put(self, sha: Any = None) -> Timed:
        self.fresh_stream(RAW_PUT_STREAM, RAW_PUT_SUBJECT)
        timed, futures = raw_put(self.js_window, RAW_PUT_SUBJECT, self.data, self.chunk, sha)
        self.check_stream("raw publish_async loop", RAW_PUT_STREAM, futures)
        self.js.delete_stream(RAW_PUT_STREAM)
        return timed

    def case_raw_put_sha(self) -> Timed:
        return self.hashed("raw publish_async loop + SHA-256", self.case_raw_put)

    def hashed(self, label: str, case: Callable[[Any], Timed]) -> Timed:
        """``case`` run with a SHA-256 of every chunk; its digest must be the data's."""
        sha = hashlib.sha256()
        timed = case(sha)
        if "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode() != self.digest:
            fail(f"{label}: the digest is not the data's")
        return timed

    def case_nats_get(self) -> Timed:
        timed, data = self.aio(nats_get(self.njs, "small"))
        if data != self.data[:self.nats_size]:
            fail(f"nats-py obs.get: read {len(data)} bytes, not the {self.nats_size} stored")
        return timed

    def case_nats_get_writeinto(self) -> Timed:
        timed, n = self.aio(nats_get_writeinto(self.njs, "big"))
        if n != self.size:
            fail(f"nats-py obs.get(writeinto=): wrote {n} bytes, expected {self.size}")
        return timed

    def case_jss_get(self) -> Timed:
        timed, n = jss_get(self.js, "big")
        if n != self.size:
            fail(f"jss get() + readinto: read {n} bytes, expected {self.size}")
        return timed

    def case_jss_get_bytes(self) -> Timed:
        timed, data = jss_get_bytes(self.js, "big")
        if data != self.data:
            fail(f"jss get_bytes(): read {len(data)} bytes, not the {self.size} stored")
        return timed

    def case_raw_fetch(self) -> Timed:
        timed, n, count = raw_fetch(self.js, self.chunks, self.window)
        if (n, count) != (self.size, self.chunks):
            fail(f"raw fetch loop: read {n} bytes in {count} messages, expected {self.size} in {self.chunks}")
        return timed

    def case_raw_messages(self, sha: Any = None) -> Timed:
        timed, n, count = raw_messages(self.js, self.chunks, sha)
        if (n, count) != (self.size, self.chunks):
            fail(f"raw ordered messages: read {n} bytes in {count} messages, expected {self.size} in {self.chunks}")
        return timed

    def case_raw_messages_sha(self) -> Timed:
        return self.hashed("raw ordered messages + SHA-256", self.case_raw_messages)

    def run_case(self, case: Case) -> RoundResult:
        timed = case.run()
        return RoundResult(case.size / timed.seconds / 1e6, timed.cpu / (case.size / MiB) * 1e3)


def run_rounds(bench: Bench) -> dict[str, list[RoundResult]]:
    """The rounds, case order rotating each round (the get cases read objects prepared before)."""
    results: dict[str, list[RoundResult]] = {c.key: [] for c in bench.cases}
    for r in range(bench.args.rounds):
        for case in rotated(bench.cases, r):
            res = bench.run_case(case)
            results[case.key].append(res)
            print(f"  round {r + 1}: {case.label:<44} {case.size / MiB:>5,.0f} MiB {res.rate:>8,.0f} MB/s "
                  f"{res.cpu_ms:>7.1f} ms CPU/MiB", flush=True)
    return results


# -- peak RSS growth, one operation per child process -------------------------------------------

def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux 4.0+); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_child(url: str, client: str, op: str, bucket: str, arg: str) -> dict:
    """In a fresh process: connect, warm up with a small object, reset the peak, run ``op`` once;
    report the peak RSS above the RSS just before it (bytes) and the seconds it took."""
    if client == "jss":
        conn = jss.connect(url, timeout=60.0)
        store = conn.jetstream().object_store(bucket)
        buf = memoryview(bytearray(READ_INTO))

        def read(name: str) -> int:
            n = 0
            with store.get(name) as reader:
                while k := reader.readinto(buf):
                    n += k
            return n

        def run(warm: bool) -> int:
            if op == "put":
                source = b"w" * WARM_SIZE if warm else pathlib.Path(arg)
                return store.put("warm" if warm else "big", source).size
            return read("tiny" if warm else arg)
        close = conn.close
    else:
        loop = asyncio.new_event_loop()
        nc = loop.run_until_complete(nats.connect(url))
        obs = loop.run_until_complete(nc.jetstream().object_store(bucket))

        def run(warm: bool) -> int:
            if op == "put":
                if warm:
                    return loop.run_until_complete(obs.put("warm", b"w" * WARM_SIZE)).size
                with open(arg, "rb") as f:
                    return loop.run_until_complete(obs.put("big", f)).size
            return len(loop.run_until_complete(obs.get("tiny" if warm else arg)).data)

        def close() -> None:
            loop.run_until_complete(nc.close())
            loop.close()
    try:
        run(True)
        reset = reset_peak()
        before = status_kib("VmRSS" if reset else "VmHWM")
        t0 = time.perf_counter()
        n = run(False)
        seconds = time.perf_counter() - t0
        peak = status_kib("VmHWM")
    finally:
        close()
    return {"growth": (peak - before) * 1024, "bytes": n, "seconds": seconds, "reset": reset}


def measure_rss(bench: Bench, tmp: pathlib.Path) -> dict[str, dict]:
    """Run each RSS child once (after the rounds, so they do not share the cores with a timed case)."""
    path = tmp / "object.bin"
    path.write_bytes(bench.data)
    with contextlib.suppress(jss.BucketNotFoundError):
        bench.js.delete_object_store(RSS_BUCKET)
    out = {}
    for key, label, client, op in RSS_CHILDREN:
        bench.js.create_object_store(RSS_BUCKET, storage=bench.storage)
        bucket, arg = (RSS_BUCKET, str(path)) if op == "put" else (GET_BUCKET, "big" if client == "jss" else "small")
        cmd = [sys.executable, os.path.abspath(__file__), "--server", bench.url, "--rss-child", client, op, bucket, arg]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=CASE_TIMEOUT)
        if proc.returncode != 0:
            fail(f"RSS child {label}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        expected = bench.nats_size if (client, op) == ("nats", "get") else bench.size
        if res["bytes"] != expected:
            fail(f"RSS child {label}: moved {res['bytes']} bytes, expected {expected}")
        out[key] = res
        print(f"  RSS child: {label:<36} {res['bytes'] / MiB:>5,.0f} MiB  peak RSS growth "
              f"{res['growth'] / MiB:>6.1f} MiB", flush=True)
        bench.js.delete_object_store(RSS_BUCKET)
    path.unlink()
    return out


# -- report -------------------------------------------------------------------------------------

def print_header(bench: Bench) -> None:
    a = bench.args
    print(f"bench_objects: {a.size} MiB objects in {bench.chunks:,} chunks of {a.chunk_size:,} B "
          f"(nats-py obs.get: {a.nats_get_size} MiB), {a.storage} storage, {a.rounds} rounds; put window "
          f"{PUT_WINDOW_BYTES // MiB} MiB, read budget {READ_BUFFER_BYTES // MiB} MiB")
    print(f"nats-py {version('nats-py')}, nats-server {bench.server_version()} at {bench.url}"
          f"{'' if a.server else ' (embedded)'}, jetstream_sync {jss.__version__}{library_revision()}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs")
    sha = hashlib.sha256()
    cpu0, t0 = time.thread_time(), time.perf_counter()
    for i in range(0, bench.size, bench.chunk):
        sha.update(bench.data[i:i + bench.chunk])
    cpu, seconds = time.thread_time() - cpu0, time.perf_counter() - t0
    print(f"SHA-256 alone, what put() and get() add to the raw cases: {cpu / (bench.size / MiB) * 1e3:.2f} ms CPU/MiB "
          f"({bench.size / cpu / 1e6:,.0f} MB/s of CPU time; {bench.size / seconds / 1e6:,.0f} MB/s of wall time)")
    print(f"load average at start: {load()}", flush=True)


def print_table(bench: Bench, results: dict[str, list[RoundResult]], rss: dict[str, dict]) -> None:
    rounds = bench.args.rounds
    rate = {k: statistics.median(x.rate for x in v) for k, v in results.items()}
    cpu = {k: statistics.median(x.cpu_ms for x in v) for k, v in results.items()}
    head = (f"{'case':<44} {'MiB':>5} " + " ".join(f"{f'r{i + 1}':>7}" for i in range(rounds))
            + f" {'median':>7} {'CPU ms/MiB':>10}")
    print("\nMB/s (10^6 B/s) per round, median; client process CPU per MiB (all threads), median")
    print(head)
    print("-" * len(head))
    for case in bench.cases:
        cells = " ".join(f"{x.rate:>7,.0f}" for x in results[case.key])
        print(f"{case.label:<44} {case.size / MiB:>5,.0f} {cells} {rate[case.key]:>7,.0f} {cpu[case.key]:>10.1f}")
    if rss:
        print(f"\npeak RSS growth of one operation, each in a process of its own (baseline: "
              f"{'the RSS just before it' if all(r['reset'] for r in rss.values()) else 'the peak before it'})")
        for key, label, _client, _op in RSS_CHILDREN:
            r = rss[key]
            print(f"{label:<44} {r['bytes'] / MiB:>5,.0f} {r['growth'] / MiB:>7.1f} MiB")
    print()
    if bench.nats_size != bench.size:
        print(f"nats-py obs.get() read a {bench.nats_size // MiB} MiB object, the others {bench.size // MiB} MiB: "
              f"its time grows with the square of the size, so at {bench.size // MiB} MiB its MB/s would be lower")
    for label, num, den, target in TARGETS:
        ratio = rate[num] / rate[den]
        verdict = "PASS" if ratio >= target else "BELOW"
        print(f"{label}: {ratio:5.2f}x  (target >= {target}x)  {verdict:<5}  "
              f"client CPU {cpu[num]:.1f} vs {cpu[den]:.1f} ms/MiB")
    for key in ("jss_put", "jss_get"):
        if key in rss:
            growth = rss[key]["growth"] / MiB
            verdict = "PASS" if growth < RSS_LIMIT_MIB else "BELOW"
            label = {k: lab for k, lab, _c, _o in RSS_CHILDREN}[key].split(None, 1)[1]
            print(f"peak RSS growth of {label:<27}: {growth:5.1f} MiB  (target < {RSS_LIMIT_MIB} MiB)  {verdict}")
    print(f"(no target) get() + readinto vs nats-py obs.get(writeinto=): "
          f"{rate['jss_get'] / rate['nats_get_writeinto']:5.2f}x")
    for label, num, den in SHA_RATIOS:
        print(f"(no target) {label}: {rate[num] / rate[den]:5.2f}x  client CPU {cpu[num]:.1f} vs {cpu[den]:.1f} ms/MiB")
    print(f"load average at end: {load()}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rss_child:
        print(json.dumps(rss_child(args.server, *args.rss_child)))
        return 0
    bench = Bench(args)
    try:
        print_header(bench)
        bench.prepare()
        bench.warm_up()
        results = run_rounds(bench)
        rss = {}
        if not args.no_rss:
            with tempfile.TemporaryDirectory(prefix="bench-objects-") as tmp:
                rss = measure_rss(bench, pathlib.Path(tmp))
        print_table(bench, results, rss)
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
