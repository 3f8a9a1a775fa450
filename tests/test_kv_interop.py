# Charter: the key-value store as other clients and the wire see it, against a real nats-server:
# buckets and values written by nats-py's own KV API read here and the other way round (values,
# revisions, history, keys, watchers, delete and purge markers); the stream a bucket made here is,
# field by field, against the one nats.go makes and the one nats-py makes for the same options;
# revisions as the raw PubAck sequences; the headers writes put on the wire (KV-Operation,
# Nats-Rollup, Nats-TTL, the expected last subject sequence); per-key TTLs and MaxAge markers
# (limit_marker_ttl) as watchers see them; and KeyValueConfig's rules and round trip (pure).
# nats-py runs in an asyncio loop of the test's own (asyncio.run) under a hard deadline; this
# client's blocking calls made meanwhile run on a worker thread of that loop.
from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import nats
import nats.js.api
import nats.js.errors
import pytest

import jetstream_sync as jss
from jetstream_sync import KeyValueConfig, KeyValueOp
from jetstream_sync.config import DiscardPolicy, Placement, RePublish, StorageType, StoreCompression, StreamSource

from conftest import assert_sends_nothing, wait_for

PUT, DEL, PURGE = KeyValueOp.PUT, KeyValueOp.DELETE, KeyValueOp.PURGE
#: The headers a key-value write may carry on the wire.
KV_OP, ROLLUP, TTL, EXPECTED = "KV-Operation", "Nats-Rollup", "Nats-TTL", "Nats-Expected-Last-Subject-Sequence"

#: The longest a test's whole nats-py session may take (connect, calls, close).
NATS_PY_DEADLINE = 60.0
#: How long a test waits for the server to expire a value or a marker (TTLs of 1 s; a loaded machine).
EXPIRY_DEADLINE = 30.0


@pytest.fixture
def bucket():
    """A bucket name of this test's own (its stream is deleted with the rest by ``js``)."""
    return "KVI" + uuid.uuid4().hex[:10].upper()


def with_nats_py(url: str, body, deadline: float = NATS_PY_DEADLINE):
    """Run ``body(nc, njs)`` on a fresh nats-py connection in an asyncio loop of its own; return its
    result. The whole session (connect, body, close) is cancelled past ``deadline`` seconds."""

    async def main():
        nc = await nats.connect(url, name="nats-py-peer", connect_timeout=5, allow_reconnect=False)
        try:
            return await body(nc, nc.jetstream(timeout=10.0))
        finally:
            await nc.close()

    return asyncio.run(asyncio.wait_for(main(), deadline))


async def nats_py_watch_until_marker(watcher, timeout: float = 10.0) -> list:
    """What a nats-py watcher yields up to its ``None`` marker (the marker itself last)."""
    got = []
    while True:
        entry = await watcher.updates(timeout=timeout)
        got.append(entry)
        if entry is None:
            return got


async def subscribed(nc, njs, subject: str, cb):
    """A raw nats-py subscription the server has registered when this returns: the JetStream request
    after the SUB is answered only once the server has read the SUB before it."""
    sub = await nc.subscribe(subject, cb=cb)
    await njs.account_info()
    return sub


def seen_on_the_wire(url: str, subject: str, writes, count: int):
    """Run ``writes()`` (this client's blocking calls, on a worker thread) while a raw nats-py
    subscription on ``subject`` records every message published there; return ``(messages,
    writes' result)`` with the first ``count`` messages as ``(subject, headers, data)``."""

    async def body(nc, njs):
        got: list = []
        enough = asyncio.Event()

        async def cb(msg):
            got.append((msg.subject, dict(msg.headers or {}), msg.data))
            if len(got) >= count:
                enough.set()

        sub = await subscribed(nc, njs, subject, cb)
        result = await asyncio.to_thread(writes)
        await asyncio.wait_for(enough.wait(), 30.0)
        await sub.unsubscribe()
        return got[:count], result

    return with_nats_py(url, body)


def raw_stream_config(url: str, *streams: str) -> list[dict]:
    """The config each stream's STREAM.INFO answer carries, as JSON, read with a raw nats-py request."""

    async def body(nc, njs):
        configs = []
        for stream in streams:
            resp = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=10.0)
            configs.append(json.loads(resp.data)["config"])
        return configs

    return with_nats_py(url, body)


def assert_no_consumer_left(js: jss.JetStream, bucket: str) -> None:
    """Every watcher this test opened on the bucket is gone from the server (the contract: within 5 s)."""
    wait_for(lambda: not list(js.consumer_names(f"KV_{bucket}")), timeout=10.0, interval=0.1,
             what=f"the watchers' consumers on KV_{bucket} to be deleted")


def ops(entries) -> list[tuple]:
    return [(e.key, e.operation, e.revision) for e in entries]


# --- buckets and values written by nats-py's KV, read here ------------------------------------------


def test_values_nats_py_wrote_are_read_here_with_their_revisions_and_markers(js, nats_server, bucket):
    async def write(nc, njs):
        kv = await njs.create_key_value(bucket=bucket, history=5)
        revs = {"a1": await kv.put("cfg.a", b"1"), "a2": await kv.put("cfg.a", b"2")}
        revs["b"] = await kv.create("cfg.b", b"B")
        revs["a3"] = await kv.update("cfg.a", b"3", last=revs["a2"])
        revs["c"] = await kv.put("cfg.c", b"C")
        await kv.delete("cfg.b")  # nats-py returns no revision: the next sequences are the markers'
        await kv.purge("cfg.c")
        return revs

    revs = with_nats_py(nats_server.url, write)
    deleted, purged = revs["c"] + 1, revs["c"] + 2

    assert bucket in set(js.key_value_names())
    kv = js.key_value(bucket)
    assert kv.status().history == 5
    current = kv.get("cfg.a")
    assert (current.value, current.revision, current.operation) == (b"3", revs["a3"], PUT)
    assert kv.get("cfg.a", revision=revs["a1"]).value == b"1"
    assert kv["cfg.a"] == b"3"
    for gone in ("cfg.b", "cfg.c"):
        with pytest.raises(jss.KeyNotFoundError):
            kv.get(gone)
        assert gone not in kv

    assert [(e.value, e.revision, e.operation) for e in kv.history("cfg.a")] == [
        (b"1", revs["a1"], PUT), (b"2", revs["a2"], PUT), (b"3", revs["a3"], PUT)]
    assert ops(kv.history("cfg.b")) == [("cfg.b", PUT, revs["b"]), ("cfg.b", DEL, deleted)]
    assert ops(kv.history("cfg.c")) == [("cfg.c", PURGE, purged)]  # the purge rolled up what came before
    assert list(kv.keys()) == ["cfg.a"]
    with kv.watch() as watcher:
        assert ops(watcher.initial()) == [("cfg.a", PUT, revs["a3"]), ("cfg.b", DEL, deleted),
                                          ("cfg.c", PURGE, purged)]
        assert watcher.initial_done

    # nats-py's markers free a key for create() here, as ours do
    assert kv.create("cfg.b", "again") == purged + 1
    with pytest.raises(jss.KeyExistsError):
        kv.create("cfg.a", "taken")
    assert kv.update("cfg.a", "4", revs["a3"]) == purged + 2
    assert_no_consumer_left(js, bucket)


def test_a_watcher_here_sees_nats_py_changes_as_they_are_stored(js, nats_server, bucket):
    kv = js.create_key_value(bucket, history=3)
    with kv.watch("orders.>") as watcher:
        assert list(watcher.initial()) == [] and watcher.initial_done

        async def write(nc, njs):
            nkv = await njs.key_value(bucket)
            first = await nkv.put("orders.1", b"new")
            await nkv.put("other", b"not watched")
            second = await nkv.update("orders.1", b"paid", last=first)
            await nkv.delete("orders.1")
            await nkv.purge("orders.1")
            return first, second

        first, second = with_nats_py(nats_server.url, write)
        live = [watcher.next(timeout=10.0) for _ in range(4)]
    assert [(e.key, e.operation, e.value, e.revision) for e in live] == [
        ("orders.1", PUT, b"new", first), ("orders.1", PUT, b"paid", second),
        ("orders.1", DEL, b"", second + 1), ("orders.1", PURGE, b"", second + 2)]
    assert all(e.bucket == bucket for e in live)
    assert_no_consumer_left(js, bucket)


# --- a bucket made and written here, read by nats-py's KV ---------------------------------------------


def test_values_written_here_are_read_by_nats_pys_kv(js, nats_server, bucket):
    kv = js.create_key_value(bucket, history=5)
    a1 = kv.put("svc.a", "1")
    a2 = kv.update("svc.a", b"2", a1)
    b = kv.create("svc.b", "B")
    c = kv.put("svc.c", "C")
    deleted = kv.delete("svc.b")
    purged = kv.purge("svc.c")
    assert (a1, a2, b, c, deleted, purged) == (1, 2, 3, 4, 5, 6)

    async def read(nc, njs):
        nkv = await njs.key_value(bucket)
        got = {}
        entry = await nkv.get("svc.a")
        got["a"] = (entry.value, entry.revision)
        got["a at 1"] = (await nkv.get("svc.a", revision=a1)).value
        for key in ("svc.b", "svc.c"):
            try:
                await nkv.get(key)
                got[key] = "found"
            except nats.js.errors.KeyNotFoundError as exc:
                got[key] = exc.op
        got["keys"] = await nkv.keys()
        got["history a"] = [(e.value, e.revision, e.operation) for e in await nkv.history("svc.a")]
        got["history b"] = [(e.revision, e.operation) for e in await nkv.history("svc.b")]
        got["history c"] = [(e.revision, e.operation) for e in await nkv.history("svc.c")]
        watcher = await nkv.watchall()
        got["watch"] = [None if e is None else (e.key, e.operation, e.revision)
                        for e in await nats_py_watch_until_marker(watcher)]
        await watcher.stop()
        got["recreated"] = await nkv.create("svc.b", b"again")  # our DEL marker frees the key there too
        try:
            await nkv.create("svc.a", b"taken")
            got["create existing"] = "created"
        except nats.js.errors.KeyWrongLastSequenceError:
            got["create existing"] = "refused"
        got["status"] = (await nkv.status()).history
        return got

    got = with_nats_py(nats_server.url, read)
    assert got["a"] == (b"2", a2) and got["a at 1"] == b"1"
    assert (got["svc.b"], got["svc.c"]) == ("DEL", "PURGE")
    assert got["keys"] == ["svc.a"]
    assert got["history a"] == [(b"1", a1, None), (b"2", a2, None)]  # nats-py: a put has no operation
    assert got["history b"] == [(b, None), (deleted, "DEL")]
    assert got["history c"] == [(purged, "PURGE")]
    assert got["watch"] == [("svc.a", None, a2), ("svc.b", "DEL", deleted), ("svc.c", "PURGE", purged), None]
    assert got["recreated"] == purged + 1 and got["create existing"] == "refused"
    assert got["status"] == 5
    assert kv.get("svc.b").value == b"again"


def test_a_nats_py_watcher_sees_changes_made_here_after_its_initial_marker(js, nats_server, bucket):
    kv = js.create_key_value(bucket)

    async def watch(nc, njs):
        watcher = await (await njs.key_value(bucket)).watchall()
        first = await watcher.updates(timeout=10.0)  # an empty bucket: the marker comes first

        def writes():
            return [kv.put("k", "v1"), kv.put("k", "v2"), kv.delete("k"), kv.create("k", "v3"), kv.purge("k")]

        revs = await asyncio.to_thread(writes)
        live = [await watcher.updates(timeout=10.0) for _ in revs]
        await watcher.stop()
        return first, revs, [(e.key, e.value, e.operation, e.revision) for e in live]

    first, revs, live = with_nats_py(nats_server.url, watch)
    assert first is None
    assert live == [("k", b"v1", None, revs[0]), ("k", b"v2", None, revs[1]), ("k", b"", "DEL", revs[2]),
                    ("k", b"v3", None, revs[3]), ("k", b"", "PURGE", revs[4])]


# --- the stream a bucket is: here, nats.go, nats-py ----------------------------------------------------


def nats_go_stream_request(bucket: str, *, history: int = 0, ttl: float = 0.0, max_value_size: int = 0,
                           max_bytes: int = 0, storage: str = "file", replicas: int = 0, compression: bool = False,
                           description: str = "", metadata: dict | None = None,
                           limit_marker_ttl: float = 0.0) -> dict:
    """The STREAM.CREATE request nats.go sends for a bucket made with these options: its
    KeyValueConfig's zero values turned into the stream config it builds, marshalled as Go does
    (fields tagged omitempty left out when zero)."""
    duplicates = ttl if 0 < ttl < 120.0 else 120.0
    request = {
        "name": f"KV_{bucket}", "subjects": [f"$KV.{bucket}.>"], "retention": "limits", "max_consumers": -1,
        "max_msgs": -1, "max_bytes": max_bytes or -1, "discard": "new", "max_age": int(ttl * 1e9),
        "max_msgs_per_subject": history or 1, "max_msg_size": max_value_size or -1, "storage": storage,
        "num_replicas": replicas or 1, "duplicate_window": int(duplicates * 1e9), "deny_delete": True,
        "allow_rollup_hdrs": True, "compression": "s2" if compression else "none", "allow_direct": True,
        "mirror_direct": False, "consumer_limits": {},
    }
    if description:
        request["description"] = description
    if metadata:
        request["metadata"] = metadata
    if limit_marker_ttl:
        request.update(allow_msg_ttl=True, subject_delete_marker_ttl=int(limit_marker_ttl * 1e9))
    return request


def comparable(config: dict) -> dict:
    """A bucket's stream config without what names it, and without the metadata the server adds."""
    config = {k: v for k, v in config.items() if k not in ("name", "subjects")}
    metadata = {k: v for k, v in (config.pop("metadata", None) or {}).items() if not k.startswith("_nats.")}
    if metadata:
        config["metadata"] = metadata
    return config


def differing(a: dict, b: dict) -> dict:
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


BUCKET_OPTIONS = [
    pytest.param({}, id="defaults"),
    pytest.param({"history": 10, "ttl": 90.0, "max_value_size": 1024, "max_bytes": 1 << 20, "replicas": 1,
                  "description": "service settings"}, id="limits-and-short-ttl"),
    pytest.param({"history": 64, "ttl": 600.0, "storage": "memory"}, id="max-history-long-ttl-memory"),
    pytest.param({"history": 3, "ttl": 30.0, "limit_marker_ttl": 5.0}, id="limit-marker-ttl"),
]


@pytest.mark.parametrize("options", BUCKET_OPTIONS + [
    pytest.param({"compression": True, "max_bytes": 4096, "metadata": {"team": "ops"}}, id="compression-metadata")])
def test_a_bucket_made_here_is_the_stream_nats_go_makes(js, nats_server, bucket, options):
    js.create_key_value(bucket, **options)

    async def as_nats_go(nc, njs):
        resp = await nc.request(f"$JS.API.STREAM.CREATE.KV_GO{bucket}",
                                json.dumps(nats_go_stream_request(f"GO{bucket}", **options)).encode(), timeout=10.0)
        return json.loads(resp.data)

    created = with_nats_py(nats_server.url, as_nats_go)
    assert "error" not in created, created
    ours, go = raw_stream_config(nats_server.url, f"KV_{bucket}", f"KV_GO{bucket}")
    assert ours["subjects"] == [f"$KV.{bucket}.>"]
    assert differing(comparable(ours), comparable(go)) == {}


@pytest.mark.parametrize("options", BUCKET_OPTIONS)
def test_a_bucket_made_here_differs_from_nats_pys_only_where_nats_py_departs_from_nats_go(js, nats_server, bucket,
                                                                                          options):
    js.create_key_value(bucket, **options)
    py_options = dict(options)
    if "storage" in py_options:
        py_options["storage"] = nats.js.api.StorageType(py_options["storage"])

    async def make(nc, njs):
        await njs.create_key_value(bucket=f"PY{bucket}", **py_options)
        resp = await nc.request(f"$JS.API.STREAM.CREATE.KV_GO{bucket}",
                                json.dumps(nats_go_stream_request(f"GO{bucket}", **options)).encode(), timeout=10.0)
        assert "error" not in json.loads(resp.data)

    with_nats_py(nats_server.url, make)
    ours, py, go = map(comparable, raw_stream_config(nats_server.url, f"KV_{bucket}", f"KV_PY{bucket}",
                                                     f"KV_GO{bucket}"))
    ours_vs_py = differing(ours, py)
    py_vs_go = differing(py, go)
    assert set(ours_vs_py) <= set(py_vs_go), (
        f"fields where this bucket differs from nats-py's while nats-py agrees with nats.go: "
        f"{ {k: v for k, v in ours_vs_py.items() if k not in py_vs_go} }")


# --- revisions are the stream sequences the server acknowledges ------------------------------------------


def test_revisions_are_the_sequences_in_the_servers_raw_pub_acks(js, nats_server, bucket):
    kv = js.create_key_value(bucket, history=10)
    prefix = f"$KV.{bucket}."

    async def raw_publish(nc, njs, items):
        acks = []
        for key, value in items:
            resp = await nc.request(prefix + key, value, timeout=10.0)
            acks.append(json.loads(resp.data))
        return acks

    acks = with_nats_py(nats_server.url, lambda nc, njs: raw_publish(
        nc, njs, [("k1", b"raw-a"), ("k2", b"raw-b"), ("k1", b"raw-c")]))
    assert all(a["stream"] == f"KV_{bucket}" for a in acks)
    seqs = [a["seq"] for a in acks]
    assert kv.get("k1").revision == seqs[2] and kv.get("k2").revision == seqs[1]
    assert kv.get("k1", revision=seqs[0]).value == b"raw-a"
    assert [(e.value, e.revision) for e in kv.history("k1")] == [(b"raw-a", seqs[0]), (b"raw-c", seqs[2])]

    ours = [kv.put("k1", "ours-d"), kv.delete("k2"), kv.create("k3", "ours-e")]
    ours.append(kv.update("k3", "ours-f", ours[-1]))
    assert ours == list(range(seqs[2] + 1, seqs[2] + 5))
    (after,) = with_nats_py(nats_server.url, lambda nc, njs: raw_publish(nc, njs, [("k4", b"raw-g")]))
    assert after["seq"] == ours[-1] + 1

    async def raw_get(nc, njs):
        got = []
        for seq in ours:
            resp = await nc.request(f"$JS.API.DIRECT.GET.KV_{bucket}", json.dumps({"seq": seq}).encode(), timeout=10.0)
            got.append((resp.headers["Nats-Sequence"], resp.headers["Nats-Subject"], resp.data))
        return got

    assert with_nats_py(nats_server.url, raw_get) == [
        (str(ours[0]), prefix + "k1", b"ours-d"), (str(ours[1]), prefix + "k2", b""),
        (str(ours[2]), prefix + "k3", b"ours-e"), (str(ours[3]), prefix + "k3", b"ours-f")]
    with kv.watch(include_history=True) as watcher:
        assert [e.revision for e in watcher.initial()] == seqs + ours + [after["seq"]]
    assert kv.status().stream_info.state.last_seq == after["seq"]
    assert_no_consumer_left(js, bucket)


# --- the headers on the wire -----------------------------------------------------------------------------------


def test_put_sends_the_value_alone_and_delete_and_purge_send_their_markers(js, nats_server, bucket):
    kv = js.create_key_value(bucket, history=5)

    def writes():
        put = kv.put("k", "v")
        return [put, kv.delete("k"), kv.put("k", "w"), kv.purge("k")]

    wire, revs = seen_on_the_wire(nats_server.url, f"$KV.{bucket}.>", writes, 4)
    subject = f"$KV.{bucket}.k"
    assert wire == [(subject, {}, b"v"), (subject, {KV_OP: "DEL"}, b""), (subject, {}, b"w"),
                    (subject, {KV_OP: "PURGE", ROLLUP: "sub"}, b"")]
    assert [e.revision for e in kv.history("k")] == [revs[3]]  # the rollup left the marker alone


def test_delete_and_purge_with_last_send_the_revision_they_expect(js, nats_server, bucket):
    kv = js.create_key_value(bucket, history=5)

    def writes():
        first = kv.put("k", "v")
        deleted = kv.delete("k", last=first)
        with pytest.raises(jss.KeyRevisionMismatchError):
            kv.purge("k", last=first)
        kv.purge("k", last=deleted)
        return first, deleted

    wire, (first, deleted) = seen_on_the_wire(nats_server.url, f"$KV.{bucket}.>", writes, 4)
    assert [h for _, h, _ in wire] == [
        {}, {KV_OP: "DEL", EXPECTED: str(first)}, {KV_OP: "PURGE", ROLLUP: "sub", EXPECTED: str(first)},
        {KV_OP: "PURGE", ROLLUP: "sub", EXPECTED: str(deleted)}]


def test_create_expects_no_revision_and_update_expects_the_last_one(js, nats_server, bucket):
    kv = js.create_key_value(bucket, history=5)

    def writes():
        created = kv.create("k", "v1")
        kv.update("k", "v2", created)
        with pytest.raises(jss.KeyRevisionMismatchError):
            kv.update("k", "v3", created)
        deleted = kv.delete("k")
        kv.create("k", "v4")  # refused as "0", then sent again expecting the delete marker
        return created, deleted

    wire, (created, deleted) = seen_on_the_wire(nats_server.url, f"$KV.{bucket}.>", writes, 6)
    assert [(h.get(EXPECTED), d) for _, h, d in wire] == [
        ("0", b"v1"), (str(created), b"v2"), (str(created), b"v3"), (None, b""), ("0", b"v4"),
        (str(deleted), b"v4")]
    assert kv.get("k").value == b"v4"


def test_ttls_are_sent_as_nats_ttl_headers_the_server_accepts(js, nats_server, bucket):
    kv = js.create_key_value(bucket, history=5, limit_marker_ttl=1)

    def writes():
        return [kv.create("lease.a", "x", ttl=5), kv.create("lease.b", "x", ttl=timedelta(minutes=2)),
                kv.create("lease.c", "x", ttl=1.5), kv.create("lease.d", "x", ttl="never"),
                kv.purge("lease.a", ttl=3)]

    wire, revs = seen_on_the_wire(nats_server.url, f"$KV.{bucket}.>", writes, 5)
    assert [(s.rsplit(".", 1)[1], h.get(TTL)) for s, h, _ in wire] == [
        ("a", "5"), ("b", "120"), ("c", "1.5s"), ("d", "never"), ("a", "3")]
    assert wire[4][1] == {KV_OP: "PURGE", ROLLUP: "sub", TTL: "3"}
    assert all(h[EXPECTED] == "0" for _, h, _ in wire[:4])
    assert revs == [1, 2, 3, 4, 5]


# --- limit_marker_ttl: per-key TTLs and MaxAge markers --------------------------------------------------------


def test_a_key_created_with_a_ttl_disappears_and_watchers_see_it_purged(js, nats_server, bucket):
    kv = js.create_key_value(bucket, limit_marker_ttl=30)
    with kv.watch() as watcher:
        assert list(watcher.initial()) == []
        taken = kv.create("lease", "holder-1", ttl=1)
        assert ops([watcher.next(timeout=10.0)]) == [("lease", PUT, taken)]
        expired = watcher.next(timeout=EXPIRY_DEADLINE)
    assert (expired.key, expired.operation, expired.value, expired.revision) == ("lease", PURGE, b"", taken + 1)
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("lease")
    assert list(kv.keys()) == []
    assert ops(kv.history("lease")) == [("lease", PURGE, expired.revision)]
    assert_no_consumer_left(js, bucket)  # before nats-py's history, whose consumer outlives it

    async def raw_marker(nc, njs):
        resp = await nc.request(f"$JS.API.DIRECT.GET.KV_{bucket}",
                                json.dumps({"last_by_subj": f"$KV.{bucket}.lease"}).encode(), timeout=10.0)
        history = await (await njs.key_value(bucket)).history("lease")
        return dict(resp.headers), [(e.revision, e.operation) for e in history]

    headers, py_history = with_nats_py(nats_server.url, raw_marker)
    assert headers["Nats-Marker-Reason"] == "MaxAge" and headers["Nats-Sequence"] == str(expired.revision)
    assert KV_OP not in headers  # the server's own marker, not a client's purge
    assert py_history == [(expired.revision, "PURGE")]  # nats-py reads the server's marker as a purge too
    assert kv.create("lease", "holder-2", ttl=1) == expired.revision + 1  # the lease can be taken again


def test_values_older_than_the_bucket_ttl_leave_markers_watchers_see_as_purge(js, nats_server, bucket):
    kv = js.create_key_value(bucket, ttl=1, limit_marker_ttl=5)
    with kv.watch("session.*") as watcher, kv.watch("session.*", ignore_deletes=True) as quiet:
        assert list(watcher.initial()) == [] and list(quiet.initial()) == []
        revs = [kv.put("session.1", "alice"), kv.put("session.2", "bob")]
        assert ops([watcher.next(timeout=10.0) for _ in revs]) == [("session.1", PUT, revs[0]),
                                                                   ("session.2", PUT, revs[1])]
        expired = [watcher.next(timeout=EXPIRY_DEADLINE) for _ in revs]
        assert sorted((e.key, e.operation) for e in expired) == [("session.1", PURGE), ("session.2", PURGE)]
        assert all(e.revision > revs[1] for e in expired)
        # ignore_deletes leaves the server's markers out too: after the two values, the next thing
        # it yields is a value stored after the markers
        later = kv.put("session.3", "carol")
        assert ops([quiet.next(timeout=10.0) for _ in range(3)]) == [
            ("session.1", PUT, revs[0]), ("session.2", PUT, revs[1]), ("session.3", PUT, later)]
        assert later > max(e.revision for e in expired)
    for key in ("session.1", "session.2"):
        with pytest.raises(jss.KeyNotFoundError):
            kv.get(key)
    assert_no_consumer_left(js, bucket)


# --- the bucket's config: rules and round trip (pure) --------------------------------------------------------


ROUND_TRIP_CONFIGS = [
    pytest.param(KeyValueConfig(bucket="plain", storage=StorageType.FILE), id="plain"),
    pytest.param(KeyValueConfig(bucket="full", description="d", history=64, ttl=3600.0, max_value_size=1024,
                                max_bytes=1 << 30, storage=StorageType.MEMORY, replicas=3, compression=True,
                                metadata={"team": "ops"}, placement=Placement(cluster="east", tags=["ssd"]),
                                republish=RePublish(src="$KV.full.>", dest="audit.>", headers_only=True),
                                limit_marker_ttl=10.0), id="every-field"),
    pytest.param(KeyValueConfig(bucket="short", storage="file", ttl=timedelta(seconds=30), limit_marker_ttl=1),
                 id="short-ttl-min-marker"),
    pytest.param(KeyValueConfig(bucket="copy", storage="file", mirror="origin"), id="mirror"),
]


@pytest.mark.parametrize("config", ROUND_TRIP_CONFIGS)
def test_a_bucket_config_survives_the_trip_through_its_stream_config(config):
    stream = config.stream_config()
    assert KeyValueConfig.from_stream_config(stream) == config
    assert KeyValueConfig.from_stream_config(stream).stream_config() == stream


def test_a_default_bucket_config_survives_the_trip_through_its_stream_config():
    config = KeyValueConfig(bucket="defaults")
    assert KeyValueConfig.from_stream_config(config.stream_config()) == config


def test_a_sourcing_buckets_stream_config_is_stable_through_the_round_trip():
    config = KeyValueConfig(bucket="all", sources=["east", StreamSource(name="KV_west")])
    stream = config.stream_config()
    assert [(s.name, [(t.src, t.dest) for t in s.subject_transforms]) for s in stream.sources] == [
        ("KV_east", [("$KV.east.>", "$KV.all.>")]), ("KV_west", [("$KV.west.>", "$KV.all.>")])]
    assert KeyValueConfig.from_stream_config(stream).stream_config() == stream


def test_a_bucket_is_the_stream_nats_go_makes():
    stream = KeyValueConfig(bucket="cfg", history=7).stream_config()
    assert (stream.name, stream.subjects) == ("KV_cfg", ["$KV.cfg.>"])
    assert stream.max_msgs_per_subject == 7 and stream.discard is DiscardPolicy.NEW
    assert stream.allow_rollup_hdrs and stream.deny_delete and stream.allow_direct
    assert (stream.max_msgs, stream.max_bytes, stream.max_msg_size, stream.max_consumers) == (-1, -1, -1, -1)
    assert stream.max_age == 0 and stream.compression is StoreCompression.NONE
    assert not stream.allow_msg_ttl and not stream.subject_delete_marker_ttl
    assert KeyValueConfig(bucket="z", compression=True).stream_config().compression is StoreCompression.S2


@pytest.mark.parametrize(("ttl", "window"), [(None, 120.0), (1, 1.0), (30, 30.0), (119.5, 119.5), (120, 120.0),
                                             (121, 120.0), (timedelta(hours=1), 120.0)])
def test_the_duplicate_window_is_two_minutes_or_the_ttl_when_shorter(ttl, window):
    assert KeyValueConfig(bucket="b", ttl=ttl).stream_config().duplicate_window == window


@pytest.mark.parametrize("history", [1, 2, 64])
def test_history_of_1_to_64_values_per_key_is_kept_as_max_msgs_per_subject(history):
    assert KeyValueConfig(bucket="b", history=history).stream_config().max_msgs_per_subject == history


@pytest.mark.parametrize(("history", "exc"), [(0, ValueError), (65, ValueError), (-1, ValueError),
                                              (True, TypeError), (2.0, TypeError), ("3", TypeError)])
def test_history_outside_1_to_64_is_refused_before_anything_is_sent(js, api_spy, bucket, history, exc):
    assert_sends_nothing(api_spy, js, lambda: js.create_key_value(bucket, history=history), exc, "history")


@pytest.mark.parametrize("marker_ttl", [1, 1.0, timedelta(seconds=1), 90])
def test_a_limit_marker_ttl_of_a_second_or_more_allows_per_message_ttls(marker_ttl):
    stream = KeyValueConfig(bucket="b", limit_marker_ttl=marker_ttl).stream_config()
    assert stream.allow_msg_ttl is True
    assert stream.subject_delete_marker_ttl == KeyValueConfig(bucket="b", limit_marker_ttl=marker_ttl).limit_marker_ttl


@pytest.mark.parametrize("marker_ttl", [0.5, 0.999, timedelta(milliseconds=10), -1])
def test_a_limit_marker_ttl_under_a_second_is_refused_before_anything_is_sent(js, api_spy, bucket, marker_ttl):
    assert_sends_nothing(api_spy, js, lambda: js.create_key_value(bucket, limit_marker_ttl=marker_ttl), ValueError,
                         "limit_marker_ttl")


BAD_BUCKETS = ["a.b", "a b", "a*", "a>", "", "ä", "KV.x"]


@pytest.mark.parametrize("name", BAD_BUCKETS)
def test_a_bucket_name_outside_letters_digits_dash_and_underscore_is_refused_before_anything_is_sent(js, api_spy,
                                                                                                    name):
    for call in (lambda: js.create_key_value(name), lambda: js.key_value(name), lambda: js.delete_key_value(name),
                 lambda: js.create_or_update_key_value(name), lambda: js.update_key_value(name)):
        assert_sends_nothing(api_spy, js, call, ValueError, "bucket")


def test_bucket_names_of_letters_digits_dash_and_underscore_are_accepted():
    for name in ("a", "A-b_9", "0", "-_-", "x" * 200):
        assert KeyValueConfig(bucket=name).stream_config().name == f"KV_{name}"


BAD_KEYS = [".a", "a.", "a..b", "a b", "a*", "a.>", ">", "", "ä", "a\tb", "a:b"]
BAD_FILTERS = [".a", "a.", "a..b", "a b", "a*", "a>", "a.>.b", ">.a", "*a", ""]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_an_invalid_key_is_refused_by_reads_before_anything_is_sent(js, api_spy, bucket, key):
    kv = js.create_key_value(bucket)
    for call in (lambda: kv.get(key), lambda: kv.get(key, revision=1), lambda: kv.history(key),
                 lambda: key in kv):
        assert_sends_nothing(api_spy, js, call, jss.InvalidKeyError, "not a valid key")


@pytest.mark.parametrize("key_filter", BAD_FILTERS)
def test_an_invalid_key_filter_is_refused_by_watch_and_keys_before_anything_is_sent(js, api_spy, bucket, key_filter):
    kv = js.create_key_value(bucket)
    for call in (lambda: kv.watch(key_filter), lambda: kv.watch(["ok.>", key_filter]),
                 lambda: kv.keys(key_filter), lambda: kv.keys("ok.*", key_filter)):
        assert_sends_nothing(api_spy, js, call, jss.InvalidKeyError, "not a valid key")


def test_an_invalid_key_is_refused_by_writes_before_anything_is_published(js, nats_server, bucket):
    kv = js.create_key_value(bucket, limit_marker_ttl=1)

    def writes_of(key):
        return (lambda: kv.put(key, "v"), lambda: kv.create(key, "v"), lambda: kv.create(key, "v", ttl=5),
                lambda: kv.update(key, "v", 1), lambda: kv.delete(key), lambda: kv.purge(key),
                lambda: kv.purge(key, ttl=5))

    def writes():
        for key in BAD_KEYS:
            for write in writes_of(key):
                with pytest.raises(jss.InvalidKeyError, match="not a valid key"):
                    write()
                with pytest.raises(ValueError):  # InvalidKeyError is a ValueError
                    write()
        for write in (lambda: kv.put(1, "v"), lambda: kv.put(b"k", "v"), lambda: kv.put("k", 3)):
            with pytest.raises(TypeError):
                write()
        return kv.put("sentinel", "after")

    wire, revision = seen_on_the_wire(nats_server.url, f"$KV.{bucket}.>", writes, 1)
    assert wire == [(f"$KV.{bucket}.sentinel", {}, b"after")]
    assert revision == 1  # nothing was stored before it


def test_contradictory_or_bad_write_and_watch_options_are_refused_before_anything_is_sent(js, api_spy, bucket):
    kv = js.create_key_value(bucket)
    assert_sends_nothing(api_spy, js, lambda: kv.watch(include_history=True, updates_only=True), ValueError,
                         "include_history")
    assert_sends_nothing(api_spy, js, lambda: kv.watch(resume_from_revision=0), ValueError, "resume_from_revision")
    assert_sends_nothing(api_spy, js, lambda: kv.watch([]), ValueError, "keys")
    assert_sends_nothing(api_spy, js, lambda: kv.get("k", revision=0), ValueError, "revision")
    assert kv.status().values == 0
    for write, match in ((lambda: kv.delete("k", ttl=5), "ttl"), (lambda: kv.update("k", "v", -1), "last"),
                         (lambda: kv.update("k", "v", None), "last"), (lambda: kv.purge("k", last=-1), "last"),
                         (lambda: kv.create("k", "v", ttl=0.5), "ttl"), (lambda: kv.purge("k", ttl=0), "ttl")):
        with pytest.raises(ValueError, match=match):
            write()
    assert kv.status().values == 0
