# Charter: the chaos soak, not a benchmark: every feature at once against a 3-node cluster while nodes
# are killed, frozen and restarted and leaders step down, then a check of every message. Publishers
# (sync and async, with message ids), a pull consume(workers=4), a push queue group of two, an ordered
# consumer, CAS increments on a key-value key with a watcher, an object put/get loop and (in a child
# process) a Spark streaming copy all run for --duration seconds; a chaos thread injects one fault at
# a time and waits for the cluster to settle before the next. Exits 1 if any check fails. Public jss
# API and jetstream_sync.server only; the soak's own bookkeeping is preallocated arrays, so the RSS
# it reports is the clients'.
"""Chaos soak: every jetstream_sync feature at once on a 3-node cluster with faults, then check everything.

    .venv/bin/python benchmarks/soak_chaos.py --duration 300       # 5 minutes of load and faults
    .venv/bin/python benchmarks/soak_chaos.py --duration 1800      # the long run: 30 minutes
    .venv/bin/python benchmarks/soak_chaos.py --duration 75 --chaos-interval 6:10 --seed 29   # the suite's run
    .venv/bin/python benchmarks/soak_chaos.py --duration 75 --no-spark --log soak.log

Workloads (all at once, every client given all three node URLs, reconnecting for ever, with a retry
policy sized for leader elections):
  publishers   one blocking js.publish() thread and one publish_async() thread, each message with a
               msg_id, re-sent under the same id until a PubAck names its sequence (R3 file stream SOAK)
  pull         a durable pull consumer read by consume(handler, workers=4); the handler double_acks
  push         a queue group of two js.subscribe(queue=...) members on two clients; manual double_ack
  ordered      js.ordered_consumer(SOAK).consume(): every stream sequence once, in order
  kv           two writers doing CAS increments (get, update(last=revision)) of one key, and a watcher
  objects      put / get_bytes of objects of 1 KiB - 300 KiB under 16 names in rotation, digests compared
  spark        a child process: spark.readStream.format("jetstream") from SOAK, writeStream into COPY

Faults (a chaos thread, one at a time, every --chaos-interval seconds, the cluster settled in between):
SIGKILL of a node then its restart, SIGSTOP of a node for 2-5 s then SIGCONT, and a stream leader plus
a consumer leader step-down. The fault kinds come round in shuffled rounds, so each kind occurs once
in every three faults; a run too short for the first round goes on past --duration until it is done.

At the end it checks, printing each check as it goes:
  - every acknowledged publish stored exactly once, at its PubAck's sequence;
  - every stored message handled at least once by the pull and by the push consumers, and
    confirmed-acked at most once by each (a second confirmed ack is allowed only for a message whose
    first ack came ack_wait or more after it was stored: the server may have redelivered it);
  - the ordered consumer saw every sequence once and in order;
  - the KV counter equals the successful CAS updates; the watcher's last value equals the bucket's and
    its values only rise (a watcher away for a reset longer than the key's history lasts resumes at
    the oldest revision kept: the updates it never saw are counted, not failed);
  - every object read back with its digest;
  - the Spark copy holds every message once, with the same payload;
  - no consumer left on any stream but the two durables, no subscription left on any connection but
    the reply inboxes it had before;
  - client RSS flat after warm-up (growth below --max-growth-mb).
It reports, per reader, the longest time it stood still while behind (messages stored for it, nothing
handled). The last line sums the run up: the faults, the messages moved, `lost N` and `duplicates N`.
"""
from __future__ import annotations

import argparse
import array
import collections
import gc
import hashlib
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from typing import Any, Callable

import jetstream_sync as jss
from jetstream_sync.server import NatsCluster

SOAK = "SOAK"
COPY = "COPY"
BUCKET = "soak"
STORE = "soakobj"
KEY = "counter"
PULL = "pull"
QUEUE = "soakq"
COPY_SUBJECT = "copy.m"
#: Revisions the bucket keeps of its key: the most a bucket may (resolving an unconfirmed CAS reads them).
KV_HISTORY = 64
OBJECT_NAMES = [f"obj-{k:02d}" for k in range(16)]
#: The kinds of fault, each injected once in every round of three (in a shuffled order).
FAULTS = ("kill", "freeze", "step-down")
#: The connections whose subscriptions are readers'; they must be gone at the end.
READERS = ("pull", "push-1", "push-2", "ordered", "kv-watch")

#: An election after a SIGKILL takes seconds; every attempt waits at most JS_TIMEOUT.
RETRY = jss.RetryPolicy(attempts=40, initial_backoff=0.05, max_backoff=0.5)
JS_TIMEOUT = 2.0
DOUBLE_ACK_TRIES = 2
#: Errors a call may meet while a node is down, frozen or electing: try again.
TRANSIENT = (jss.TimeoutError, jss.NoRespondersError, jss.NotConnectedError)


def rss_bytes() -> int:
    """This process's resident set size, from /proc/self/status (VmRSS, in kB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


#: What the soak prints goes to this logger too: with --log, the faults sit among the library's records.
log = logging.getLogger("soak_chaos")


def say(text: str) -> None:
    print(text, flush=True)
    log.info("%s", text)


def payload(i: int, size: int) -> bytes:
    head = b"m%d|" % i
    return head + b"x" * max(0, size - len(head))


def index_of(data: bytes) -> int:
    return int(data[1:data.index(b"|")])


def http_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def until(stop: threading.Event, deadline: float, step: float, fn: Callable[[], bool]) -> bool:
    """Call ``fn`` every ``step`` s until it is true (True), ``deadline`` passes or ``stop`` is set (False)."""
    while True:
        try:
            if fn():
                return True
        except jss.JetStreamError:
            pass
        if time.monotonic() >= deadline or stop.wait(step):
            return False


class Errors:
    """Errors met and retried, by kind: how many, and when the first and the last came (run seconds)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.lock = threading.Lock()
        self.seen: dict[str, list[float]] = {}

    def add(self, kind: str) -> None:
        t = time.monotonic() - self.t0
        with self.lock:
            entry = self.seen.setdefault(kind, [0, t, t])
            entry[0] += 1
            entry[2] = t

    def __bool__(self) -> bool:
        return bool(self.seen)

    def __str__(self) -> str:
        with self.lock:
            return ", ".join(f"{kind} x{int(n)} ({first:.0f}-{last:.0f} s)" for kind, (n, first, last) in
                             sorted(self.seen.items()))


class Ledger:
    """Everything the workloads saw, per message index, in arrays allocated once (no per-message objects)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lock = threading.Lock()
        self.next_index = 0
        self.sent = bytearray(capacity)                   # 1: published at least once
        self.acked_seq = array.array("q", bytes(8 * capacity))  # the PubAck's stream sequence, 0: none
        self.acked = 0
        self.max_seq = 0
        self.duplicate_pubacks = 0                        # a re-sent id the server had stored already

    def allocate(self) -> int | None:
        with self.lock:
            if self.next_index >= self.capacity:
                return None
            i = self.next_index
            self.next_index += 1
            self.sent[i] = 1
            return i

    def record_ack(self, i: int, ack: Any) -> None:
        with self.lock:
            if self.acked_seq[i] == 0:
                self.acked += 1
            self.acked_seq[i] = ack.seq
            self.max_seq = max(self.max_seq, ack.seq)
            self.duplicate_pubacks += bool(ack.duplicate)


class Reader:
    """One reader's tally: handlings and confirmed acks per message, and when it last handled anything."""

    def __init__(self, name: str, capacity: int, ack_wait: float) -> None:
        self.name = name
        self.ack_wait = ack_wait
        self.lock = threading.Lock()
        self.handled = bytearray(capacity)     # handlings per message (saturating at 255)
        self.acks = bytearray(capacity)        # confirmed acks (double_ack answered) per message
        self.late = bytearray(capacity)        # 1: the first confirmed ack came ack_wait or more after storing
        self.distinct = 0
        self.deliveries = 0
        self.ack_failures = 0
        self.twice_acked: list[int] = []       # a second confirmed ack the first one should have prevented
        self.warnings: collections.Counter = collections.Counter()
        self.last_handled = time.monotonic()
        self.behind_since: float | None = None
        self.max_stall = 0.0
        self.max_stall_at = 0.0  # time.monotonic() when the longest stand-still ended (or was last seen)

    def handle(self, msg: jss.Msg) -> None:
        """The handler of the pull and push readers (a worker thread): count, then double_ack."""
        i = index_of(msg.data)
        with self.lock:
            self.deliveries += 1
            if self.handled[i] == 0:
                self.distinct += 1
            if self.handled[i] < 255:
                self.handled[i] += 1
            self.last_handled = time.monotonic()
        for _ in range(DOUBLE_ACK_TRIES):
            try:
                msg.double_ack(timeout=JS_TIMEOUT)
            except TRANSIENT:
                with self.lock:
                    self.ack_failures += 1
                continue  # unacked after the last try: the server redelivers it after ack_wait
            held = time.time() - msg.metadata.timestamp_ns / 1e9
            with self.lock:
                if self.acks[i] == 0:
                    self.late[i] = held >= self.ack_wait
                elif not self.late[i]:
                    self.twice_acked.append(i)
                if self.acks[i] < 255:
                    self.acks[i] += 1
            return

    def warn(self, exc: BaseException) -> None:
        with self.lock:
            self.warnings[type(exc).__name__] += 1

    def watch_stall(self, now: float, behind: bool) -> None:
        """Track the longest time this reader stood still while behind (the monitor thread, every tick)."""
        with self.lock:
            if not behind:
                self.behind_since = None
                return
            if self.behind_since is None:
                self.behind_since = now
            stall = now - max(self.last_handled, self.behind_since)
            if stall > self.max_stall:
                self.max_stall = stall
                self.max_stall_at = now


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.t0 = time.monotonic()
        self.stop_load = threading.Event()      # publishers, KV writers, objects: stop starting new work
        self.stop_chaos = threading.Event()
        self.stop_monitor = threading.Event()
        capacity = int(args.rate * (args.duration + 120) * 1.25) + 10_000
        self.ledger = Ledger(capacity)
        self.errors = Errors(self.t0)
        self.pull = Reader("pull", capacity, args.ack_wait)
        self.push = Reader("push", capacity, args.ack_wait)
        self.ordered = Reader("ordered", 1, args.ack_wait)
        self.watcher = Reader("watcher", 1, args.ack_wait)
        self.copy = Reader("spark", 1, args.ack_wait)
        self.failures: list[str] = []
        self.ran = 0.0                      # seconds of load, once it stopped
        self.lost: int | None = None        # set by the checks
        self.duplicates: int | None = None
        self.threads: list[threading.Thread] = []
        self.clients: dict[str, jss.Client] = {}
        self.faults: collections.Counter = collections.Counter()
        self.fault_log: list[str] = []
        self.settle_times: list[float] = []
        self.rss: list[tuple[float, int]] = []
        self.warm_up = min(15.0, max(5.0, args.duration / 5))
        # ordered
        self.ordered_cursor = 0
        self.ordered_errors: list[str] = []
        # kv
        self.kv_ok = 0
        self.kv_conflicts = 0
        self.kv_ambiguous = 0
        self.kv_unresolved = 0
        self.kv_history_behind = 0     # leader reads that did not show yet the revision a failed CAS proved
        self.kv_max_value = 0
        self.watch_last = 0
        self.watch_seen = 0
        self.watch_problems: list[str] = []
        self.watch_skipped = 0         # updates the watcher never saw: the key's history had moved past them
        self.watch_skips = 0
        # objects
        self.objects_put = 0
        self.objects_read = 0
        self.object_bytes = 0
        self.object_retries = 0
        self.object_not_found = 0      # a get right after a successful put that found no object
        self.object_digests: dict[str, str] = {}
        self.object_older: dict[str, set[str]] = {}  # the digests of the versions each name had before
        self.object_stale = 0          # a get right after a put that returned the version it replaced
        self.object_mismatch: list[str] = []
        # spark
        self.copy_count = 0
        self.spark_proc: subprocess.Popen | None = None
        self.spark_report: dict = {}
        self.spark_ready = threading.Event()
        self.spark_done = threading.Event()

    # -- set-up ---------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.t0

    def connect(self, role: str, k: int) -> jss.Client:
        urls = self.cluster.urls
        urls = urls[k % 3:] + urls[:k % 3]  # first choices spread over the three nodes
        client = jss.connect(urls, name=f"soak-{role}", timeout=JS_TIMEOUT, reconnect_time_wait=0.25,
                             max_reconnect_attempts=-1, dont_randomize=True)
        self.clients[role] = client
        return client

    def js(self, client: jss.Client) -> jss.JetStream:
        return client.jetstream(timeout=JS_TIMEOUT, retry=RETRY)

    def set_up(self) -> None:
        a = self.args
        self.admin = self.connect("admin", 0)
        self.ajs = self.js(self.admin)
        self.ajs.create_stream(name=SOAK, subjects=["soak.>"], storage="file", num_replicas=3,
                               duplicate_window=300.0)
        self.ajs.create_stream(name=COPY, subjects=["copy.>"], storage="file", num_replicas=3,
                               duplicate_window=300.0)
        self.ajs.create_key_value(BUCKET, history=KV_HISTORY, replicas=3)
        self.ajs.create_object_store(STORE, replicas=3)
        self.ajs.create_consumer(SOAK, durable_name=PULL, ack_policy="explicit", ack_wait=a.ack_wait)
        self.kv_admin = self.ajs.key_value(BUCKET)
        self.kv_admin.create(KEY, b"0")
        # The admin connection makes now every reply inbox it uses later: step-down requests, direct gets,
        # object reads (so the end's subscriptions compare with what it had before the readers started).
        self.admin.request("$JS.API.INFO", b"", timeout=5.0)
        self.bucket_value()
        store = self.ajs.object_store(STORE)
        store.put("prime", b"p")
        store.get_bytes("prime")
        say(f"[{self.now():6.1f}s] streams {SOAK}, {COPY}, KV_{BUCKET}, OBJ_{STORE} (R3, file) and consumer "
            f"{PULL!r} created")

    # -- publishers -----------------------------------------------------------------------------

    def publish_sync(self) -> None:
        js = self.js(self.clients["pub-sync"])
        size, period = self.args.size, 2.0 / self.args.rate
        due = time.monotonic()
        while not self.stop_load.is_set():
            i = self.ledger.allocate()
            if i is None:
                break
            while True:  # the same id until a PubAck: the server stores it once
                try:
                    self.ledger.record_ack(i, js.publish("soak.sync", payload(i, size), msg_id=f"m{i}"))
                    break
                except jss.JetStreamError as exc:
                    self.errors.add(f"publish: {type(exc).__name__}")
                    if self.stop_load.is_set() and time.monotonic() > self.give_up_at:
                        break
                    time.sleep(0.05)  # an error the retry policy does not retry comes back at once
            due += period
            pause = due - time.monotonic()
            if pause > 0:
                self.stop_load.wait(pause)
            else:
                due = time.monotonic()

    def publish_async(self) -> None:
        js = self.js(self.clients["pub-async"])
        size = self.args.size
        batch = max(1, int(self.args.rate / 2 / 10))  # ten batches a second
        retry: list[int] = []
        due = time.monotonic()
        while True:
            stopping = self.stop_load.is_set()
            if stopping and (not retry or time.monotonic() > self.give_up_at):
                break
            ids = retry
            retry = []
            while not stopping and len(ids) < batch:
                i = self.ledger.allocate()
                if i is None:
                    break
                ids.append(i)
            futures = []
            for i in ids:
                try:
                    futures.append((i, js.publish_async("soak.async", payload(i, size), msg_id=f"m{i}")))
                except jss.JetStreamError as exc:
                    self.errors.add(f"publish_async: {type(exc).__name__}")
                    retry.append(i)
            for i, future in futures:
                try:
                    self.ledger.record_ack(i, future.result(timeout=3 * JS_TIMEOUT + 5))
                except Exception as exc:  # noqa: BLE001 - every failure is re-sent under the same id
                    self.errors.add(f"publish_async future: {type(exc).__name__}")
                    retry.append(i)
            due += 0.1
            pause = due - time.monotonic()
            if pause > 0:
                self.stop_load.wait(pause if not retry else min(pause, 0.1))
            else:
                due = time.monotonic()

    # -- readers ----------------------------------------------------------------------------------

    def start_pull(self) -> None:
        js = self.js(self.clients["pull"])
        self.pull_handle = js.consumer(SOAK, PULL).consume(self.pull.handle, workers=4,
                                                            error_handler=self.pull.warn)

    def start_push(self) -> None:
        self.push_subs = []
        for k in (1, 2):
            js = self.js(self.clients[f"push-{k}"])
            self.push_subs.append(js.subscribe("soak.>", queue=QUEUE, handler=self.push.handle, stream=SOAK,
                                               manual_ack=True, config={"ack_wait": self.args.ack_wait},
                                               workers=2, error_handler=self.push.warn))

    def start_ordered(self) -> None:
        js = self.js(self.clients["ordered"])
        self.ordered_consumer = js.ordered_consumer(SOAK)

        def handle(msg: jss.Msg) -> None:
            seq = msg.metadata.sequence.stream
            with self.ordered.lock:
                if seq != self.ordered_cursor + 1 and len(self.ordered_errors) < 20:
                    self.ordered_errors.append(f"sequence {seq} after {self.ordered_cursor}")
                if seq > self.ordered_cursor:
                    self.ordered_cursor = seq
                self.ordered.deliveries += 1
                self.ordered.last_handled = time.monotonic()

        self.ordered_handle = self.ordered_consumer.consume(handle, error_handler=self.ordered.warn)

    # -- key-value ---------------------------------------------------------------------------------

    def kv_writer(self, k: int) -> None:
        kv = self.js(self.clients[f"kv-{k}"]).key_value(BUCKET)
        attempt = 0
        while not self.stop_load.is_set():
            try:
                entry = kv.get(KEY)
            except jss.JetStreamError as exc:
                self.errors.add(f"kv.get: {type(exc).__name__}")
                self.stop_load.wait(0.1)
                continue
            value = int(entry.value.split(b":")[0]) + 1
            mine: set[bytes] = set()
            # Every try is a CAS against the same revision, so at most one of them (or the other
            # writer's) lands; once the key moved past it, a try still in flight can never land.
            while True:
                attempt += 1
                token = f"{value}:{k}:{attempt}".encode()
                mine.add(token)
                try:
                    kv.update(KEY, token, last=entry.revision)
                    outcome = "ok"
                except jss.KeyRevisionMismatchError:
                    outcome = "moved"
                except TRANSIENT as exc:
                    self.errors.add(f"kv.update: {type(exc).__name__}")
                    if isinstance(exc, jss.TimeoutError):  # it may have landed: the history tells below
                        self.kv_ambiguous += 1
                    self.stop_load.wait(0.05)
                    continue
                break
            if outcome == "moved" and len(mine) > 1:
                outcome = self.kv_resolve(kv, entry.revision, mine)
            with self.watcher.lock:  # the KV figures share the watcher's lock
                if outcome == "ok":
                    self.kv_ok += 1
                    self.kv_max_value = max(self.kv_max_value, value)
                elif outcome == "moved":
                    self.kv_conflicts += 1
                else:
                    self.kv_unresolved += 1
            self.stop_load.wait(0.05)

    def kv_resolve(self, kv: Any, last: int, mine: set[bytes]) -> str:
        """Whose write followed revision ``last``: "ok" (one of ``mine``), "moved" (the other writer's).
        Asked of the bucket stream's leader (a message get by sequence, not a direct get: a replica behind
        would not show it yet, and by the time it did the key's history might have dropped it): the first
        message on the key after ``last``, while ``last`` itself is still kept (the history drops the
        oldest first). A leader that does not show it yet (the failed CAS proved it exists) is counted and
        asked again."""
        stream, subject = f"KV_{BUCKET}", f"$KV.{BUCKET}.{KEY}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.ajs._jsapi.msg_get(stream, seq=last)  # still kept: nothing after it was dropped
            except jss.MessageNotFoundError:
                return "unresolved"  # dropped by the key's history: what followed it cannot be told
            except jss.JetStreamError:
                time.sleep(0.2)
                continue
            try:
                after = self.ajs._jsapi.msg_get(stream, seq=last + 1, next_by_subj=subject)
            except jss.MessageNotFoundError:
                with self.watcher.lock:
                    self.kv_history_behind += 1
                time.sleep(0.2)
                continue
            except jss.JetStreamError:
                time.sleep(0.2)
                continue
            return "ok" if after.data in mine else "moved"
        return "unresolved"

    def start_watcher(self) -> None:
        kv = self.js(self.clients["kv-watch"]).key_value(BUCKET)

        last_revision = 0

        def handle(entry: Any) -> None:
            nonlocal last_revision
            value = int(entry.value.split(b":")[0])
            with self.watcher.lock:
                self.watch_seen += 1
                if self.watch_seen > 1 and value <= self.watch_last and len(self.watch_problems) < 20:
                    self.watch_problems.append(f"{value} (revision {entry.revision}) after {self.watch_last} "
                                               f"(revision {last_revision}) at {self.now():.1f} s")
                elif self.watch_seen > 1 and value > self.watch_last + 1:
                    # Gone from the bucket (it keeps KV_HISTORY revisions of a key) before the watcher,
                    # away for a reset, could read them: a watcher resumes at the oldest one kept.
                    self.watch_skipped += value - self.watch_last - 1
                    self.watch_skips += 1
                self.watch_last = max(self.watch_last, value)
                last_revision = entry.revision
                self.watcher.last_handled = time.monotonic()

        self.key_watcher = kv.watch(KEY).consume(handle, error_handler=self.watcher.warn)

    # -- objects -------------------------------------------------------------------------------------

    def object_loop(self) -> None:
        store = self.js(self.clients["objects"]).object_store(STORE)
        rng = random.Random(self.args.seed + 1)
        k = 0
        while not self.stop_load.is_set():
            name = OBJECT_NAMES[k % len(OBJECT_NAMES)]
            k += 1
            data = rng.randbytes(rng.randint(1024, 300 * 1024))
            digest = hashlib.sha256(data).hexdigest()
            if not self.retry_object(lambda: store.put(name, data), f"put {name}"):
                continue
            before = self.object_digests.get(name)
            if before is not None:
                self.object_older.setdefault(name, set()).add(before)
            self.object_digests[name] = digest  # the same bytes re-put until one put succeeded
            self.objects_put += 1
            self.object_bytes += len(data)
            got: list[bytes] = []
            if self.retry_object(lambda: got.append(store.get_bytes(name)), f"get {name}"):
                self.objects_read += 1
                read = hashlib.sha256(got[-1]).hexdigest()
                if read in self.object_older.get(name, ()):
                    # A version this put replaced, whole and with its own digest: the meta came from a
                    # replica that is behind (any replica answers a direct get).
                    self.object_stale += 1
                    self.errors.add("objects.get: an older version")
                elif read != digest:
                    self.object_mismatch.append(f"{name} read back during the run: bytes of no version put")
            self.stop_load.wait(0.3)

    def retry_object(self, call: Callable[[], Any], what: str) -> bool:
        deadline = time.monotonic() + 120
        while True:
            try:
                call()
                return True
            except jss.DigestMismatchError as exc:
                self.object_mismatch.append(f"{what}: {exc}")
                return False
            except jss.JetStreamError as exc:
                self.errors.add(f"objects.{what.split()[0]}: {type(exc).__name__}")
                self.object_retries += 1
                self.object_not_found += isinstance(exc, jss.ObjectNotFoundError)
                if time.monotonic() > deadline:
                    self.failures.append(f"objects: {what} failed for 120 s, last {exc!r}")
                    return False
                time.sleep(0.2)

    # -- spark (a child process) -------------------------------------------------------------------------

    def start_spark(self) -> None:
        self.spark_dir = tempfile.mkdtemp(prefix="soak-spark-")
        self.spark_log = open(os.path.join(self.spark_dir, "spark.stderr"), "w")
        cmd = [sys.executable, os.path.abspath(__file__), "--spark-child", ",".join(self.cluster.urls),
               "--spark-dir", self.spark_dir]
        self.spark_proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=self.spark_log, text=True, bufsize=1)
        threading.Thread(target=self.read_spark, name="soak-spark-out", daemon=True).start()

    def read_spark(self) -> None:
        assert self.spark_proc is not None and self.spark_proc.stdout is not None
        for line in self.spark_proc.stdout:
            line = line.rstrip("\n")
            if line.startswith("SPARK READY"):
                self.spark_ready.set()
            elif line.startswith("SPARK DONE "):
                self.spark_report = json.loads(line[len("SPARK DONE "):])
                continue
            say(f"[{self.now():6.1f}s] spark: {line}")
        self.spark_done.set()
        self.spark_ready.set()

    def stop_spark(self) -> None:
        proc = self.spark_proc
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.failures.append("spark: the child did not stop within 120 s")
        self.spark_done.wait(10)
        self.spark_log.close()

    # -- chaos ----------------------------------------------------------------------------------------------

    def chaos(self) -> None:
        rng = random.Random(self.args.seed)
        low, high = self.args.chaos_interval
        kinds: list[str] = []
        if self.stop_chaos.wait(self.warm_up):
            return
        while True:
            if self.stop_chaos.wait(rng.uniform(low, high)):
                return
            if not kinds:
                kinds = list(FAULTS)
                rng.shuffle(kinds)
            kind = kinds.pop()
            started = time.monotonic()
            if self.stop_chaos.is_set():
                return
            node = rng.randrange(3)
            try:
                detail = getattr(self, "fault_" + kind.replace("-", "_"))(node, rng)
            except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is reported
                detail = f"failed: {exc!r}"
            self.faults[kind] += 1
            line = f"fault {sum(self.faults.values())}: {kind} {detail}"
            self.fault_log.append(f"{self.now():.1f}s {line}")
            say(f"[{self.now():6.1f}s] {line}")
            took = self.settle(started)
            if took is not None:
                self.settle_times.append(took)
            say(f"[{self.now():6.1f}s] settled {took:.1f} s after the fault began" if took is not None
                else f"[{self.now():6.1f}s] NOT settled within 120 s")

    def fault_kill(self, node: int, rng: random.Random) -> str:
        down = rng.uniform(1.0, 3.0)
        self.cluster.kill_node(node)
        time.sleep(down)
        self.cluster.start_node(node)
        return f"SIGKILL of n{node}, restarted after {down:.1f} s"

    def fault_freeze(self, node: int, rng: random.Random) -> str:
        frozen = rng.uniform(2.0, 5.0)
        pid = self.cluster.nodes[node].pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(frozen)
        finally:
            os.kill(pid, signal.SIGCONT)
        return f"SIGSTOP of n{node} for {frozen:.1f} s"

    def fault_step_down(self, node: int, rng: random.Random) -> str:
        stream = rng.choice([SOAK, COPY, f"KV_{BUCKET}", f"OBJ_{STORE}"])
        consumer = rng.choice([PULL, QUEUE])
        done = []
        for subject in (f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}",
                        f"$JS.API.CONSUMER.LEADER.STEPDOWN.{SOAK}.{consumer}"):
            try:
                resp = json.loads(self.admin.request(subject, b"", timeout=5.0).data)
                done.append("ok" if resp.get("success") else f"refused {resp.get('error')}")
            except jss.JetStreamError as exc:
                done.append(f"failed {type(exc).__name__}")
        return f"of the leaders of stream {stream} ({done[0]}) and consumer {SOAK}/{consumer} ({done[1]})"

    def healthy(self) -> bool:
        infos = [self.ajs.stream_info(name) for name in (SOAK, COPY, f"KV_{BUCKET}", f"OBJ_{STORE}")]
        infos += [self.ajs.consumer_info(SOAK, name) for name in (PULL, QUEUE)]
        for info in infos:
            cl = info.cluster
            if cl is None or not cl.leader or len(cl.replicas or []) != 2:
                return False
            if not all(r.current and not r.offline for r in cl.replicas):
                return False
        return True

    def settle(self, started: float) -> float | None:
        """Block until every node runs, the cluster is ready and every R3 asset is current everywhere;
        return the seconds since ``started`` (None: not within 120 s)."""
        deadline = time.monotonic() + 120
        for i, node in enumerate(self.cluster.nodes):
            if not node.is_running:
                self.cluster.start_node(i)
        try:
            self.cluster.wait_ready(120)
        except RuntimeError:
            return None
        if until(threading.Event(), deadline, 0.25, self.healthy):
            return time.monotonic() - started
        return None

    # -- monitoring -----------------------------------------------------------------------------------------

    def monitor(self) -> None:
        """Every 0.2 s: each reader's stand-still (from the end of warm-up on); every second: RSS and the
        copy's count; every 10 s: a progress line."""
        next_print = time.monotonic() + 5
        next_second = time.monotonic()
        warm = self.started + self.warm_up
        while not self.stop_monitor.wait(0.2):
            now = time.monotonic()
            second = now >= next_second
            if second:
                next_second = now + 1.0
                self.rss.append((self.now(), rss_bytes()))
            if now >= warm:
                with self.ledger.lock:
                    stored = self.ledger.max_seq
                self.pull.watch_stall(now, self.pull.distinct < stored)
                self.push.watch_stall(now, self.push.distinct < stored)
                self.ordered.watch_stall(now, self.ordered_cursor < stored)
                with self.watcher.lock:
                    kv_behind = self.watch_last < self.kv_max_value
                self.watcher.watch_stall(now, kv_behind)
                if self.spark_proc is not None:
                    self.copy.watch_stall(now, self.copy_count < stored)
            if now >= next_print:
                next_print = now + 10
                self.progress()

    def watch_copy(self) -> None:
        """Poll the copy's message count twice a second (a thread of its own: a stream info request may wait
        out an election, and the stand-still figures must not wait with it)."""
        while not self.stop_monitor.wait(0.5):
            try:
                count = self.ajs.stream_info(COPY, timeout=1.0).state.messages  # no answer while COPY elects a leader
            except jss.JetStreamError:
                continue
            if count > self.copy_count:
                self.copy_count = count
                self.copy.last_handled = time.monotonic()

    def progress(self) -> None:
        spark = f" copied {self.copy_count:,}" if self.spark_proc is not None else ""
        say(f"[{self.now():6.1f}s] published {self.ledger.acked:,} (seq {self.ledger.max_seq:,})  pull "
            f"{self.pull.distinct:,}  push {self.push.distinct:,}  ordered {self.ordered_cursor:,}  kv "
            f"{self.kv_ok:,} cas (watcher at {self.watch_last:,})  objects {self.objects_put:,}{spark}  "
            f"faults {sum(self.faults.values())}  rss {self.rss[-1][1] / 1e6 if self.rss else 0:.1f} MB")

    def thread(self, target: Callable[..., Any], name: str, *args: Any) -> None:
        def run() -> None:
            try:
                target(*args)
            except Exception as exc:  # noqa: BLE001 - a workload that dies is a failure, reported
                self.failures.append(f"{name} died: {exc!r}")
                say(f"[{self.now():6.1f}s] {name} died: {exc!r}")
        t = threading.Thread(target=run, name=f"soak-{name}", daemon=True)
        t.start()
        self.threads.append(t)

    # -- the run -------------------------------------------------------------------------------------------------

    def run(self) -> int:
        a = self.args
        say(f"soak_chaos: {a.duration:.0f} s, {a.rate:.0f} msgs/s of {a.size} B, chaos every "
            f"{a.chaos_interval[0]:g}-{a.chaos_interval[1]:g} s, ack_wait {a.ack_wait:g} s, seed {a.seed}, "
            f"spark {'off' if a.no_spark else 'on'}; python {sys.version.split()[0]}, jetstream_sync "
            f"{jss.__version__}; load {os.getloadavg()[0]:.2f}")
        with NatsCluster(3, name="soak") as self.cluster:
            say(f"[{self.now():6.1f}s] cluster of 3 ready: {', '.join(self.cluster.urls)}")
            try:
                return self.soak()
            except Exception as exc:  # noqa: BLE001 - the soak's own failure is a failed run, with its traceback
                traceback.print_exc()
                self.failures.append(f"the soak itself raised {exc!r}")
                return self.verdict()
            finally:
                self.stop_load.set()
                self.stop_chaos.set()
                self.stop_monitor.set()
                for node in self.cluster.nodes:  # a node left frozen would hold up the cluster's stop
                    if node.pid is not None:
                        try:
                            os.kill(node.pid, signal.SIGCONT)
                        except ProcessLookupError:
                            pass
                if self.spark_proc is not None and self.spark_proc.poll() is None:
                    self.spark_proc.kill()
                    self.spark_proc.wait()
                for client in self.clients.values():
                    client.close()
                if self.spark_proc is not None:
                    if self.failures:
                        say(f"the Spark child's log is kept: {os.path.join(self.spark_dir, 'spark.stderr')}")
                    else:
                        shutil.rmtree(self.spark_dir, ignore_errors=True)

    def soak(self) -> int:
        a = self.args
        self.set_up()
        if not a.no_spark:
            self.start_spark()
            if not self.spark_ready.wait(300) or self.spark_done.is_set():
                self.failures.append("spark: the streaming copy did not start")
                return self.verdict()
            say(f"[{self.now():6.1f}s] spark streaming copy {SOAK} -> {COPY} running")
        self.give_up_at = float("inf")
        for role, k in (("pub-sync", 1), ("pub-async", 2), ("pull", 0), ("push-1", 1), ("push-2", 2), ("ordered", 1),
                        ("kv-1", 1), ("kv-2", 2), ("kv-watch", 0), ("objects", 2)):
            self.js(self.connect(role, k)).account_info()  # connected, its request inbox made
        self.subs_before = self.subscriptions()
        say(f"[{self.now():6.1f}s] {len(self.clients)} clients connected, {sum(map(len, self.subs_before.values()))} "
            f"subscriptions among them")
        self.start_pull()
        self.start_push()
        self.start_ordered()
        self.start_watcher()
        self.started = time.monotonic()
        self.thread(self.publish_sync, "pub-sync")
        self.thread(self.publish_async, "pub-async")
        self.thread(self.kv_writer, "kv-writer-1", 1)
        self.thread(self.kv_writer, "kv-writer-2", 2)
        self.thread(self.object_loop, "objects")
        monitor = threading.Thread(target=self.monitor, name="soak-monitor", daemon=True)
        monitor.start()
        if self.spark_proc is not None:
            threading.Thread(target=self.watch_copy, name="soak-copy-watch", daemon=True).start()
        chaos = threading.Thread(target=self.chaos, name="soak-chaos", daemon=True)
        chaos.start()
        say(f"[{self.now():6.1f}s] every workload running; faults from {self.warm_up:.0f} s on")
        time.sleep(max(0.0, self.started + min(self.warm_up, a.duration) - time.monotonic()))
        self.subs_warm = self.subscriptions()  # every reply inbox a workload uses is made by now
        time.sleep(max(0.0, self.started + a.duration - time.monotonic()))
        if not all(self.faults[kind] for kind in FAULTS) and chaos.is_alive():
            say(f"[{self.now():6.1f}s] {a.duration:.0f} s are up: going on until every kind of fault happened once")
            until(self.stop_chaos, time.monotonic() + 300, 0.25, lambda: all(self.faults[kind] for kind in FAULTS))

        say(f"[{self.now():6.1f}s] {time.monotonic() - self.started:.0f} s are up: no more faults (waiting for the "
            f"last to settle)")
        self.stop_chaos.set()
        chaos.join(300)
        if chaos.is_alive():
            self.failures.append("chaos: the last fault did not end within 300 s")
        if self.settle(time.monotonic()) is None:
            self.failures.append("chaos: the cluster did not settle within 120 s after the run")
        say(f"[{self.now():6.1f}s] stopping publishers, KV writers and the object loop")
        self.give_up_at = time.monotonic() + 60
        self.stop_load.set()
        self.ran = time.monotonic() - self.started
        for t in self.threads:
            t.join(120)
            if t.is_alive():
                self.failures.append(f"{t.name} did not stop within 120 s")
        self.catch_up()
        self.stop_monitor.set()
        monitor.join(10)
        self.stop_readers()
        self.check_all()
        return self.verdict()

    def catch_up(self) -> None:
        """Wait until every reader has everything that was stored (at most 3 x ack_wait + 60 s)."""
        a = self.args
        soak = self.ajs.stream_info(SOAK).state
        bucket = self.bucket_value()
        say(f"[{self.now():6.1f}s] catching up: {SOAK} holds {soak.messages:,} (last seq {soak.last_seq:,}), "
            f"the KV counter is {bucket:,}")
        deadline = time.monotonic() + 3 * a.ack_wait + 60
        stored = soak.last_seq

        def readers_done() -> bool:
            if self.pull.distinct < stored or self.push.distinct < stored or self.ordered_cursor < stored:
                return False
            if self.watch_last < bucket:
                return False
            if self.spark_proc is not None and self.copy_count < soak.messages:
                return False
            for name in (PULL, QUEUE):
                info = self.ajs.consumer_info(SOAK, name)
                if info.num_pending or info.num_ack_pending:
                    return False
            return True

        started = time.monotonic()
        done = until(threading.Event(), deadline, 0.25, readers_done)
        say(f"[{self.now():6.1f}s] readers {'caught up' if done else 'NOT caught up'} after "
            f"{time.monotonic() - started:.1f} s: pull {self.pull.distinct:,}, push {self.push.distinct:,}, "
            f"ordered at {self.ordered_cursor:,}, watcher at {self.watch_last:,}"
            + (f", copy {self.copy_count:,}" if self.spark_proc is not None else ""))

    def stop_readers(self) -> None:
        say(f"[{self.now():6.1f}s] stopping the readers")
        self.pull_handle.drain()
        if not self.pull_handle.wait(30):
            self.failures.append("pull: consume() did not end within 30 s of drain()")
        if self.pull_handle.error is not None:
            self.failures.append(f"pull: consume() ended with {self.pull_handle.error!r}")
        for sub in self.push_subs:
            sub.drain()
        for sub in self.push_subs:
            if not sub.wait(30):
                self.failures.append("push: a queue member did not end within 30 s of drain()")
            if sub.error is not None:
                self.failures.append(f"push: a queue member ended with {sub.error!r}")
        self.ordered_handle.drain()
        if not self.ordered_handle.wait(30):
            self.failures.append("ordered: consume() did not end within 30 s of drain()")
        if self.ordered_handle.error is not None:
            self.failures.append(f"ordered: consume() ended with {self.ordered_handle.error!r}")
        self.key_watcher.stop()
        if self.key_watcher.error is not None:
            self.failures.append(f"watcher: ended with {self.key_watcher.error!r}")
        if self.spark_proc is not None:
            self.stop_spark()

    # -- the checks ---------------------------------------------------------------------------------------------

    def bucket_value(self) -> int:
        """The counter's value at the bucket's last revision as its stream leader tells it (a plain get may
        be answered by a replica that is behind)."""
        for _ in range(50):
            last = self.ajs.stream_info(f"KV_{BUCKET}").state.last_seq
            try:
                return int(self.kv_admin.get(KEY, revision=last).value.split(b":")[0])
            except jss.KeyNotFoundError:
                time.sleep(0.2)
        raise RuntimeError("the counter's last revision could not be read")

    def check(self, what: str, ok: bool, detail: str) -> None:
        say(f"check: {what}: {'ok' if ok else 'FAILED'}  ({detail})")
        if not ok:
            self.failures.append(f"{what}: {detail}")

    def read_stream(self, stream: str) -> tuple[array.array, list[int], int, int]:
        """Every message of ``stream`` by one ordered consumer: (stream seq per message index, indexes seen
        twice, messages read, payloads not as published)."""
        seqs = array.array("q", bytes(8 * self.ledger.capacity))
        twice: list[int] = []
        read = bad = 0
        last = self.ajs.stream_info(stream).state.last_seq
        reader = self.ajs.ordered_consumer(stream)
        size = self.args.size
        deadline = time.monotonic() + 300
        cursor = 0
        while cursor < last and time.monotonic() < deadline:
            for msg in reader.fetch(1000, expires=2.0):
                cursor = msg.metadata.sequence.stream
                i = index_of(msg.data)
                read += 1
                if msg.data != payload(i, size):
                    bad += 1
                if seqs[i]:
                    twice.append(i)
                seqs[i] = cursor
        reader.close(wait=True)
        if cursor < last:
            self.failures.append(f"{stream}: read only up to sequence {cursor} of {last} within 300 s")
        return seqs, twice, read, bad

    def check_all(self) -> None:
        say(f"[{self.now():6.1f}s] checking")
        led = self.ledger
        soak = self.ajs.stream_info(SOAK).state
        seqs, twice, read, bad = self.read_stream(SOAK)
        n = led.next_index
        acked = [i for i in range(n) if led.acked_seq[i]]
        lost = [i for i in acked if not seqs[i]]
        wrong_seq = [i for i in acked if seqs[i] and seqs[i] != led.acked_seq[i]]
        stored = [i for i in range(n) if seqs[i]]
        unacked_stored = len(stored) - (len(acked) - len(lost))
        self.lost = len(lost)
        self.duplicates = len(twice)
        self.check("every acknowledged publish stored exactly once, at its PubAck's sequence",
                   not lost and not twice and not wrong_seq and not bad and read == soak.messages == soak.last_seq,
                   f"{len(acked):,} acked, {read:,} stored, lost {len(lost)}, stored twice {len(twice)}, at another "
                   f"sequence {len(wrong_seq)}, payload differs {bad}, {unacked_stored} stored whose PubAck never "
                   f"came (re-sent ids: {led.duplicate_pubacks} duplicate PubAcks)")

        for reader, cname in ((self.pull, PULL), (self.push, QUEUE)):
            missed = [i for i in stored if not reader.handled[i]]
            unconfirmed = sum(1 for i in stored if not reader.acks[i])
            late_twice = sum(1 for i in stored if reader.acks[i] > 1 and reader.late[i])
            info = self.ajs.consumer_info(SOAK, cname)
            self.lost += len(missed)
            self.duplicates += len(reader.twice_acked)
            self.check(f"{reader.name}: every stored message handled, confirmed-acked at most once",
                       not missed and not reader.twice_acked and not info.num_pending and not info.num_ack_pending,
                       f"{reader.distinct:,} handled in {reader.deliveries:,} deliveries, missed {len(missed)}, acked "
                       f"twice {len(reader.twice_acked)} {reader.twice_acked[:5]}, acked twice after a late first ack "
                       f"{late_twice}, ack unconfirmed {unconfirmed} ({reader.ack_failures} double_ack timeouts); "
                       f"consumer {cname!r}: {info.num_pending} pending, {info.num_ack_pending} unacked, "
                       f"{info.num_redelivered} redelivered")

        self.lost += max(0, soak.last_seq - self.ordered_cursor)
        self.duplicates += max(0, self.ordered.deliveries - self.ordered_cursor)
        self.check("ordered: every sequence once, in order",
                   not self.ordered_errors and self.ordered_cursor == soak.last_seq == self.ordered.deliveries,
                   f"{self.ordered.deliveries:,} delivered, up to sequence {self.ordered_cursor:,} of "
                   f"{soak.last_seq:,}; out of order {self.ordered_errors[:5]}")

        bucket = self.bucket_value()
        self.check("kv: the counter equals the successful CAS updates",
                   bucket == self.kv_ok and not self.kv_unresolved,
                   f"counter {bucket:,}, successful CAS {self.kv_ok:,}, lost races {self.kv_conflicts:,}, "
                   f"unconfirmed updates {self.kv_ambiguous} (resolved by the leader), unresolved "
                   f"{self.kv_unresolved}; leader reads behind a failed CAS {self.kv_history_behind}")
        self.check("kv: the watcher's last value equals the bucket's, values only rising",
                   self.watch_last == bucket and not self.watch_problems,
                   f"watcher at {self.watch_last:,} after {self.watch_seen:,} entries, bucket at {bucket:,}; "
                   f"repeats or going back {self.watch_problems[:5]}; {self.watch_skipped} updates in "
                   f"{self.watch_skips} runs gone from the key's {KV_HISTORY}-revision history before the "
                   f"watcher, resetting, read them")

        store = self.ajs.object_store(STORE)
        reread_bad = []
        for name, digest in sorted(self.object_digests.items()):
            got: list[bytes] = []
            if not self.retry_object(lambda: got.append(store.get_bytes(name)), f"get {name}"):
                reread_bad.append(name)
            elif hashlib.sha256(got[-1]).hexdigest() != digest:
                reread_bad.append(name)
        self.lost += len(reread_bad) + len(self.object_mismatch)
        self.check("objects: every object read back with its digest",
                   not reread_bad and not self.object_mismatch and self.objects_put > 0,
                   f"{self.objects_put:,} puts and {self.objects_read:,} reads ({self.object_bytes / 1e6:.1f} MB) "
                   f"during the run, {self.object_retries} retried calls; right after its put, {self.object_not_found} "
                   f"gets found no object and {self.object_stale} read the version it replaced (a replica behind); "
                   f"the last {len(self.object_digests)} "
                   f"read again at the end, bad {reread_bad + self.object_mismatch}")

        if self.spark_proc is not None:
            copy = self.ajs.stream_info(COPY).state
            cseqs, ctwice, cread, cbad = self.read_stream(COPY)
            missing = [i for i in stored if not cseqs[i]]
            extra = [i for i in range(n) if cseqs[i] and not seqs[i]]
            self.lost += len(missing)
            self.duplicates += len(ctwice)
            rep = self.spark_report
            self.check("spark: the copy equals the source",
                       not missing and not extra and not ctwice and not cbad and cread == copy.messages == read,
                       f"{cread:,} copied of {read:,}, missing {len(missing)}, not in the source {len(extra)}, "
                       f"twice {len(ctwice)}, payload differs {cbad}; {rep.get('batches', '?')} micro-batches, "
                       f"query restarts {rep.get('restarts', '?')} {rep.get('errors', [])[:2]}"
                       + (f"; missing source sequences {runs_of(sorted(seqs[i] for i in missing))}" if missing else ""))

        self.check_leftovers()
        self.check_rss()

    def check_leftovers(self) -> None:
        expected = {SOAK: {PULL, QUEUE}, COPY: set(), f"KV_{BUCKET}": set(), f"OBJ_{STORE}": set()}
        left: dict[str, list[str]] = {}

        def clean() -> bool:
            left.clear()
            for stream, keep in expected.items():
                extra = sorted(set(self.ajs.consumer_names(stream)) - keep)
                if extra:
                    left[stream] = extra
            return not left

        started = time.monotonic()
        ok = until(threading.Event(), started + 30, 0.5, clean)
        detail = f"after {time.monotonic() - started:.1f} s: {left or 'only ' + PULL + ' and ' + QUEUE}"
        if not ok:
            for stream, names in left.items():
                for name in names[:3]:
                    try:
                        info = self.ajs.consumer_info(stream, name)
                        cfg = info.config
                        detail += (f"; {stream}/{name} created {info.created}, inactive_threshold "
                                   f"{cfg.inactive_threshold if cfg else '?'}")
                    except jss.JetStreamError as exc:
                        detail += f"; {stream}/{name}: {type(exc).__name__}"
        self.check("no consumer left behind", ok, detail)

        # Allowed at the end: what a connection had before the readers started, and for the connections
        # that are not readers the reply inboxes (``_INBOX.<token>.*``, one per purpose, made on first use)
        # they had after warm-up. Anything else (a pull inbox, a deliver subject, an inbox made during the
        # faults) was left behind.
        after: dict[str, list[str]] = {}
        left: dict[str, list[str]] = {}
        missing: list[str] = []

        def clean_subs() -> bool:  # an inbox given up lingers for a moment before its UNSUB
            after.clear()
            after.update(self.subscriptions())
            left.clear()
            for role, subs in after.items():
                allowed = set(self.subs_before.get(role, []))
                if role not in READERS:
                    allowed |= {s for s in self.subs_warm.get(role, []) if s.startswith("_INBOX.") and s.endswith(".*")}
                extra = [s for s in subs if s not in allowed]
                if extra:
                    left[role] = extra
            missing[:] = sorted(set(self.clients) - set(after))
            return not left and not missing

        started = time.monotonic()
        ok = until(threading.Event(), started + 15, 0.5, clean_subs)
        during = sum(len(s) for s in self.subs_warm.values())
        self.check("no subscription left behind", ok,
                   f"{sum(len(s) for s in after.values())} subscriptions on {len(after)} connections after "
                   f"{time.monotonic() - started:.1f} s, {sum(len(s) for s in self.subs_before.values())} before the "
                   f"readers started, {during} while they ran{'' if not left else '; left: ' + repr(left)}"
                   f"{'' if not missing else '; connections not found: ' + repr(missing)}")

    def subscriptions(self) -> dict[str, list[str]]:
        """The subjects each of this soak's connections subscribes to, from every node's /connz."""
        subs: dict[str, list[str]] = {}
        for node in self.cluster.nodes:
            for conn in http_json(node.monitor_url + "/connz?subs=detail&limit=1024").get("connections", []):
                name = conn.get("name") or ""
                if name.startswith("soak-") and name[5:] in self.clients:
                    subs.setdefault(name[5:], []).extend(
                        s["subject"] for s in conn.get("subscriptions_list_detail") or [])
        return subs

    def check_rss(self) -> None:
        """RSS sampled every second from the end of warm-up to the end of the catch-up: its growth (peak
        over the median of the first five samples) against the limit, and its trend (least squares)."""
        after = [(t, r) for t, r in self.rss if t - (self.started - self.t0) >= self.warm_up]
        if len(after) < 5:
            self.check("client RSS flat after warm-up", False, "too few samples")
            return
        base = sorted(r for _, r in after[:5])[2]
        peak = max(r for _, r in after)
        growth = peak - base
        t_mean = sum(t for t, _ in after) / len(after)
        r_mean = sum(r for _, r in after) / len(after)
        spread = sum((t - t_mean) ** 2 for t, _ in after)
        slope = sum((t - t_mean) * (r - r_mean) for t, r in after) / spread if spread else 0.0
        self.check("client RSS flat after warm-up", growth < self.args.max_growth_mb * 1e6,
                   f"{base / 1e6:.1f} MB after warm-up, peak {peak / 1e6:.1f} MB, growth {growth / 1e6:.1f} MB "
                   f"(limit {self.args.max_growth_mb:g}); trend {slope * 60 / 1e6:+.2f} MB/min over "
                   f"{after[-1][0] - after[0][0]:.0f} s")

    def readers(self) -> list[Reader]:
        return [self.pull, self.push, self.ordered, self.watcher] + ([self.copy] if self.spark_proc else [])

    def verdict(self) -> int:
        """Print the figures, the failures and the one-line summary; return the exit status."""
        stalls = ", ".join(f"{r.name} {r.max_stall:.1f} s" for r in self.readers())
        say(f"longest stand-still while behind (messages stored, nothing handled): {stalls}")
        say("  ending at " + ", ".join(f"{r.name} {r.max_stall_at - self.t0:.1f} s" for r in self.readers()
                                       if r.max_stall) + " (compare with the faults' times)")
        for r in self.readers():
            if r.warnings:
                say(f"  {r.name} warnings: {dict(r.warnings)}")
        if self.errors:
            say(f"  errors met and retried: {self.errors}")
        if self.settle_times:
            say(f"  settled after each fault: {', '.join(f'{s:.1f}' for s in self.settle_times)} s")
        for line in self.fault_log:
            say(f"  {line}")
        for f in self.failures:
            say(f"FAILED: {f}")
        faults = ", ".join(f"{self.faults[k]} {k}" for k in FAULTS)
        copied = self.copy_count if self.spark_proc is not None else 0
        moved = (self.ledger.acked + self.pull.deliveries + self.push.deliveries + self.ordered.deliveries
                 + copied)
        unknown = "?"
        say(f"soak_chaos {'PASS' if not self.failures else 'FAIL'}: {self.ran:.0f} s, faults "
            f"{sum(self.faults.values())} ({faults}); moved {moved:,} messages ({self.ledger.acked:,} published, "
            f"{self.pull.deliveries:,} pull, {self.push.deliveries:,} push, {self.ordered.deliveries:,} ordered, "
            f"{copied:,} copied by spark), {self.kv_ok:,} CAS, {self.objects_put:,} objects; "
            f"lost {unknown if self.lost is None else self.lost}, "
            f"duplicates {unknown if self.duplicates is None else self.duplicates}; longest stand-still {stalls}")
        return 0 if not self.failures else 1


# -- the Spark child --------------------------------------------------------------------------------------------

def spark_child(urls: str, workdir: str) -> int:
    """Run the streaming copy SOAK -> COPY until a line arrives on stdin; restart the query from its
    checkpoint if it fails; print ``SPARK DONE {json}`` with what happened."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    import jetstream_sync.spark  # noqa: F401 - makes jss.spark available

    spark = (SparkSession.builder.master("local[2,4]").appName("soak-chaos")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jss.spark.register(spark)
    checkpoint = os.path.join(workdir, "checkpoint")

    def start() -> Any:
        return (spark.readStream.format("jetstream").option("servers", urls).option("stream", SOAK)
                .option("startingOffsets", "earliest").load()
                .writeStream.format("jetstream").option("servers", urls).option("subject", COPY_SUBJECT)
                .option("checkpointLocation", checkpoint).trigger(processingTime="1 second").start())

    stop = threading.Event()

    def wait_stdin() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_stdin, daemon=True).start()
    query = start()
    deadline = time.monotonic() + 300
    while query.lastProgress is None and query.isActive and time.monotonic() < deadline:
        time.sleep(0.5)  # the first micro-batch starts the Python workers: not part of the run
    print("SPARK READY", flush=True)
    restarts, errors, batches = 0, [], 0

    def batch_count() -> int:  # micro-batches committed so far (ids carry on across restarts)
        progress = query.lastProgress
        return max(batches, progress["batchId"] + 1) if progress else batches

    while not stop.is_set():
        try:
            ended = query.awaitTermination(1.0)
        except Exception as exc:  # noqa: BLE001 - the query failed: reported, then restarted from its checkpoint
            ended = True
            errors.append(failure_of(exc))
            print(f"the query failed:\n{exc}", file=sys.stderr, flush=True)
        batches = batch_count()
        if ended and not stop.is_set():
            restarts += 1
            print(f"query ended ({errors[-1] if errors else 'no error'}); restarting from its checkpoint", flush=True)
            query = start()
    batches = batch_count()
    query.stop()
    print("SPARK DONE " + json.dumps({"restarts": restarts, "errors": errors, "batches": batches}), flush=True)
    spark.stop()
    return 0


def failure_of(exc: BaseException) -> str:
    """A failed query's exception in one line: Spark's first line and the Python error at the end of the
    worker's traceback it carries."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"[\w.]+(Error|Exception)\b", line)]
    return lines[0][:160] + (f" ... {errors[-1][:400]}" if errors else "") if lines else repr(exc)


def runs_of(numbers: list[int], most: int = 3) -> str:
    """``[a..b, c, ...]``: the first ``most`` runs of consecutive numbers in sorted ``numbers``."""
    runs: list[list[int]] = []
    for x in numbers:
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    text = ", ".join(f"{a}..{b}" if a != b else str(a) for a, b in runs[:most])
    return f"[{text}{', ...' if len(runs) > most else ''}] ({len(runs)} runs)"


def interval(text: str) -> tuple[float, float]:
    low, _, high = text.partition(":")
    lo, hi = float(low), float(high or low)
    if not 0 < lo <= hi:
        raise argparse.ArgumentTypeError(f"--chaos-interval must be MIN:MAX seconds with 0 < MIN <= MAX, got {text!r}")
    return lo, hi


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load and faults (default 300)")
    parser.add_argument("--chaos-interval", type=interval, default=(10.0, 30.0), metavar="MIN:MAX",
                        help="seconds between two faults, drawn uniformly (default 10:30)")
    parser.add_argument("--rate", type=float, default=200.0, help="messages published per second, both publishers "
                                                                    "together (default 200)")
    parser.add_argument("--size", type=int, default=128, help="payload bytes (default 128)")
    parser.add_argument("--ack-wait", type=float, default=30.0, help="ack_wait of the pull and push consumers "
                                                                        "(default 30 s)")
    parser.add_argument("--max-growth-mb", type=float, default=40.0,
                        help="client RSS growth allowed after warm-up (default 40 MB)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the fault schedule (default: random)")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark streaming copy")
    parser.add_argument("--log", metavar="FILE",
                        help="write jetstream_sync's DEBUG log and what the soak prints there (milliseconds since the "
                             "process started on each line): what a failed check went through")
    parser.add_argument("--spark-child", metavar="URLS", help=argparse.SUPPRESS)
    parser.add_argument("--spark-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_child:
        return spark_child(args.spark_child, args.spark_dir)
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    if args.log:
        handler = logging.FileHandler(args.log, mode="w")
        handler.setFormatter(logging.Formatter("%(relativeCreated)9.0f ms %(threadName)s %(name)s: %(message)s"))
        for logger in (logging.getLogger("jetstream_sync"), log):
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
    gc.collect()
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
