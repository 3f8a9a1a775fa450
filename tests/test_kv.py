# Charter: the key-value store against a real nats-server: buckets made, bound, changed, listed and
# deleted; every key operation's rule (create's "absent or deleted", CAS, delete and purge markers,
# purge_deletes, history, keys with server-side filters); the watcher's caught-up state, options,
# live changes, handlers on threads, prompt exit and healing through a server restart; bad input
# refused before anything is sent.
from __future__ import annotations

import threading
import time
import uuid

import attrs
import pytest

import jetstream_sync as jss

from conftest import assert_sends_nothing, wait_for


@pytest.fixture
def bucket():
    return "B" + uuid.uuid4().hex[:10]


@pytest.fixture
def kv(js, bucket):
    return js.create_key_value(bucket, history=10, storage="memory")


def consumers_of(js, kv):
    return list(js.consumer_names(kv.stream_name))


# --- buckets ---------------------------------------------------------------------------------


def test_a_bucket_is_the_stream_nats_go_makes(js, bucket):
    kv = js.create_key_value(bucket, history=5, ttl=3600, max_value_size=1024, description="settings")
    cfg = js.stream_info(f"KV_{bucket}").config
    assert kv.stream_name == f"KV_{bucket}"
    assert cfg.subjects == [f"$KV.{bucket}.>"]
    assert (cfg.max_msgs_per_subject, cfg.max_age, cfg.max_msg_size) == (5, 3600, 1024)
    assert cfg.discard is jss.DiscardPolicy.NEW
    assert cfg.allow_rollup_hdrs and cfg.deny_delete and cfg.allow_direct
    assert cfg.duplicate_window == 120
    assert (cfg.max_msgs, cfg.max_bytes, cfg.max_consumers) == (-1, -1, -1)
    assert cfg.description == "settings"


def test_a_short_ttl_is_also_the_duplicate_window_and_compression_is_s2(js, bucket):
    js.create_key_value(bucket, ttl=30, compression=True)
    cfg = js.stream_info(f"KV_{bucket}").config
    assert cfg.duplicate_window == 30
    assert cfg.compression is jss.StoreCompression.S2


def test_creating_a_bucket_again_with_the_same_config_succeeds_and_with_another_raises(js, bucket):
    js.create_key_value(bucket, history=3)
    assert js.create_key_value(bucket, history=3).bucket == bucket
    with pytest.raises(jss.BucketExistsError, match=bucket) as err:
        js.create_key_value(bucket, history=4)
    assert isinstance(err.value, jss.StreamNameInUseError) and err.value.bucket == bucket


def test_binding_a_missing_bucket_raises_bucket_not_found(js, bucket):
    with pytest.raises(jss.BucketNotFoundError, match=f"bucket '{bucket}' not found") as err:
        js.key_value(bucket)
    assert isinstance(err.value, jss.StreamNotFoundError) and err.value.bucket == bucket
    with pytest.raises(jss.BucketNotFoundError):
        js.delete_key_value(bucket)
    with pytest.raises(jss.BucketNotFoundError):
        js.update_key_value(bucket, history=2)


def test_update_and_create_or_update_change_the_history(js, bucket):
    js.create_or_update_key_value(bucket, history=2)
    kv = js.update_key_value(bucket, history=7)
    assert kv.status().history == 7
    assert js.create_or_update_key_value(bucket, history=3).status().history == 3


def test_buckets_are_listed_by_name_and_status_and_deleted(js, bucket):
    js.create_key_value(bucket)
    js.create_stream(name=f"NOTKV{bucket}", subjects=[f"notkv.{bucket}"])
    assert bucket in list(js.key_value_names())
    statuses = {s.bucket: s for s in js.key_values()}
    assert statuses[bucket].backing_store == "JetStream"
    assert all(not name.startswith("NOTKV") for name in js.key_value_names())
    js.delete_key_value(bucket)
    assert bucket not in list(js.key_value_names())


def test_status_reports_the_bucket(js, bucket):
    kv = js.create_key_value(bucket, history=4, ttl=60, metadata={"team": "core"})
    kv.put("a", b"12345")
    kv.put("a", b"6")
    status = kv.status()
    assert (status.bucket, status.values, status.history, status.ttl) == (bucket, 2, 4, 60)
    assert status.bytes > 0 and not status.is_compressed
    assert status.metadata["team"] == "core"
    assert status.stream_info.config.name == f"KV_{bucket}"
    assert "Key-value bucket" in status._repr_html_()


@pytest.mark.parametrize("fields, match", [
    ({"history": 0}, "history must be 1..64"),
    ({"history": 65}, "history must be 1..64"),
    ({"ttl": -1}, "ttl"),
    ({"limit_marker_ttl": 0.5}, "limit_marker_ttl must be at least 1"),
    ({"replicas": 6}, "replicas"),
])
def test_bad_bucket_options_are_refused_before_anything_is_sent(api_spy, js, bucket, fields, match):
    assert_sends_nothing(api_spy, js, lambda: js.create_key_value(bucket, **fields), ValueError, match)


@pytest.mark.parametrize("name", ["a.b", "a b", "", "a*", "a>"])
def test_bad_bucket_names_are_refused_before_anything_is_sent(api_spy, js, name):
    assert_sends_nothing(api_spy, js, lambda: js.create_key_value(name), ValueError, "bucket")
    assert_sends_nothing(api_spy, js, lambda: js.key_value(name), ValueError, "bucket")


# --- keys ------------------------------------------------------------------------------------


def test_put_returns_the_revision_and_get_reads_the_value_back(kv):
    r1 = kv.put("color", "blue")
    r2 = kv.put("color", b"red")
    assert r2 == r1 + 1
    entry = kv.get("color")
    assert (entry.key, entry.value, entry.revision, entry.operation) == ("color", b"red", r2, jss.KeyValueOp.PUT)
    assert entry.created_ns == entry.created.timestamp_ns() and entry.created.tzinfo is not None
    assert kv.get("color", revision=r1).value == b"blue"
    assert kv["color"] == b"red" and "color" in kv and "other" not in kv


def test_get_many_reads_the_current_values_of_many_keys_in_one_request_per_1024_keys(api_spy, js, kv):
    keys = [f"k.{i}" for i in range(1100)]
    for i, key in enumerate(keys):
        kv.put(key, f"v{i}")
    kv.put("k.5", "newer")
    kv.delete("k.6")
    kv.purge("k.7")
    mark = api_spy.mark(js)
    found = kv.get_many(["never", *reversed(keys), "k.1"])
    api_spy.sync(js)  # the spy receives asynchronously: everything sent before the sentinel is in
    gets = [s for s in api_spy.since(mark) if ".DIRECT.GET." in s]
    assert len(gets) == 2  # 1,103 distinct keys: two batch direct gets
    assert list(found) == [k for k in reversed(keys) if k not in ("k.6", "k.7")]
    assert found["k.5"].value == b"newer" and found["k.1"].value == b"v1"
    assert found["k.1"] == kv.get("k.1")
    # Without direct gets: one get per key, the same answer.
    k5 = kv.get("k.5")
    js.update_stream(attrs.evolve(js.stream_info(kv.stream_name).config, allow_direct=False))
    assert js.key_value(kv.bucket).get_many(["k.5", "k.6", "never"]) == {"k.5": k5}
    assert_sends_nothing(api_spy, js, lambda: kv.get_many(["ok", "a.*"]), jss.InvalidKeyError, "keys\\[1\\]")
    with pytest.raises(TypeError, match="list of keys"):
        kv.get_many("k.1")


def test_a_missing_key_is_key_not_found_also_a_key_error(kv):
    with pytest.raises(KeyError) as err:
        kv.get("nope")
    assert isinstance(err.value, jss.KeyNotFoundError)
    assert (err.value.bucket, err.value.key) == (kv.bucket, "nope")
    assert str(err.value) == f"key 'nope' not found in bucket '{kv.bucket}'"


def test_a_revision_of_another_key_is_not_found(kv):
    other = kv.put("other", b"x")
    kv.put("mine", b"y")
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("mine", revision=other)
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("mine", revision=10_000)


def test_deleted_and_purged_keys_are_not_found(kv):
    kv.put("d", b"1")
    kv.put("p", b"1")
    kv.delete("d")
    kv.purge("p")
    with pytest.raises(jss.KeyNotFoundError, match="deleted"):
        kv.get("d")
    with pytest.raises(jss.KeyNotFoundError, match="purged"):
        kv.get("p")


def test_create_succeeds_only_when_the_key_is_absent_or_deleted(kv):
    first = kv.create("k", b"one")
    with pytest.raises(jss.KeyExistsError, match="'k' already exists") as err:
        kv.create("k", b"two")
    assert isinstance(err.value, jss.StreamWrongLastSequenceError)
    assert err.value.err_code == 10071 and err.value.key == "k"
    kv.delete("k")
    second = kv.create("k", b"again")
    kv.purge("k")
    third = kv.create("k", b"after purge")
    assert first < second < third
    assert kv.get("k").value == b"after purge"


def test_update_is_compare_and_set_on_the_revision(kv):
    rev = kv.put("n", b"1")
    rev2 = kv.update("n", b"2", rev)
    with pytest.raises(jss.KeyRevisionMismatchError) as err:
        kv.update("n", b"3", rev)
    assert isinstance(err.value, jss.StreamWrongLastSequenceError) and err.value.err_code == 10071
    assert kv.get("n").revision == rev2
    assert kv.update("fresh", b"x", 0) > rev2  # 0: the key never had a value


def test_concurrent_compare_and_set_increments_lose_none(kv):
    kv.put("counter", b"0")
    done = []

    def worker():
        for _ in range(20):
            while True:
                entry = kv.get("counter")
                try:
                    kv.update("counter", str(int(entry.value) + 1).encode(), entry.revision)
                    break
                except jss.KeyRevisionMismatchError:
                    continue
        done.append(True)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(done) == 3
    assert kv.get("counter").value == b"60"


def test_delete_and_purge_with_last_check_the_revision(kv):
    rev = kv.put("x", b"1")
    with pytest.raises(jss.KeyRevisionMismatchError):
        kv.delete("x", last=rev + 5)
    with pytest.raises(jss.KeyRevisionMismatchError):
        kv.purge("x", last=rev + 5)
    kv.delete("x", last=rev)
    with pytest.raises(jss.KeyNotFoundError):
        kv.get("x")


def test_a_ttl_on_delete_is_refused_before_anything_is_sent(api_spy, js, kv):
    assert_sends_nothing(api_spy, js, lambda: kv.delete("x", ttl=5), ValueError, "ttl applies to purge")


def test_purge_leaves_only_its_marker_in_the_history(kv):
    for i in range(4):
        kv.put("h", str(i))
    kv.purge("h")
    history = kv.history("h")
    assert [e.operation for e in history] == [jss.KeyValueOp.PURGE]


def test_history_lists_every_kept_revision_oldest_first(kv):
    revs = [kv.put("h", str(i)) for i in range(3)]
    kv.delete("h")
    history = kv.history("h")
    assert [e.revision for e in history][:3] == revs
    assert [e.value for e in history] == [b"0", b"1", b"2", b""]
    assert history[-1].operation is jss.KeyValueOp.DELETE
    with pytest.raises(jss.KeyNotFoundError):
        kv.history("never")


def test_history_is_bounded_by_the_bucket_history(js, bucket):
    kv = js.create_key_value(bucket, history=2)
    for i in range(5):
        kv.put("k", str(i))
    assert [e.value for e in kv.history("k")] == [b"3", b"4"]


def test_purge_deletes_removes_old_markers_and_keeps_young_ones_alone(kv):
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.delete("a")
    kv.purge("b")
    kv.put("c", b"live")
    assert kv.purge_deletes() == 2  # both are younger than 30 minutes: each keeps just its marker
    assert len(kv.history("a")) == 1
    assert kv.purge_deletes(older_than=0) == 2
    for key in ("a", "b"):
        with pytest.raises(jss.KeyNotFoundError):
            kv.history(key)
    assert kv.get("c").value == b"live"
    assert kv.status().values == 1


@pytest.mark.parametrize("key", ["", ".a", "a.", "a..b", "a b", "a*", "a.>", "ü"])
def test_bad_keys_are_invalid_key_errors_before_anything_is_sent(api_spy, js, kv, key):
    for call in (lambda: kv.put(key, b"x"), lambda: kv.get(key), lambda: kv.create(key, b"x"),
                 lambda: kv.delete(key), lambda: kv.purge(key), lambda: kv.history(key)):
        assert_sends_nothing(api_spy, js, call, jss.InvalidKeyError, "not a valid key")
    assert issubclass(jss.InvalidKeyError, ValueError)


def test_values_must_be_bytes_or_str(kv):
    with pytest.raises(TypeError, match="value must be bytes or str"):
        kv.put("k", 5)


def test_keys_with_every_legal_character_round_trip(kv):
    key = "a-b/c_d=e.F9"
    kv.put(key, b"v")
    assert kv.get(key).value == b"v"
    assert list(kv.keys()) == [key]


# --- keys() ----------------------------------------------------------------------------------


def test_keys_of_an_empty_bucket_yield_nothing(js, kv):
    assert list(kv.keys()) == []
    wait_for(lambda: consumers_of(js, kv) == [], 5, what="the keys() consumer to be deleted")


def test_keys_leave_out_deleted_and_purged_keys(kv):
    for key in ("a", "b", "c", "d"):
        kv.put(key, b"1")
    kv.delete("b")
    kv.purge("c")
    assert sorted(kv.keys()) == ["a", "d"]


def test_keys_filters_run_on_the_server(api_spy, js, kv):
    for key in ("t.1", "t.2", "t.3.x", "u.1", "v.9"):
        kv.put(key, b"1")
    mark = api_spy.mark(js)
    assert sorted(kv.keys("t.*")) == ["t.1", "t.2"]
    api_spy.sync(js)
    creates = [s for s in api_spy.since(mark) if ".CONSUMER.CREATE." in s]
    assert creates and all(s.endswith(f"$KV.{kv.bucket}.t.*") for s in creates)
    assert sorted(kv.keys("t.>", "v.*")) == ["t.1", "t.2", "t.3.x", "v.9"]


def test_keys_are_complete_while_another_thread_writes(kv):
    for i in range(500):
        kv.put(f"before.{i}", b"x")
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set() and i < 2000:
            kv.put(f"during.{i}", b"y")
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(3):
            keys = set(kv.keys())
            assert {f"before.{i}" for i in range(500)} <= keys
    finally:
        stop.set()
        t.join(60)


def test_an_abandoned_keys_generator_leaves_no_consumer(js, kv):
    for i in range(50):
        kv.put(f"k{i}", b"1")
    it = kv.keys()
    assert next(it).startswith("k")
    it.close()
    wait_for(lambda: consumers_of(js, kv) == [], 5, what="the keys() consumer to be deleted")


def test_keys_opens_its_watcher_only_when_iterated_but_checks_filters_at_the_call(api_spy, js, kv):
    kv.put("a", b"1")
    it = kv.keys()
    assert consumers_of(js, kv) == []
    assert list(it) == ["a"]
    assert_sends_nothing(api_spy, js, lambda: kv.keys("a..b"), jss.InvalidKeyError, "not a valid key")


# --- the watcher ---------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_watcher_yields_the_current_values_then_live_changes(js, kv):
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"1")
    with kv.watch() as w:
        assert not w.initial_done
        initial = [(e.key, e.value) for e in w.initial()]
        assert initial == [("a", b"2"), ("b", b"1")]
        assert w.initial_done
        kv.put("c", b"new")
        kv.delete("a")
        live = [w.next(timeout=5), w.next(timeout=5)]
        assert [(e.key, e.operation) for e in live] == [("c", jss.KeyValueOp.PUT), ("a", jss.KeyValueOp.DELETE)]
        assert live[0].delta == 0
        with pytest.raises(jss.TimeoutError):
            w.next(timeout=0.2)
    wait_for(lambda: consumers_of(js, kv) == [], 5, what="the watcher's consumer to be deleted")


@pytest.mark.timeout(30)
def test_a_watcher_on_an_empty_bucket_is_caught_up_at_once(kv):
    with kv.watch() as w:
        assert list(w.initial()) == []
        assert w.initial_done
        kv.put("x", b"1")
        assert w.next(timeout=5).key == "x"


@pytest.mark.timeout(30)
def test_initial_deltas_count_down_to_zero(kv):
    for i in range(5):
        kv.put(f"k{i}", b"v")
    with kv.watch() as w:
        assert [e.delta for e in w.initial()] == [4, 3, 2, 1, 0]


@pytest.mark.timeout(30)
def test_watch_options(kv):
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"1")
    kv.delete("b")
    with kv.watch(include_history=True) as w:
        assert [(e.key, e.value) for e in w.initial()] == [("a", b"1"), ("a", b"2"), ("b", b"1"), ("b", b"")]
    with kv.watch(ignore_deletes=True) as w:
        assert [e.key for e in w.initial()] == ["a"]
    with kv.watch(meta_only=True) as w:
        assert [(e.key, e.value) for e in w.initial()] == [("a", b""), ("b", b"")]
    with kv.watch(updates_only=True) as w:
        assert w.initial_done and list(w.initial()) == []
        kv.put("c", b"3")
        assert w.next(timeout=5).key == "c"
    with kv.watch(resume_from_revision=2) as w:
        assert [e.revision for e in w.initial()] == [2, 3, 4, 5]
    with kv.watch(["a", "c"]) as w:
        assert [e.key for e in w.initial()] == ["a", "c"]


def test_contradicting_watch_options_are_refused_before_anything_is_sent(api_spy, js, kv):
    assert_sends_nothing(api_spy, js, lambda: kv.watch(include_history=True, updates_only=True), ValueError,
                         "include_history and updates_only")
    assert_sends_nothing(api_spy, js, lambda: kv.watch("a..b"), jss.InvalidKeyError, "not a valid key")
    assert_sends_nothing(api_spy, js, lambda: kv.watch("a.>.b"), jss.InvalidKeyError, "not a valid key")
    assert_sends_nothing(api_spy, js, lambda: kv.watch(resume_from_revision=0), ValueError, "resume_from_revision")


@pytest.mark.timeout(30)
def test_leaving_a_watcher_with_1000_unread_updates_returns_within_a_second(js, kv):
    for i in range(1000):
        js.publish_async(f"$KV.{kv.bucket}.k{i}", b"v" * 100)
    js.publish_async_complete(timeout=10)
    w = kv.watch()
    wait_for(lambda: w._stream._engine.received >= 1000, 10, what="the updates to be buffered")
    t0 = time.monotonic()
    w.__exit__(None, None, None)
    assert time.monotonic() - t0 < 1.0
    wait_for(lambda: consumers_of(js, kv) == [], 5, what="the watcher's consumer to be deleted")
    with pytest.raises(StopIteration):
        w.next(timeout=1)


@pytest.mark.timeout(30)
def test_consume_runs_a_handler_per_entry_on_worker_threads(kv):
    for i in range(20):
        kv.put(f"k{i}", str(i))
    seen, threads = [], set()
    lock = threading.Lock()

    def handler(entry):
        with lock:
            seen.append(entry.key)
            threads.add(threading.current_thread().name)

    with kv.watch() as w:
        w.consume(handler, workers=2)
        kv.put("late", b"x")
        wait_for(lambda: len(seen) == 21, 10, what="every entry handled")
    assert sorted(seen) == sorted([f"k{i}" for i in range(20)] + ["late"])
    assert all(name.startswith(f"jetstream-sync-kv-watch-{kv.bucket}") for name in threads)
    assert w.wait(timeout=5)


@pytest.mark.timeout(30)
def test_a_failing_consume_handler_goes_to_the_error_handler_and_the_watch_goes_on(kv):
    errors, seen = [], []

    def handler(entry):
        if entry.key == "bad":
            raise RuntimeError("boom")
        seen.append(entry.key)

    with kv.watch() as w:
        w.consume(handler, error_handler=errors.append)
        kv.put("bad", b"1")
        kv.put("good", b"1")
        wait_for(lambda: seen == ["good"], 10, what="the entry after the failure")
    assert [str(e) for e in errors] == ["boom"]


@pytest.mark.timeout(30)
def test_a_watcher_of_a_deleted_bucket_ends_with_the_error(js, kv):
    w = kv.watch()
    assert list(w.initial()) == []
    js.delete_key_value(kv.bucket)
    with pytest.raises(jss.JetStreamError):
        for _ in range(100):
            w.next(timeout=10)
    w.stop()


@pytest.mark.timeout(30)
def test_ctrl_c_in_a_watcher_returns_within_a_second_and_the_client_stays_usable(kv):
    from test_client import interrupt_main_after

    with kv.watch() as w:
        list(w.initial())
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            timer = interrupt_main_after(0.3)
            w.next(timeout=30)
        timer.cancel()
        assert time.monotonic() - t0 < 1.3
    assert kv.put("after", b"1") > 0


# --- a server restart --------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_a_watcher_heals_through_a_server_restart_with_no_gap_and_no_duplicate(fresh_server):
    client = jss.connect(fresh_server.url, timeout=5.0, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    try:
        js = client.jetstream()
        kv = js.create_key_value("RESTART", history=64)
        for i in range(50):
            kv.put("k", str(i))
        with kv.watch(include_history=True) as w:
            got = [int(e.value) for e in w.initial()]
            fresh_server.restart()
            wait_for(lambda: client.is_connected, 20, what="the client to reconnect")
            for i in range(50, 100):
                js.retry.call(lambda i=i: kv.put("k", str(i)))
            while len(got) < 100:
                got.append(int(w.next(timeout=20).value))
            with pytest.raises(jss.TimeoutError):
                w.next(timeout=0.5)
        assert got == list(range(100))
    finally:
        client.close()


# --- config objects and notebook view ------------------------------------------------------------


def test_a_bucket_is_made_from_a_key_value_config_or_a_mapping(js, bucket):
    cfg = jss.KeyValueConfig(bucket=bucket, history=3, description="from config")
    assert js.create_key_value(config=cfg).status().history == 3
    assert js.create_key_value(config={"bucket": bucket, "history": 3, "description": "from config"}).bucket == bucket
    kv = js.create_or_update_key_value(config=cfg, history=6)  # fields given beside a config win
    assert kv.status().history == 6


def test_a_bucket_shows_its_status_and_first_keys_in_a_notebook(kv):
    kv.put("greeting", "<hello>")
    html = kv._repr_html_()
    assert kv.bucket in html and "greeting" in html and "&lt;hello&gt;" in html


# --- a bucket deleted under its users, errors that name what to do ------------------------------------


@pytest.mark.timeout(60)
def test_every_call_on_a_deleted_bucket_raises_bucket_not_found(js, kv):
    kv.put("a", b"1")
    js.delete_key_value(kv.bucket)
    for call in (lambda: kv.get("a"), lambda: "a" in kv, lambda: list(kv.keys()), lambda: kv.history("a"),
                 lambda: kv.watch(), lambda: kv.put("a", b"2"), lambda: kv.status()):
        with pytest.raises(jss.BucketNotFoundError, match=f"key-value bucket '{kv.bucket}' not found"):
            call()


@pytest.mark.timeout(60)
def test_a_write_nobody_answers_while_the_bucket_exists_is_no_responders_not_bucket_not_found(js, kv):
    # What a replicated bucket's writer meets while its stream elects a leader: the bucket exists but
    # nobody answers the publish. Made here by moving the stream off the bucket's subjects for a while.
    cfg = js.stream_info(kv.stream_name).config
    js.update_stream(attrs.evolve(cfg, subjects=["elsewhere.>"]))
    writes = (lambda: kv.put("a", b"1"), lambda: kv.create("a", b"1"), lambda: kv.update("a", b"1", last=0),
              lambda: kv.delete("a"), lambda: kv.purge("a"))
    for write in writes:
        with pytest.raises(jss.NoRespondersError, match=f"bucket '{kv.bucket}' exists") as err:
            write()
        assert not isinstance(err.value, jss.BucketNotFoundError)
        assert err.value.retriable and err.value.subject == f"$KV.{kv.bucket}.a"
    js.update_stream(cfg)
    assert kv.put("a", b"2") == 1  # the same bucket, writable again


def test_a_per_key_ttl_on_a_bucket_without_limit_marker_ttl_says_what_to_set(kv):
    with pytest.raises(jss.MessageTTLDisabledError, match="create it with limit_marker_ttl") as err:
        kv.create("lease", b"me", ttl=5)
    assert err.value.err_code == 10166


@pytest.mark.timeout(30)
@pytest.mark.parametrize("logging_configured", [False, True])
def test_a_failing_consume_handler_without_error_handler_is_shown_once_per_error(kv, monkeypatch, caplog,
                                                                                 logging_configured):
    import jetstream_sync.kv_watch as kv_watch

    monkeypatch.setattr(kv_watch, "_logging_configured", lambda logger: logging_configured)
    hooked = []
    monkeypatch.setattr(threading, "excepthook", lambda args: hooked.append(args.exc_value))
    seen = []

    def handler(entry):
        seen.append(entry.key)
        raise ValueError("bad value")

    with kv.watch() as w:
        w.consume(handler)
        kv.put("a", b"1")
        kv.put("b", b"1")
        wait_for(lambda: len(seen) == 2, 10, what="both entries handled")
    logged = [r for r in caplog.records if r.name == "jetstream_sync.kv_watch" and r.levelname == "ERROR"]
    if logging_configured:  # the application reads its log: one record with the traceback
        assert hooked == [] and len(logged) == 1 and "pass error_handler=" in logged[0].getMessage()
        assert logged[0].exc_info[1] is w.error
    else:  # shown as an uncaught thread exception is, with a note saying what to do
        assert [str(e) for e in hooked] == ["bad value"] and logged == []
        assert "pass error_handler=" in hooked[0].__notes__[0]
    assert w.handler_errors == 2 and isinstance(w.error, ValueError)
