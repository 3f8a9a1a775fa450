# Charter: the object store against other clients and on the wire: a store made by nats-py's object
# store and ours compared field by field; a 16 MiB + 22 B object's chunks, meta subject, rollup header
# and digest read off the wire by a plain nats-py subscription and STREAM.MSG.GET and recomputed here;
# tampered chunks and metas raising DigestMismatchError before the last bytes are handed out; objects
# put by nats-py read here and the other way round; metas written by hand as nats.go and nats.js write
# them (a link without a nuid) read here.
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import threading
import uuid

import nats
import nats.js.api
import nats.js.errors
import pytest

import jetstream_sync as jss

from conftest import wait_for

pytestmark = pytest.mark.timeout(90)

KiB = 1024
MiB = 1024 * KiB


class PlainNats:
    """A nats-py connection (and its JetStream context) on an asyncio thread of its own: a peer that is
    not jetstream_sync."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="plain-nats-peer", daemon=True)
        self.thread.start()
        self.nc = self.run(nats.connect(url))
        self.js = self.nc.jetstream()

    def run(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def collect(self, subject: str) -> list:
        """Every message on ``subject`` from now on, appended as it arrives."""
        got: list = []

        async def cb(msg):
            got.append(msg)

        async def go():
            await self.nc.subscribe(subject, cb=cb)
            await self.nc.flush()  # the server has the interest before we return

        self.run(go())
        return got

    def close(self) -> None:
        try:
            self.run(self.nc.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def peer(nats_server):
    p = PlainNats(nats_server.url)
    yield p
    p.close()


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


def chunks_of(js, obs, nuid: str) -> list[bytes]:
    """The object's chunk messages as stored, in order."""
    stream = js.stream(obs.stream_name)
    out = []
    for seq in range(1, stream.info().state.last_seq + 1):
        try:
            msg = stream.get_msg(seq)
        except jss.MessageNotFoundError:
            continue
        if msg.subject == f"$O.{obs.bucket}.C.{nuid}":
            out.append(msg.data)
    return out


def read_in_chunks(reader, size: int) -> tuple[list[bytes], BaseException | None]:
    """Read ``reader`` through a buffer of ``size`` bytes: what each readinto handed out, and the error
    that stopped it (None: it reached the end)."""
    buf = bytearray(size)
    got: list[bytes] = []
    try:
        while True:
            n = reader.readinto(buf)
            if not n:
                return got, None
            got.append(bytes(buf[:n]))
    except jss.DigestMismatchError as exc:
        return got, exc


# --- the store -------------------------------------------------------------------------------------


def stream_config_of(js, stream: str) -> dict:
    """The stream's config as the server reports it, its name and the store's name taken out."""
    cfg = js._jsapi.request(js._api.stream_info(stream), None, 10.0, idempotent=True)["config"]
    bucket = stream[4:]
    cfg.pop("name")
    cfg["subjects"] = [s.replace(f"$O.{bucket}.", "$O.<bucket>.") for s in cfg["subjects"]]
    return cfg


# nats-py writes these differently from nats.go (which this client follows):
NATS_PY_DIFFERS: dict[str, str] = {}


def test_a_store_made_by_nats_py_has_the_config_of_ours(js, peer, bucket):
    theirs, ours = bucket + "py", bucket + "js"
    peer.run(peer.js.create_object_store(theirs, config=nats.js.api.ObjectStoreConfig(
        description="models", ttl=3600.0, max_bytes=64 * MiB, storage=nats.js.api.StorageType.MEMORY)))
    js.create_object_store(ours, description="models", ttl=3600, max_bytes=64 * MiB, storage="memory")
    a, b = stream_config_of(js, f"OBJ_{theirs}"), stream_config_of(js, f"OBJ_{ours}")
    differs = {key: (a.get(key), b.get(key)) for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)}
    assert {key for key in differs} == set(NATS_PY_DIFFERS), differs
    assert b["subjects"] == ["$O.<bucket>.C.>", "$O.<bucket>.M.>"]
    assert (b["discard"], b["allow_rollup_hdrs"], b["allow_direct"]) == ("new", True, True)
    # Each client binds to the other's store.
    assert js.object_store(theirs).status().description == "models"

    async def status_of_ours():
        return await (await peer.js.object_store(ours)).status()

    assert peer.run(status_of_ours()).description == "models"


# --- the wire --------------------------------------------------------------------------------------

BLOB_NAME = "blob ~?"  # its URL-safe base64 has a '-' where the standard one has a '+', and padding


@pytest.mark.timeout(120)
def test_a_16_mib_and_22_byte_object_on_the_wire(js, peer, obs):
    blob = os.urandom(16 * MiB + 22)
    on_the_wire = peer.collect(f"$O.{obs.bucket}.>")
    info = obs.put(BLOB_NAME, blob)
    wait_for(lambda: len(on_the_wire) >= 130, 30, what="129 chunks and the meta on the wire")
    *chunks, meta = on_the_wire
    digest = "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).decode()
    assert (info.size, info.chunks, info.digest) == (16 * MiB + 22, 129, digest)
    # The chunks: all on one subject named by the object's nuid, 128 KiB each but the last.
    assert {m.subject for m in chunks} == {f"$O.{obs.bucket}.C.{info.nuid}"}
    assert [len(m.data) for m in chunks] == [128 * KiB] * 128 + [22]
    assert b"".join(m.data for m in chunks) == blob
    assert all(not m.headers for m in chunks)
    # The meta: on the name's URL-safe, padded base64, a subject rollup, nats.go's JSON.
    assert meta.subject == f"$O.{obs.bucket}.M.YmxvYiB-Pw=="
    assert meta.headers == {"Nats-Rollup": "sub"}
    doc = json.loads(meta.data)
    assert doc == {"name": BLOB_NAME, "options": {"max_chunk_size": 128 * KiB}, "bucket": obs.bucket,
                   "nuid": info.nuid, "size": 16 * MiB + 22, "mtime": "0001-01-01T00:00:00Z", "chunks": 129,
                   "digest": digest}
    # What the stream holds, through STREAM.MSG.GET by another client.
    stored = peer.run(peer.js.get_last_msg(obs.stream_name, meta.subject))
    assert json.loads(stored.data) == doc
    assert stored.headers["Nats-Rollup"] == "sub"
    state = peer.run(peer.js.stream_info(obs.stream_name, subjects_filter=f"$O.{obs.bucket}.>")).state
    assert state.subjects == {f"$O.{obs.bucket}.C.{info.nuid}": 129, meta.subject: 1}
    # And it reads back whole through a small buffer.
    sha = hashlib.sha256()
    with obs.get(BLOB_NAME) as reader:
        got, error = read_in_chunks(reader, 100 * KiB)
    assert error is None
    for piece in got:
        sha.update(piece)
    assert "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode() == digest


def test_a_tampered_chunk_raises_digest_mismatch_before_the_last_bytes(js, obs):
    data = os.urandom(4500)
    info = obs.put("t", data, chunk_size=1000)
    chunks = chunks_of(js, obs, info.nuid)
    assert [len(c) for c in chunks] == [1000] * 4 + [500]
    js.stream(obs.stream_name).purge(subject=f"$O.{obs.bucket}.C.{info.nuid}")
    chunks[1] = bytes([chunks[1][0] ^ 0xFF]) + chunks[1][1:]  # one bit flipped, same sizes
    for chunk in chunks:
        js.publish(f"$O.{obs.bucket}.C.{info.nuid}", chunk)
    with obs.get("t") as reader:
        got, error = read_in_chunks(reader, 1000)
    assert isinstance(error, jss.DigestMismatchError)
    assert error.expected == info.digest and error.actual == digest_of(b"".join(chunks))
    assert b"".join(got) == b"".join(chunks[:4])  # the last chunk was never handed out
    with pytest.raises(jss.DigestMismatchError):
        obs.get_bytes("t")


def test_a_rewritten_meta_digest_raises_digest_mismatch_before_the_last_bytes(js, obs):
    data = os.urandom(4500)
    info = obs.put("t", data, chunk_size=1000)
    doc = json.loads(js._jsapi.msg_get(obs.stream_name, last_by_subj=meta_subject(obs.bucket, "t")).data)
    doc["digest"] = digest_of(data + b"!")
    js.publish(meta_subject(obs.bucket, "t"), json.dumps(doc).encode(), headers={"Nats-Rollup": "sub"})
    with obs.get("t") as reader:
        got, error = read_in_chunks(reader, 1000)
    assert isinstance(error, jss.DigestMismatchError)
    assert (error.expected, error.actual) == (digest_of(data + b"!"), info.digest)
    assert b"".join(got) == data[:4000]


def test_a_size_that_does_not_match_raises_digest_mismatch(js, obs):
    data = os.urandom(4500)
    obs.put("t", data, chunk_size=1000)
    doc = json.loads(js._jsapi.msg_get(obs.stream_name, last_by_subj=meta_subject(obs.bucket, "t")).data)
    doc["size"] = 4501
    js.publish(meta_subject(obs.bucket, "t"), json.dumps(doc).encode(), headers={"Nats-Rollup": "sub"})
    with pytest.raises(jss.DigestMismatchError, match="4500 bytes"):
        obs.get_bytes("t")


@pytest.mark.timeout(60)
def test_a_chunk_missing_from_the_stream_raises_digest_mismatch_instead_of_waiting(js, obs):
    # As nats.go reads: the last chunk on the subject (nothing pending after it) ends the object.
    info = obs.put("t", os.urandom(4500), chunk_size=1000)
    stream = js.stream(obs.stream_name)
    seqs = [seq for seq in range(1, stream.info().state.last_seq + 1)
            if stream.get_msg(seq).subject == f"$O.{obs.bucket}.C.{info.nuid}"]
    stream.delete_msg(seqs[2])
    with obs.get("t", timeout=5) as reader:
        got, error = read_in_chunks(reader, 1000)
    assert isinstance(error, jss.DigestMismatchError)
    assert len(b"".join(got)) < 4000


# --- nats-py -------------------------------------------------------------------------------------


def test_an_object_put_by_nats_py_reads_here(js, peer, obs):
    data = os.urandom(300 * KiB + 7)
    meta = nats.js.api.ObjectMeta(name="from-py", description="put by nats-py", headers={"K": ["v1", "v2"]})

    async def put():
        store = await peer.js.object_store(obs.bucket)
        return await store.put("from-py", data, meta=meta)

    theirs = peer.run(put())
    assert theirs.digest == digest_of(data)
    info = obs.info("from-py")
    assert (info.nuid, info.size, info.chunks, info.digest) == (theirs.nuid, len(data), 3, digest_of(data))
    assert (info.description, info.chunk_size) == ("put by nats-py", 128 * KiB)
    assert info.headers["K"] == "v1" and info.headers.get_all("K") == ["v1", "v2"]
    assert obs.get_bytes("from-py") == data
    with obs.get("from-py") as reader:
        got, error = read_in_chunks(reader, 64 * KiB)
    assert error is None and b"".join(got) == data
    assert [i.name for i in obs.list()] == ["from-py"]


def test_an_object_put_here_reads_in_nats_py(peer, obs):
    data = os.urandom(300 * KiB + 7)
    ours = obs.put("from-us", data, description="put here", headers={"K": "v"}, metadata={"m": "1"})

    async def read():
        store = await peer.js.object_store(obs.bucket)
        return await store.get_info("from-us"), await store.get("from-us"), await store.list()

    info, result, listed = peer.run(read())
    assert result.data == data
    assert (info.nuid, info.size, info.chunks, info.digest) == (ours.nuid, len(data), 3, digest_of(data))
    assert (info.description, info.headers, info.options.max_chunk_size) == ("put here", {"K": ["v"]}, 128 * KiB)
    assert [i.name for i in listed] == ["from-us"]


def test_a_link_put_here_reads_in_nats_py(js, peer, obs, bucket):
    other = js.create_object_store(bucket + "x", storage="memory")
    data = os.urandom(5000)
    obs.add_link("l", other.put("t", data))

    async def read():
        return await (await peer.js.object_store(obs.bucket)).get("l")

    assert peer.run(read()).data == data


def test_deletes_by_either_client_are_seen_by_the_other(js, peer, obs):
    obs.put("mine", b"1" * 3000)
    obs.put("theirs", b"2" * 3000)

    async def delete_and_look():
        store = await peer.js.object_store(obs.bucket)
        await store.delete("theirs")
        try:
            await store.get_info("mine")
        except nats.js.errors.NotFoundError as exc:
            return exc
        return None

    obs.delete("mine")
    seen = peer.run(delete_and_look())
    assert isinstance(seen, nats.js.errors.NotFoundError)
    with pytest.raises(jss.ObjectNotFoundError):
        obs.info("theirs")
    assert obs.info("theirs", show_deleted=True).deleted
    assert list(obs.list()) == []


# --- metas as other clients write them -------------------------------------------------------------


def test_an_object_as_nats_go_writes_it_reads_here(js, obs):
    data = os.urandom(2500)
    nuid = "GoNuid0123456789abcdEF"
    for i in range(0, len(data), 1000):
        js.publish(f"$O.{obs.bucket}.C.{nuid}", data[i:i + 1000])
    doc = {"name": "go", "description": "by nats.go", "headers": {"Content-Type": ["text/plain"]},
           "metadata": {"owner": "go"}, "options": {"max_chunk_size": 1000}, "bucket": obs.bucket, "nuid": nuid,
           "size": len(data), "mtime": "0001-01-01T00:00:00Z", "chunks": 3, "digest": digest_of(data)}
    js.publish(meta_subject(obs.bucket, "go"), json.dumps(doc).encode(), headers={"Nats-Rollup": "sub"})
    info = obs.info("go")
    assert (info.description, info.headers["Content-Type"], info.metadata) == (
        "by nats.go", "text/plain", {"owner": "go"})
    assert (info.nuid, info.size, info.chunks, info.chunk_size, info.digest) == (nuid, 2500, 3, 1000, digest_of(data))
    assert info.mtime is not None  # the meta message's time, not the zero time in the JSON
    assert obs.get_bytes("go") == data
    # A meta update keeps keys this client does not know.
    doc["future"] = {"x": 1}
    js.publish(meta_subject(obs.bucket, "go"), json.dumps(doc).encode(), headers={"Nats-Rollup": "sub"})
    obs.update_meta("go", description="changed")
    stored = json.loads(js._jsapi.msg_get(obs.stream_name, last_by_subj=meta_subject(obs.bucket, "go")).data)
    assert stored["future"] == {"x": 1} and stored["description"] == "changed"


def test_links_written_without_a_nuid_as_nats_js_writes_them_are_readable(js, obs, bucket):
    other = js.create_object_store(bucket + "x", storage="memory")
    here = obs.put("here", b"same store")
    there = other.put("there", b"other store")
    # nats.js writes a link's meta with the target's bucket, no nuid, no size, no rollup header.
    for name, target in (("to-here", here), ("to-there", there)):
        link = {"bucket": target.bucket, "name": target.name}
        doc = {"name": name, "bucket": target.bucket, "options": {"link": link}}
        js.publish(meta_subject(obs.bucket, name), json.dumps(doc).encode())
    doc = {"name": "dir", "bucket": obs.bucket, "options": {"link": {"bucket": other.bucket}}}
    js.publish(meta_subject(obs.bucket, "dir"), json.dumps(doc).encode())
    info = obs.info("to-there")
    assert (info.nuid, info.link) == ("", jss.ObjectLink(other.bucket, "there"))
    assert obs.get_bytes("to-here") == b"same store"
    assert obs.get_bytes("to-there") == b"other store"
    assert obs.info("dir").link == jss.ObjectLink(other.bucket, None)
    with pytest.raises(ValueError, match="whole store"):
        obs.get("dir")
    assert sorted(i.name for i in obs.list()) == ["dir", "here", "to-here", "to-there"]
    obs.delete("to-here")  # deleting a link leaves its target
    assert obs.get_bytes("here") == b"same store"
