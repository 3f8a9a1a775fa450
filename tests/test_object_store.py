# Charter: the object store against a real nats-server: stores made as nats.go makes them, created,
# bound, changed, listed and deleted; put from every kind of source with the exact size, chunks and
# digest, progress, the old chunks purged on replace and a failed put's own chunks purged; reading
# through the file-like reader and its shortcuts; info, list, watch, delete, update_meta, links, seal
# and status; bad input refused before anything is sent; nothing left on the server by a reader or a
# watcher; and memory bounded by the windows, measured in a fresh process.
from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import threading
import uuid

import pytest

import jetstream_sync as jss
from jetstream_sync.config import StreamInfo
from jetstream_sync.object_reader import ObjectReader

from conftest import assert_sends_nothing, wait_for

pytestmark = pytest.mark.timeout(60)

KiB = 1024
MiB = 1024 * KiB
CHUNK = 1000  # a small chunk size: several chunks from a few KiB

@pytest.fixture
def bucket():
    return "O" + uuid.uuid4().hex[:10]


@pytest.fixture
def obs(js, bucket):
    return js.create_object_store(bucket, storage="memory")


def digest_of(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def chunk_subject(bucket: str, nuid: str) -> str:
    return f"$O.{bucket}.C.{nuid}"


def stream_state(js, obs):
    """The store's stream state with its messages counted per subject."""
    resp = js._jsapi.request(js._api.stream_info(obs.stream_name), {"subjects_filter": f"$O.{obs.bucket}.>"},
                             10.0, idempotent=True)
    return StreamInfo.from_response(resp).state


def stored_subjects(js, obs) -> dict[str, int]:
    return dict(stream_state(js, obs).subjects or {})


def raw_meta(js, obs, name: str) -> dict:
    """The meta message of ``name`` as stored, parsed as plain JSON."""
    return json.loads(js._jsapi.msg_get(obs.stream_name, last_by_subj=meta_subject(obs.bucket, name)).data)


def consumers_of(js, obs) -> list[str]:
    return list(js.consumer_names(obs.stream_name))


def chunk_sizes(js, obs, info) -> list[int]:
    """The sizes of the object's chunk messages, in stream order."""
    stream = js.stream(obs.stream_name)
    sizes = []
    for seq in range(1, stream.info().state.last_seq + 1):
        try:
            msg = stream.get_msg(seq)
        except jss.MessageNotFoundError:
            continue
        if msg.subject == chunk_subject(obs.bucket, info.nuid):
            sizes.append(len(msg.data))
    return sizes


def wait_until_stored(js, obs, published_after: int, count: int) -> None:
    """Wait until ``count`` messages published after stream sequence ``published_after`` are stored
    (or refused): a purge may not be judged while chunks are still on their way."""
    wait_for(lambda: stream_state(js, obs).last_seq >= published_after + count, 30,
             what=f"{count} published chunks to be stored")


def expected_chunks(size: int, chunk_size: int) -> int:
    return math.ceil(size / chunk_size)


# --- stores ----------------------------------------------------------------------------------------


def test_a_store_is_the_stream_nats_go_makes(js, bucket):
    obs = js.create_object_store(bucket)
    cfg = js.stream_info(f"OBJ_{bucket}").config
    assert (obs.bucket, obs.stream_name) == (bucket, f"OBJ_{bucket}")
    assert cfg.subjects == [f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"]
    assert cfg.discard is jss.DiscardPolicy.NEW
    assert cfg.allow_rollup_hdrs and cfg.allow_direct
    assert not cfg.deny_delete and not cfg.deny_purge and not cfg.sealed
    assert (cfg.max_age, cfg.max_bytes, cfg.max_msgs, cfg.max_msgs_per_subject) == (0, -1, -1, -1)
    assert (cfg.storage, cfg.num_replicas) == (jss.StorageType.FILE, 1)
    assert cfg.compression is jss.StoreCompression.NONE
    assert cfg.retention is jss.RetentionPolicy.LIMITS


def test_store_options_become_the_stream_config(js, bucket):
    js.create_object_store(bucket, description="models", ttl=3600, max_bytes=64 * MiB, storage="memory",
                           compression=True, metadata={"team": "ml"})
    cfg = js.stream_info(f"OBJ_{bucket}").config
    assert cfg.description == "models"
    assert (cfg.max_age, cfg.max_bytes, cfg.storage) == (3600, 64 * MiB, jss.StorageType.MEMORY)
    assert cfg.compression is jss.StoreCompression.S2
    assert cfg.metadata["team"] == "ml"


def test_a_store_config_may_be_given_whole(js, bucket):
    config = jss.ObjectStoreConfig(bucket=bucket, description="whole", storage="memory")
    assert js.create_object_store(config=config).status().description == "whole"
    assert js.create_object_store(config={"bucket": bucket, "description": "whole", "storage": "memory"})
    with pytest.raises(TypeError, match="bucket is required"):
        js.create_object_store(description="no name")


def test_creating_a_store_again_with_the_same_config_succeeds_and_with_another_raises(js, bucket):
    js.create_object_store(bucket, description="one", storage="memory")
    assert js.create_object_store(bucket, description="one", storage="memory").bucket == bucket
    with pytest.raises(jss.BucketExistsError, match=bucket) as err:
        js.create_object_store(bucket, description="two", storage="memory")
    assert isinstance(err.value, jss.StreamNameInUseError) and err.value.bucket == bucket


def test_a_missing_store_is_bucket_not_found(js, bucket):
    with pytest.raises(jss.BucketNotFoundError, match=f"'{bucket}' not found") as err:
        js.object_store(bucket)
    assert isinstance(err.value, jss.StreamNotFoundError) and err.value.bucket == bucket
    with pytest.raises(jss.BucketNotFoundError):
        js.delete_object_store(bucket)
    with pytest.raises(jss.BucketNotFoundError):
        js.update_object_store(bucket, description="x")


@pytest.mark.parametrize("call", ["info", "get", "put", "delete", "list", "status"])
def test_a_store_deleted_under_a_handle_is_bucket_not_found(js, obs, call):
    obs.put("a", b"1")
    js.delete_object_store(obs.bucket)
    calls = {"info": lambda: obs.info("a"), "get": lambda: obs.get("a"), "put": lambda: obs.put("b", b"x"),
             "delete": lambda: obs.delete("a"), "list": lambda: list(obs.list()), "status": obs.status}
    with pytest.raises(jss.BucketNotFoundError, match=f"object store '{obs.bucket}' not found"):
        calls[call]()


def test_binding_and_updating_a_store(js, obs):
    obs.put("a", b"data")
    bound = js.object_store(obs.bucket)
    assert bound.get_bytes("a") == b"data"
    updated = js.update_object_store(obs.bucket, description="changed", storage="memory")
    assert updated.status().description == "changed"
    assert updated.get_bytes("a") == b"data"


def test_stores_are_listed_by_name_and_status_and_deleted(js, bucket):
    js.create_object_store(bucket, storage="memory")
    js.create_key_value(f"KV{bucket}", storage="memory")
    js.create_stream(name=f"PLAIN{bucket}", subjects=[f"plain.{bucket}"], storage="memory")
    names = list(js.object_store_names())
    assert bucket in names
    assert f"KV{bucket}" not in names and f"PLAIN{bucket}" not in names
    statuses = {s.bucket: s for s in js.object_stores()}
    assert set(statuses) == set(names)
    assert statuses[bucket].backing_store == "JetStream"
    js.delete_object_store(bucket)
    assert bucket not in list(js.object_store_names())
    with pytest.raises(jss.BucketNotFoundError):
        js.object_store(bucket)


@pytest.mark.parametrize("name", ["a.b", "a b", "", "a*", "a>"])
def test_bad_store_names_are_refused_before_anything_is_sent(api_spy, js, name):
    assert_sends_nothing(api_spy, js, lambda: js.create_object_store(name), ValueError, "bucket")
    assert_sends_nothing(api_spy, js, lambda: js.object_store(name), ValueError, "bucket")
    assert_sends_nothing(api_spy, js, lambda: js.delete_object_store(name), ValueError, "bucket")


@pytest.mark.parametrize("fields, exc, match", [
    ({"ttl": -1}, ValueError, "ttl"),
    ({"max_bytes": 0}, ValueError, "max_bytes"),
    ({"replicas": 6}, ValueError, "replicas"),
    ({"compression": "s2"}, TypeError, "compression"),
    ({"storage": "disk"}, ValueError, "disk"),
])
def test_bad_store_options_are_refused_before_anything_is_sent(api_spy, js, bucket, fields, exc, match):
    assert_sends_nothing(api_spy, js, lambda: js.create_object_store(bucket, **fields), exc, match)


def test_status_reports_the_store(js, bucket):
    obs = js.create_object_store(bucket, description="models", ttl=3600, storage="memory", compression=True,
                                 metadata={"team": "ml"})
    empty = obs.status()
    assert empty.size == 0
    obs.put("a", os.urandom(5000), chunk_size=CHUNK)
    status = obs.status()
    assert (status.bucket, status.description, status.ttl) == (bucket, "models", 3600)
    assert (status.storage, status.replicas, status.sealed) == (jss.StorageType.MEMORY, 1, False)
    assert status.is_compressed and status.metadata["team"] == "ml"
    assert status.backing_store == "JetStream"
    assert status.size == status.stream_info.state.bytes > 5000  # chunks and the meta
    assert status.stream_info.config.name == f"OBJ_{bucket}"
    assert "Object store" in status._repr_html_()


# --- put -------------------------------------------------------------------------------------------

DATA = bytes(range(256)) * 40 + b"odd tail"  # 10 248 bytes: 11 chunks of 1000, the last 248
TEXT = "Grüße, ✓ " * 900  # non-ASCII: stored as its UTF-8


def odd_pieces(data: bytes):
    """``data`` in pieces of odd sizes (1, 7, 999, 1001, 2500, 3, ...) that never line up with a chunk."""
    sizes = [1, 7, 999, 1001, 2500, 3]
    i = k = 0
    while i < len(data):
        yield data[i:i + sizes[k % len(sizes)]]
        i += sizes[k % len(sizes)]
        k += 1


class ShortReads(io.RawIOBase):
    """A binary file that returns at most 333 bytes a read, like a pipe or a socket."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        return self._data.read(333 if n < 0 else min(n, 333))


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "str", "binary file", "path", "iterable",
                                  "short reads"])
def test_put_stores_every_kind_of_source_with_the_exact_size_chunks_and_digest(js, obs, tmp_path, kind):
    data = TEXT.encode() if kind == "str" else DATA
    path = tmp_path / "source.bin"
    path.write_bytes(data)
    with contextlib.ExitStack() as files:
        source = {"bytes": lambda: data, "bytearray": lambda: bytearray(data), "memoryview": lambda: memoryview(data),
                  "str": lambda: TEXT, "binary file": lambda: files.enter_context(open(path, "rb")),
                  "path": lambda: path, "iterable": lambda: odd_pieces(data), "short reads": lambda: ShortReads(data)}
        info = obs.put("obj", source[kind](), chunk_size=CHUNK, description="d")
    chunks = expected_chunks(len(data), CHUNK)
    assert (info.name, info.bucket, info.size, info.chunks) == ("obj", obs.bucket, len(data), chunks)
    assert info.digest == digest_of(data)
    assert (info.chunk_size, info.description, info.deleted, info.link) == (CHUNK, "d", False, None)
    assert len(info.nuid) == 22 and info.nuid.isalnum()
    stored = obs.info("obj")
    assert (stored.nuid, stored.size, stored.chunks, stored.digest, stored.chunk_size) == (
        info.nuid, info.size, info.chunks, info.digest, CHUNK)
    assert stored.mtime is not None
    sizes = chunk_sizes(js, obs, info)
    assert sizes == [CHUNK] * (chunks - 1) + [len(data) - CHUNK * (chunks - 1)]
    assert obs.get_bytes("obj") == data


def test_a_binary_file_is_read_from_where_it_stands(obs, tmp_path):
    path = tmp_path / "source.bin"
    path.write_bytes(DATA)
    calls = []
    with open(path, "rb") as f:
        f.seek(248)
        info = obs.put("rest", f, chunk_size=CHUNK, progress=lambda done, total: calls.append((done, total)))
        assert not f.closed  # the caller's file stays the caller's
    assert (info.size, info.chunks, info.digest) == (10_000, 10, digest_of(DATA[248:]))
    assert calls[-1] == (10_000, 10_000)
    assert obs.get_bytes("rest") == DATA[248:]


def test_an_empty_object_has_no_chunks_and_reads_empty(js, obs):
    info = obs.put("empty", b"")
    assert (info.size, info.chunks, info.digest) == (0, 0, digest_of(b""))
    assert obs.get_bytes("empty") == b""
    with obs.get("empty") as reader:
        assert reader.read() == b"" and reader.readinto(bytearray(10)) == 0
    assert stored_subjects(js, obs) == {meta_subject(obs.bucket, "empty"): 1}


def test_the_meta_is_stored_on_the_names_subject_with_headers_as_lists(js, obs):
    name = "dir/model ü?.bin"
    obs.put(name, b"abc", headers={"Content-Type": "application/octet-stream", "X-Tags": ["a", "b"]},
            metadata={"version": "3"}, description="weights")
    encoded = base64.urlsafe_b64encode(name.encode()).decode()
    assert encoded.endswith("=")  # padded, as every client writes it
    meta = raw_meta(js, obs, name)
    assert meta["headers"] == {"Content-Type": ["application/octet-stream"], "X-Tags": ["a", "b"]}
    assert (meta["name"], meta["bucket"], meta["metadata"], meta["description"]) == (
        name, obs.bucket, {"version": "3"}, "weights")
    assert meta["options"] == {"max_chunk_size": 128 * KiB}
    msg = js._jsapi.msg_get(obs.stream_name, last_by_subj=f"$O.{obs.bucket}.M.{encoded}")
    assert msg.headers["Nats-Rollup"] == "sub"
    info = obs.info(name)
    assert info.headers["X-Tags"] == "a" and info.headers.get_all("X-Tags") == ["a", "b"]
    assert info.metadata == {"version": "3"}
    assert info.mtime == msg.time  # the meta message's time, as the server stored it
    with pytest.raises(AttributeError):
        info.size = 0  # frozen


def test_progress_reports_each_chunk_on_the_calling_thread(obs):
    calls = []
    obs.put("p", DATA, chunk_size=CHUNK,
            progress=lambda done, total: calls.append((done, total, threading.current_thread())))
    assert [(d, t) for d, t, _ in calls] == [(min((i + 1) * CHUNK, len(DATA)), len(DATA)) for i in range(11)]
    assert {thread for _, _, thread in calls} == {threading.current_thread()}


def test_progress_of_an_iterable_has_no_total(obs):
    calls = []
    obs.put("p", odd_pieces(DATA), chunk_size=CHUNK, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(min((i + 1) * CHUNK, len(DATA)), None) for i in range(11)]


def test_replacing_an_object_purges_the_old_chunks(js, obs):
    first = obs.put("obj", b"a" * 2500, chunk_size=CHUNK)
    second = obs.put("obj", b"b" * 1500, chunk_size=CHUNK)
    assert first.nuid != second.nuid
    assert stored_subjects(js, obs) == {chunk_subject(obs.bucket, second.nuid): 2,
                                        meta_subject(obs.bucket, "obj"): 1}
    assert obs.get_bytes("obj") == b"b" * 1500


def test_putting_over_a_deleted_object_stores_it_again(js, obs):
    obs.put("obj", b"old")
    obs.delete("obj")
    info = obs.put("obj", b"new")
    assert obs.get_bytes("obj") == b"new"
    assert stored_subjects(js, obs) == {chunk_subject(obs.bucket, info.nuid): 1, meta_subject(obs.bucket, "obj"): 1}


BIG_CHUNK = 128 * KiB
# A failed put has up to SENT chunks in flight (unacknowledged) when it fails; a purge that does not wait
# for them leaves a few behind now and then, so each test fails a put FAILED_PUTS times.
SENT = 40
FAILED_PUTS = 20
PIECE = os.urandom(BIG_CHUNK)


def failing_put(obs, how: str, name: str) -> None:
    """A put that fails after publishing SENT chunks of 128 KiB, the way ``how`` says."""
    if how == "source raises":
        def source():
            for _ in range(SENT):
                yield PIECE
            raise RuntimeError("disk gone")
        exc, call = RuntimeError, lambda: obs.put(name, source())
    elif how == "source yields a str":
        exc, call = TypeError, lambda: obs.put(name, iter([PIECE] * SENT + ["not bytes"]))
    else:
        def progress(done, total):
            if done == SENT * BIG_CHUNK:
                raise KeyboardInterrupt
        exc, call = KeyboardInterrupt, lambda: obs.put(name, PIECE * (2 * SENT), progress=progress)
    with pytest.raises(exc):
        call()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["source raises", "source yields a str", "progress interrupts"])
def test_a_failed_put_purges_its_chunks_and_leaves_the_old_object(js, obs, how):
    old = obs.put("obj", DATA, chunk_size=CHUNK)
    before = stream_state(js, obs).last_seq
    for _ in range(FAILED_PUTS):
        failing_put(obs, how, "obj")
    wait_until_stored(js, obs, before, FAILED_PUTS * SENT)
    assert stored_subjects(js, obs) == {chunk_subject(obs.bucket, old.nuid): 11, meta_subject(obs.bucket, "obj"): 1}
    assert obs.info("obj").nuid == old.nuid
    assert obs.get_bytes("obj") == DATA


@pytest.mark.timeout(120)
def test_a_failed_first_put_leaves_nothing(js, obs):
    for _ in range(FAILED_PUTS):
        failing_put(obs, "source raises", "new")
    wait_until_stored(js, obs, 0, FAILED_PUTS * SENT)
    assert stored_subjects(js, obs) == {}
    with pytest.raises(jss.ObjectNotFoundError):
        obs.info("new")


def test_a_chunk_size_above_max_payload_is_a_value_error_naming_both_before_anything_is_sent(api_spy, client,
                                                                                            js, obs):
    max_payload = client.max_payload
    assert_sends_nothing(api_spy, js, lambda: obs.put("a", b"x" * 10, chunk_size=max_payload + 1), ValueError,
                         f"chunk_size {max_payload + 1} .*max payload {max_payload}")
    assert stream_state(js, obs).messages == 0


def test_a_chunk_of_exactly_max_payload_is_stored(client, obs):
    max_payload = client.max_payload
    data = os.urandom(max_payload + 10)
    info = obs.put("max", data, chunk_size=max_payload)
    assert (info.chunks, info.size) == (2, len(data))
    assert obs.get_bytes("max") == data


@pytest.mark.parametrize("call, exc, match", [
    (lambda o: o.put("a", b"x", chunk_size=0), ValueError, "chunk_size"),
    (lambda o: o.put("a", b"x", chunk_size=True), ValueError, "chunk_size"),
    (lambda o: o.put("a", b"x", chunk_size=1.5), ValueError, "chunk_size"),
    (lambda o: o.put("a", 5), TypeError, "source must be bytes, str, a binary file"),
    (lambda o: o.put("a", io.StringIO("text")), TypeError, "binary mode"),
    (lambda o: o.put("", b"x"), ValueError, "name"),
    (lambda o: o.put(5, b"x"), TypeError, "name"),
    (lambda o: o.put("a", b"x", headers=["K"]), TypeError, "headers"),
    (lambda o: o.put("a", b"x", progress="bar"), TypeError, "progress"),
    (lambda o: o.get(""), ValueError, "name"),
    (lambda o: o.info(None), TypeError, "name"),
    (lambda o: o.add_link("l", "target"), TypeError, "ObjectInfo"),
    (lambda o: o.add_bucket_link("l", "store"), TypeError, "ObjectStore"),
])
def test_bad_arguments_are_refused_before_anything_is_sent(api_spy, js, obs, call, exc, match):
    assert_sends_nothing(api_spy, js, lambda: call(obs), exc, match)
    assert stream_state(js, obs).messages == 0


def test_update_meta_takes_the_current_name_positionally_only(obs):
    obs.put("a", b"x")
    with pytest.raises(TypeError):
        obs.update_meta(current="a", description="d")


# --- get -------------------------------------------------------------------------------------------


def test_the_reader_reads_with_read_readinto_and_readall(obs):
    data = os.urandom(2500)
    put = obs.put("r", data, chunk_size=CHUNK)
    with obs.get("r") as reader:
        assert (reader.info.name, reader.info.nuid, reader.info.size, reader.info.digest) == (
            "r", put.nuid, 2500, put.digest)
        assert reader.readable() and not reader.seekable() and not reader.writable()
        first = reader.read(10)
        buf = bytearray(5000)
        n = reader.readinto(buf)
        rest = reader.readall()
        assert (len(first), n) == (10, CHUNK - 10)  # readinto hands out at most what one chunk holds
        assert first + buf[:n] + rest == data
        assert reader.read(10) == b"" and reader.readinto(buf) == 0 and reader.readall() == b""
    assert reader.closed
    with pytest.raises(ValueError, match="closed"):
        reader.read(1)


def test_the_reader_works_with_io_buffered_reader_and_shutil(obs, tmp_path):
    data = os.urandom(5555)
    obs.put("b", data, chunk_size=CHUNK)
    with obs.get("b") as raw, io.BufferedReader(raw, buffer_size=64) as buffered:
        assert buffered.read(3) == data[:3]
        assert buffered.read() == data[3:]
    target = tmp_path / "copy.bin"
    with obs.get("b") as reader, open(target, "wb") as out:
        shutil.copyfileobj(reader, out, 777)
    assert target.read_bytes() == data


def test_get_bytes_and_a_missing_object(obs):
    obs.put("a", DATA, chunk_size=CHUNK)
    assert obs.get_bytes("a") == DATA
    with pytest.raises(jss.ObjectNotFoundError, match=f"object 'nope' not found in object store '{obs.bucket}'") as err:
        obs.get("nope")
    assert (err.value.bucket, err.value.name) == (obs.bucket, "nope")
    with pytest.raises(jss.ObjectNotFoundError):
        obs.get_bytes("nope")


def test_get_file_writes_the_object_and_reports_progress(obs, tmp_path):
    data = os.urandom(300 * KiB)
    put = obs.put("f", data)
    target = tmp_path / "out.bin"
    calls = []
    info = obs.get_file("f", target, progress=lambda done, total: calls.append((done, total)))
    assert target.read_bytes() == data
    assert (info.nuid, info.digest) == (put.nuid, put.digest)
    assert calls[-1] == (len(data), len(data)) and len(calls) == 3


def test_get_file_of_a_missing_object_creates_no_file(obs, tmp_path):
    target = tmp_path / "out.bin"
    with pytest.raises(jss.ObjectNotFoundError):
        obs.get_file("nope", target)
    assert not target.exists()


def test_a_failed_get_file_leaves_the_target_as_it_was_and_no_consumer(js, obs, tmp_path):
    obs.put("f", os.urandom(40 * BIG_CHUNK))
    target = tmp_path / "out.bin"
    target.write_bytes(b"the previous version")

    def progress(done, total):
        if done >= 3 * BIG_CHUNK:
            assert target.read_bytes() == b"the previous version"  # written beside it, renamed at the end
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        obs.get_file("f", str(target), progress=progress)
    assert target.read_bytes() == b"the previous version"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]  # no partial file left beside it
    wait_for(lambda: consumers_of(js, obs) == [], 10, what="the reader's consumer to be deleted")
    obs.get_file("f", target)
    assert target.stat().st_size == 40 * BIG_CHUNK


def test_a_digest_mismatch_in_get_file_removes_the_partial_file(js, obs, tmp_path):
    info = obs.put("f", os.urandom(5 * CHUNK), chunk_size=CHUNK)
    meta = raw_meta(js, obs, "f")
    meta["digest"] = digest_of(b"something else")
    js.publish(meta_subject(obs.bucket, "f"), json.dumps(meta).encode(), headers={"Nats-Rollup": "sub"})
    target = tmp_path / "out.bin"
    with pytest.raises(jss.DigestMismatchError) as err:
        obs.get_file("f", target)
    assert (err.value.expected, err.value.actual) == (digest_of(b"something else"), info.digest)
    assert not target.exists()


def test_an_object_whose_last_chunk_is_gone_is_short(js, obs):
    obs.put("f", os.urandom(3 * CHUNK), chunk_size=CHUNK)
    js.stream(obs.stream_name).delete_msg(3)  # chunks are sequences 1-3, the meta 4
    with pytest.raises(jss.DigestMismatchError, match=r"its chunks end after 2 of 3 \(2000 of 3000 bytes\)"):
        obs.get_bytes("f")
    wait_for(lambda: consumers_of(js, obs) == [], 10, what="the reader's consumer to be deleted")


@pytest.mark.timeout(60)
def test_a_reader_waits_for_chunks_its_node_has_not_stored_yet(js, obs):
    # A replicated store's reader may be served by a replica still storing the last chunks: it waits
    # up to its settle time for them instead of calling the object short.
    data = os.urandom(3 * CHUNK)
    info = obs.put("f", data, chunk_size=CHUNK)
    js.stream(obs.stream_name).delete_msg(3)
    reader = ObjectReader(js, obs.stream_name, info, 30.0, settle=20.0)

    def store_the_last_chunk_late():
        wait_for(lambda: reader._read == 2 * CHUNK, 20, what="the reader to have the first two chunks")
        js.publish(chunk_subject(obs.bucket, info.nuid), data[2 * CHUNK:])

    late = threading.Thread(target=store_the_last_chunk_late, daemon=True)
    late.start()
    with reader:
        assert reader.readall() == data
    late.join(20)
    assert not late.is_alive()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["close", "exception in with", "garbage"])
def test_a_reader_left_early_leaves_no_consumer(js, obs, how):
    obs.put("big", os.urandom(40 * BIG_CHUNK))
    reader = obs.get("big")
    assert len(reader.read(100)) == 100
    wait_for(lambda: consumers_of(js, obs) != [], 10, what="the reader's consumer")
    if how == "close":
        reader.close()
    elif how == "exception in with":
        with pytest.raises(ZeroDivisionError), reader:
            reader.read(100)
            raise ZeroDivisionError
    else:
        del reader
    wait_for(lambda: consumers_of(js, obs) == [], 15, what="the reader's consumer to be deleted")


def test_a_reader_read_to_the_end_leaves_no_consumer(js, obs):
    obs.put("big", os.urandom(10 * BIG_CHUNK))
    with obs.get("big") as reader:
        while reader.read(BIG_CHUNK):
            pass
        wait_for(lambda: consumers_of(js, obs) == [], 15, what="the reader's consumer to be deleted")


@pytest.mark.timeout(120)
def test_threads_put_and_get_their_own_objects_at_once(obs):
    errors = []

    def worker(i):
        try:
            for round_ in range(3):
                data = os.urandom(200 * KiB + i * 1000 + round_)
                info = obs.put(f"t{i}", data, chunk_size=32 * KiB)
                assert info.digest == digest_of(data)
                assert obs.get_bytes(f"t{i}") == data
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert sorted(i.name for i in obs.list()) == ["t0", "t1", "t2", "t3"]


# --- info and list ---------------------------------------------------------------------------------


def test_an_empty_store_lists_nothing_and_leaves_no_consumer(js, obs):
    assert list(obs.list()) == []
    assert list(obs.list(show_deleted=True)) == []
    wait_for(lambda: consumers_of(js, obs) == [], 10, what="list()'s consumer to be deleted")


def test_info_and_list_leave_deleted_objects_out_unless_asked(js, obs):
    a = obs.put("a", b"1")
    obs.put("b", b"22")
    obs.delete("b")
    listed = list(obs.list())
    assert [i.name for i in listed] == ["a"]
    assert (listed[0].nuid, listed[0].digest, listed[0].size) == (a.nuid, a.digest, 1)
    assert listed[0].mtime is not None
    everything = {i.name: i for i in obs.list(show_deleted=True)}
    assert set(everything) == {"a", "b"} and everything["b"].deleted and not everything["a"].deleted
    with pytest.raises(jss.ObjectNotFoundError):
        obs.info("b")
    assert obs.info("b", show_deleted=True).deleted
    wait_for(lambda: consumers_of(js, obs) == [], 10, what="list()'s consumers to be deleted")


def test_an_abandoned_list_leaves_no_consumer(js, obs):
    for i in range(30):
        obs.put(f"o{i}", b"x")
    it = obs.list()
    assert next(it).name.startswith("o")
    it.close()
    wait_for(lambda: consumers_of(js, obs) == [], 10, what="list()'s consumer to be deleted")


def test_list_includes_links_and_renamed_objects_once(obs):
    target = obs.put("t", b"x")
    obs.add_link("l", target)
    obs.put("old", b"y")
    obs.update_meta("old", name="new")
    assert sorted(i.name for i in obs.list()) == ["l", "new", "t"]


# --- watch -----------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_watcher_yields_the_current_objects_then_puts_deletes_and_meta_updates(js, obs):
    obs.put("a", b"1")
    obs.put("b", b"2")
    with obs.watch() as w:
        assert [i.name for i in w.initial()] == ["a", "b"]
        assert w.initial_done
        obs.put("c", b"3")
        obs.delete("a")
        obs.update_meta("b", description="new")
        live = [w.next(timeout=10) for _ in range(3)]
        assert [(i.name, i.deleted) for i in live] == [("c", False), ("a", True), ("b", False)]
        assert live[2].description == "new" and live[0].size == 1
        with pytest.raises(jss.TimeoutError):
            w.next(timeout=0.2)
    wait_for(lambda: consumers_of(js, obs) == [], 10, what="the watcher's consumer to be deleted")


@pytest.mark.timeout(30)
def test_a_watcher_of_an_empty_store_is_caught_up_at_once(obs):
    with obs.watch() as w:
        assert list(w.initial()) == [] and w.initial_done
        obs.put("x", b"1")
        assert w.next(timeout=10).name == "x"


@pytest.mark.timeout(30)
def test_include_history_yields_every_stored_meta(js, obs):
    # A meta written without a rollup (as some clients write links) keeps the one before it.
    subject = meta_subject(obs.bucket, "l")
    js.publish(subject, json.dumps({"name": "l", "bucket": obs.bucket, "description": "first"}).encode())
    js.publish(subject, json.dumps({"name": "l", "bucket": obs.bucket, "description": "second"}).encode())
    with obs.watch(include_history=True) as w:
        assert [i.description for i in w.initial()] == ["first", "second"]
    with obs.watch() as w:
        assert [i.description for i in w.initial()] == ["second"]


@pytest.mark.timeout(30)
def test_updates_only_starts_after_what_is_stored(obs):
    obs.put("a", b"1")
    with obs.watch(updates_only=True) as w:
        assert w.initial_done and list(w.initial()) == []
        obs.put("b", b"2")
        assert w.next(timeout=10).name == "b"
    with pytest.raises(ValueError):
        obs.watch(include_history=True, updates_only=True)


@pytest.mark.timeout(30)
def test_ignore_deletes_leaves_deleted_objects_out(obs):
    obs.put("a", b"1")
    obs.put("b", b"2")
    obs.delete("b")
    with obs.watch(ignore_deletes=True) as w:
        assert [i.name for i in w.initial()] == ["a"]
        obs.delete("a")
        obs.put("c", b"3")
        assert w.next(timeout=10).name == "c"


@pytest.mark.timeout(30)
def test_a_rename_is_seen_as_the_new_name(obs):
    obs.put("old", b"1")
    with obs.watch() as w:
        list(w.initial())
        obs.update_meta("old", name="new")
        seen = w.next(timeout=10)
        assert (seen.name, seen.deleted) == ("new", False)


# --- delete ----------------------------------------------------------------------------------------


def test_delete_stores_a_deleted_meta_and_purges_the_chunks(js, obs):
    info = obs.put("d", DATA, chunk_size=CHUNK)
    obs.delete("d")
    assert stored_subjects(js, obs) == {meta_subject(obs.bucket, "d"): 1}
    meta = raw_meta(js, obs, "d")
    assert meta["deleted"] is True and meta["nuid"] == info.nuid
    assert (meta["size"], meta["chunks"]) == (0, 0) and not meta.get("digest")
    deleted = obs.info("d", show_deleted=True)
    assert (deleted.deleted, deleted.size, deleted.chunks, deleted.digest) == (True, 0, 0, "")
    for call in (lambda: obs.get("d"), lambda: obs.get_bytes("d"), lambda: obs.info("d"), lambda: obs.delete("d")):
        with pytest.raises(jss.ObjectNotFoundError):
            call()
    with obs.get("d", show_deleted=True) as reader:
        assert reader.info.deleted and reader.read() == b""


def test_deleting_a_missing_object_is_object_not_found(obs):
    with pytest.raises(jss.ObjectNotFoundError):
        obs.delete("never")


# --- update_meta -----------------------------------------------------------------------------------


def test_update_meta_changes_only_what_is_given(js, obs):
    put = obs.put("a", DATA, chunk_size=CHUNK, description="d1", headers={"K": "v"}, metadata={"m": "1"})
    updated = obs.update_meta("a", description="d2")
    assert (updated.description, dict(updated.headers), updated.metadata) == ("d2", {"K": "v"}, {"m": "1"})
    obs.update_meta("a", headers={"K": ["v1", "v2"], "X": "y"})
    obs.update_meta("a", metadata={"m": "2"})
    info = obs.info("a")
    assert (info.description, info.metadata) == ("d2", {"m": "2"})
    assert info.headers.get_all("K") == ["v1", "v2"] and info.headers["X"] == "y"
    assert (info.nuid, info.size, info.chunks, info.digest) == (put.nuid, put.size, put.chunks, put.digest)
    assert raw_meta(js, obs, "a")["headers"] == {"K": ["v1", "v2"], "X": ["y"]}
    assert obs.get_bytes("a") == DATA


def test_update_meta_renames_an_object(js, obs):
    put = obs.put("a", DATA, chunk_size=CHUNK, description="keep")
    renamed = obs.update_meta("a", name="b")
    assert (renamed.name, renamed.nuid, renamed.description) == ("b", put.nuid, "keep")
    assert obs.get_bytes("b") == DATA
    with pytest.raises(jss.ObjectNotFoundError):
        obs.info("a")
    with pytest.raises(jss.ObjectNotFoundError):
        obs.info("a", show_deleted=True)
    assert stored_subjects(js, obs) == {chunk_subject(obs.bucket, put.nuid): 11, meta_subject(obs.bucket, "b"): 1}


def test_renaming_onto_a_live_object_is_refused(obs):
    obs.put("a", b"1")
    obs.put("b", b"2")
    with pytest.raises(jss.ObjectAlreadyExistsError, match="'b'") as err:
        obs.update_meta("a", name="b")
    assert (err.value.bucket, err.value.name) == (obs.bucket, "b")
    assert (obs.get_bytes("a"), obs.get_bytes("b")) == (b"1", b"2")


def test_renaming_onto_a_deleted_object_is_allowed(obs):
    obs.put("a", b"1")
    obs.put("b", b"2")
    obs.delete("b")
    obs.update_meta("a", name="b")
    assert obs.get_bytes("b") == b"1"


def test_update_meta_of_a_missing_or_deleted_object_is_object_not_found(obs):
    with pytest.raises(jss.ObjectNotFoundError):
        obs.update_meta("never", description="x")
    obs.put("d", b"1")
    obs.delete("d")
    with pytest.raises(jss.ObjectNotFoundError):
        obs.update_meta("d", description="x")


# --- links -----------------------------------------------------------------------------------------


def test_reading_a_link_reads_its_target(obs):
    target = obs.put("t", DATA, chunk_size=CHUNK)
    link = obs.add_link("l", target)
    assert link.link == jss.ObjectLink(obs.bucket, "t") and link.is_link
    assert (link.name, link.bucket, link.size, link.chunks, link.digest) == ("l", obs.bucket, 0, 0, "")
    stored = obs.info("l")
    assert stored.link == jss.ObjectLink(obs.bucket, "t")
    assert obs.get_bytes("l") == DATA
    with obs.get("l") as reader:
        assert (reader.info.name, reader.info.digest) == ("t", target.digest)
    obs.put("t", b"replaced")
    assert obs.get_bytes("l") == b"replaced"  # a link names its target; it follows the target's changes


def test_a_link_to_an_object_of_another_store(js, obs, bucket):
    other = js.create_object_store(bucket + "x", storage="memory")
    target = other.put("t", DATA, chunk_size=CHUNK)
    obs.add_link("l", target)
    assert obs.info("l").link == jss.ObjectLink(other.bucket, "t")
    assert obs.get_bytes("l") == DATA


def test_a_bucket_link_cannot_be_read(js, obs, bucket):
    other = js.create_object_store(bucket + "x", storage="memory")
    link = obs.add_bucket_link("dir", other)
    assert link.link == jss.ObjectLink(other.bucket, None)
    assert obs.info("dir").link.name is None
    with pytest.raises(ValueError, match=f"whole store '{other.bucket}'"):
        obs.get("dir")


def test_a_link_to_a_link_or_a_deleted_object_is_refused(obs):
    target = obs.put("t", b"x")
    link = obs.add_link("l", target)
    with pytest.raises(ValueError, match="itself a link"):
        obs.add_link("ll", link)
    obs.delete("t")
    with pytest.raises(ValueError, match="deleted"):
        obs.add_link("l2", obs.info("t", show_deleted=True))
    with pytest.raises(jss.ObjectNotFoundError):
        obs.get("l")  # its target is gone


def test_a_link_cannot_replace_an_object_but_may_replace_a_link(obs):
    a = obs.put("a", b"A")
    b = obs.put("b", b"B")
    with pytest.raises(jss.ObjectAlreadyExistsError):
        obs.add_link("b", a)
    assert obs.get_bytes("b") == b"B"
    obs.add_link("l", a)
    obs.add_link("l", b)
    assert obs.get_bytes("l") == b"B"


def test_deleting_a_link_leaves_its_target(obs):
    target = obs.put("t", DATA, chunk_size=CHUNK)
    obs.add_link("l", target)
    obs.delete("l")
    assert obs.get_bytes("t") == DATA
    with pytest.raises(jss.ObjectNotFoundError):
        obs.get("l")


# --- seal ------------------------------------------------------------------------------------------


def test_a_sealed_store_refuses_changes_and_still_reads(js, obs):
    target = obs.put("a", DATA, chunk_size=CHUNK)
    status = obs.seal()
    assert status.sealed and obs.status().sealed
    assert js.stream_info(obs.stream_name).config.sealed
    for call in (lambda: obs.put("b", b"x"), lambda: obs.put("a", b"x"), lambda: obs.delete("a"),
                 lambda: obs.update_meta("a", description="x"), lambda: obs.add_link("l", target)):
        with pytest.raises(jss.APIError, match="sealed"):
            call()
    assert obs.get_bytes("a") == DATA
    assert [i.name for i in obs.list()] == ["a"]


# --- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [jss.ObjectNotFoundError, jss.ObjectAlreadyExistsError, jss.DigestMismatchError,
                                 jss.BucketNotFoundError, jss.BucketExistsError])
def test_object_store_errors_are_jetstream_errors(cls):
    assert issubclass(cls, jss.JetStreamError)


# --- memory ----------------------------------------------------------------------------------------

MEMORY_PROBE = textwrap.dedent("""
    import gc, hashlib, json, pathlib, sys
    import jetstream_sync as jss

    def vm():
        out = {}
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024
        return out

    def reset_peak():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
            return True
        except OSError:
            return False

    url, bucket, mode, path = sys.argv[1:5]
    buf = bytearray(1 << 20)
    with jss.connect(url) as client:
        obs = client.jetstream().object_store(bucket)
        # Every code path once, small, so imports and first-use allocations are not counted.
        warm = pathlib.Path(path + ".warm")
        warm.write_bytes(b"w" * 3_000_000)
        obs.put("warm-up", warm)
        with obs.get("warm-up") as reader:
            while reader.readinto(buf):
                pass
        obs.delete("warm-up")
        gc.collect()
        reset = reset_peak()
        before = vm()
        if mode == "put":
            digest = obs.put("big", pathlib.Path(path)).digest
            size = pathlib.Path(path).stat().st_size
        else:
            sha, size = hashlib.sha256(), 0
            view = memoryview(buf)
            with obs.get("big") as reader:
                while True:
                    n = reader.readinto(buf)
                    if not n:
                        break
                    sha.update(view[:n])
                    size += n
            import base64
            digest = "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode()
        after = vm()
    print(json.dumps({"reset": reset, "before": before, "after": after, "digest": digest, "size": size}))
""")


def write_random_file(path: pathlib.Path, size: int) -> str:
    """Write ``size`` random bytes to ``path`` a MiB at a time; return their digest."""
    sha = hashlib.sha256()
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            piece = os.urandom(MiB)
            sha.update(piece)
            f.write(piece)
    return "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode()


def run_memory_probe(nats_server, bucket: str, mode: str, path: pathlib.Path, tmp_path) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(MEMORY_PROBE)
    root = str(pathlib.Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, str(script), nats_server.url, bucket, mode, str(path)],
                          capture_output=True, text=True, timeout=150, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def growth(result: dict) -> int:
    """The peak RSS during the call over the RSS before it (an upper bound when the peak could not be reset)."""
    return result["after"]["VmHWM"] - result["before"]["VmRSS"]


@pytest.mark.timeout(240)
def test_putting_a_64_mib_file_grows_rss_by_less_than_32_mib(js, nats_server, bucket, tmp_path):
    js.create_object_store(bucket, storage="memory")
    path = tmp_path / "big.bin"
    digest = write_random_file(path, 64 * MiB)
    result = run_memory_probe(nats_server, bucket, "put", path, tmp_path)
    assert (result["digest"], result["size"]) == (digest, 64 * MiB)
    assert growth(result) < 32 * MiB, result
    assert js.object_store(bucket).info("big").digest == digest


@pytest.mark.timeout(240)
def test_reading_a_64_mib_object_through_a_1_mib_buffer_grows_rss_by_less_than_32_mib(js, nats_server, bucket,
                                                                                      tmp_path):
    obs = js.create_object_store(bucket, storage="memory")
    path = tmp_path / "big.bin"
    digest = write_random_file(path, 64 * MiB)
    assert obs.put("big", path).digest == digest
    result = run_memory_probe(nats_server, bucket, "get", path, tmp_path)
    assert (result["digest"], result["size"]) == (digest, 64 * MiB)
    assert growth(result) < 32 * MiB, result


def test_progress_of_a_bytes_io_knows_its_total(obs):
    calls = []
    obs.put("b", io.BytesIO(DATA), chunk_size=CHUNK, progress=lambda done, total: calls.append(total))
    assert set(calls) == {len(DATA)}


def test_sealing_a_deleted_store_is_bucket_not_found(js, obs):
    js.delete_object_store(obs.bucket)
    with pytest.raises(jss.BucketNotFoundError, match=f"object store '{obs.bucket}' not found"):
        obs.seal()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("change", ["replaced", "deleted"])
def test_a_reader_of_an_object_replaced_or_deleted_meanwhile_says_so(js, obs, change):
    obs.put("big", os.urandom(160 * BIG_CHUNK))  # 20 MiB: more than the reader buffers
    with obs.get("big", timeout=2) as reader:
        buf = bytearray(BIG_CHUNK)
        assert reader.readinto(buf) == BIG_CHUNK
        if change == "replaced":
            obs.put("big", b"a new version")
        else:
            obs.delete("big")
        with pytest.raises(jss.ObjectNotFoundError, match=f"'big' of store '{obs.bucket}' was {change}"):
            while reader.readinto(buf):
                pass
    wait_for(lambda: consumers_of(js, obs) == [], 10, what="the reader's consumer to be deleted")
