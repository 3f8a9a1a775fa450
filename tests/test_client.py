# Charter: behaviour of jss.Client against a real nats-server: connect and
# its argument rules, event callbacks off the loop thread, the loop-thread
# guard, Ctrl-C, fork, pickling, many threads, a running asyncio loop in the
# caller, clean close/drain/flush, and core NATS publish/request. Peers that
# are not jetstream_sync talk through plain nats-py on a thread of their own.
from __future__ import annotations

import _thread
import asyncio
import os
import pickle
import socket
import threading
import time
import uuid

import nats
import pytest

import jetstream_sync as jss
from conftest import our_threads, wait_for


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def threads_of(client: jss.Client) -> list[threading.Thread]:
    """Live threads that belong to this client (its loop thread and its event thread)."""
    return [t for t in our_threads() if t is client._conn.loop_thread.thread or t.name.startswith("jetstream-sync-events")]


class PlainNats:
    """A nats-py connection on its own asyncio thread: a peer that is not jetstream_sync."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="plain-nats-peer", daemon=True)
        self.thread.start()
        self.nc = self.run(nats.connect(url))

    def run(self, coro, timeout: float = 5.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def subscribe(self, subject: str, cb) -> None:
        async def go():
            await self.nc.subscribe(subject, cb=cb)
            # nats-py writes PING straight to the socket, possibly ahead of the
            # buffered SUB: let its flusher write the SUB first, then PING.
            while self.nc._pending_data_size:
                await asyncio.sleep(0)
            await self.nc.flush()  # the server has the interest before we return

        self.run(go())

    def collect(self, subject: str) -> list:
        got: list = []

        async def cb(msg):
            got.append(msg)

        self.subscribe(subject, cb)
        return got

    def close(self) -> None:
        try:
            self.run(self.nc.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()


@pytest.fixture
def peer(nats_server):
    p = PlainNats(nats_server.url)
    yield p
    p.close()


@pytest.fixture
def empty_consumer(js):
    name = unique("EMPTY")
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    return js.create_consumer(name, durable_name="waiter")


def interrupt_main_after(delay: float) -> threading.Timer:
    timer = threading.Timer(delay, _thread.interrupt_main)
    timer.start()
    return timer


# --- connect -----------------------------------------------------------------


class TestConnect:
    @pytest.mark.timeout(20)
    @pytest.mark.parametrize("shape", ["url", "list", "comma-separated"])
    def test_connect_accepts_a_url_a_list_of_urls_or_a_comma_separated_string(self, nats_server, shape):
        servers = {
            "url": nats_server.url,
            "list": [nats_server.url],
            "comma-separated": f" {nats_server.url} , {nats_server.url} ",
        }[shape]
        with jss.connect(servers, timeout=5.0) as client:
            assert client.is_connected
            assert client.connected_url == nats_server.url
            client.flush()

    @pytest.mark.timeout(20)
    def test_connect_without_servers_uses_the_nats_url_environment_variable(self, nats_server, monkeypatch):
        monkeypatch.setenv("NATS_URL", nats_server.url)
        with jss.connect(timeout=5.0) as client:
            assert client.connected_url == nats_server.url

    @pytest.mark.timeout(20)
    def test_connect_without_servers_or_nats_url_tries_the_default_local_port(self, monkeypatch):
        monkeypatch.delenv("NATS_URL", raising=False)
        monkeypatch.setattr(jss._servers, "DEFAULT_URL", f"nats://127.0.0.1:{free_port()}")
        with pytest.raises(jss.NoServersError, match="127.0.0.1"):
            jss.connect(timeout=2.0, max_reconnect_attempts=0)

    @pytest.mark.timeout(20)
    @pytest.mark.parametrize("shape", ["list", "comma-separated"])
    def test_connect_skips_a_dead_server_and_connects_to_a_live_one(self, nats_server, shape):
        dead = f"nats://127.0.0.1:{free_port()}"
        servers = [dead, nats_server.url] if shape == "list" else f"{dead},{nats_server.url}"
        with jss.connect(servers, timeout=5.0, dont_randomize=True) as client:
            assert client.connected_url == nats_server.url
            client.jetstream().account_info()

    @pytest.mark.parametrize("servers, exc", [
        (42, TypeError), ({"url": "nats://x"}, TypeError),
        ("", ValueError), (" , ", ValueError), ([], ValueError), ([""], ValueError), ([42], ValueError),
    ])
    def test_bad_servers_raise_naming_the_servers_argument_and_start_no_thread(self, servers, exc):
        before = set(our_threads())
        with pytest.raises(exc, match="servers"):
            jss.connect(servers)
        assert set(our_threads()) == before

    @pytest.mark.parametrize("timeout, exc", [
        (0, ValueError), (-1, ValueError), (float("nan"), ValueError),
        ("5", TypeError), (True, TypeError), (None, TypeError),
    ])
    def test_bad_timeout_raises_naming_the_timeout_argument(self, nats_server, timeout, exc):
        with pytest.raises(exc, match="timeout"):
            jss.connect(nats_server.url, timeout=timeout)

    @pytest.mark.timeout(20)
    @pytest.mark.parametrize("count", [1, 3])
    def test_connecting_where_nothing_listens_raises_no_servers_error_promptly_and_leaves_no_thread(self, count):
        servers = [f"nats://127.0.0.1:{free_port()}" for _ in range(count)]
        before = set(our_threads())
        t0 = time.monotonic()
        with pytest.raises(jss.NoServersError) as info:
            jss.connect(servers, timeout=2.0)
        assert time.monotonic() - t0 < 2.0
        assert isinstance(info.value, ConnectionError)
        assert "127.0.0.1" in str(info.value)
        assert set(our_threads()) == before

    @pytest.mark.parametrize("key", ["error_cb", "disconnected_cb", "reconnected_cb", "closed_cb"])
    def test_an_async_event_callback_is_refused_with_type_error(self, nats_server, key):
        async def coroutine_cb(*args):
            pass

        before = set(our_threads())
        with pytest.raises(TypeError, match=key):
            jss.connect(nats_server.url, **{key: coroutine_cb})
        assert set(our_threads()) == before

    def test_a_callback_that_is_not_callable_is_refused_with_type_error(self, nats_server):
        with pytest.raises(TypeError, match="error_cb"):
            jss.connect(nats_server.url, error_cb="print")

    @pytest.mark.timeout(30)
    def test_disconnected_and_reconnected_callbacks_run_off_the_loop_thread_and_the_client_recovers(
            self, fresh_server):
        calls: dict[str, threading.Thread] = {}
        client = jss.connect(
            fresh_server.url, timeout=5.0, reconnect_time_wait=0.2, max_reconnect_attempts=-1,
            disconnected_cb=lambda: calls.setdefault("disconnected", threading.current_thread()),
            reconnected_cb=lambda: calls.setdefault("reconnected", threading.current_thread()),
        )
        try:
            fresh_server.restart()
            wait_for(lambda: "reconnected" in calls, timeout=15, what="reconnected_cb")
            assert "disconnected" in calls
            for event, thread in calls.items():
                assert thread is not client._conn.loop_thread.thread, f"{event} ran on the loop thread"
                assert thread is not threading.main_thread()
                assert thread.name.startswith("jetstream-sync-events")
            wait_for(lambda: client.is_connected, what="is_connected after reconnect")
            client.flush()
            client.jetstream().account_info()
        finally:
            client.close()
        assert threads_of(client) == []

    @pytest.mark.timeout(20)
    def test_a_callback_that_raises_does_not_break_the_client(self, fresh_server):
        seen = threading.Event()

        def bad_cb():
            seen.set()
            raise RuntimeError("user callback bug")

        with jss.connect(fresh_server.url, reconnect_time_wait=0.2, disconnected_cb=bad_cb) as client:
            fresh_server.restart()
            assert seen.wait(10)
            wait_for(lambda: client.is_connected, timeout=10, what="reconnect")
            client.flush()


# --- the loop-thread guard -----------------------------------------------------


def call_on_loop_thread(client: jss.Client, fn):
    """Run fn on the client's loop thread; return what it raised (or None)."""
    box: dict = {}
    done = threading.Event()

    def on_loop():
        try:
            fn()
            box["error"] = None
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            box["error"] = exc
        finally:
            done.set()

    client._conn.loop_thread.call_soon(on_loop)
    assert done.wait(10), "the loop thread is wedged"
    return box["error"]


class TestLoopThreadGuard:
    @pytest.mark.timeout(20)
    @pytest.mark.parametrize("call", [
        "account_info", "js_publish", "client_request", "client_flush", "client_publish", "stream_info",
    ])
    def test_a_blocking_call_on_the_loop_thread_raises_runtime_error_saying_it_would_deadlock(self, client, js,
                                                                                            call):
        name = unique("GUARD")
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        fn = {
            "account_info": lambda: js.account_info(),
            "js_publish": lambda: js.publish(f"{name}.x", b"1"),
            "client_request": lambda: client.request(f"{name}.x", b"1"),
            "client_flush": lambda: client.flush(),
            "client_publish": lambda: client.publish(f"{name}.x", b"1"),
            "stream_info": lambda: stream.info(),
        }[call]
        t0 = time.monotonic()
        err = call_on_loop_thread(client, fn)
        assert time.monotonic() - t0 < 2.0
        assert isinstance(err, RuntimeError), err
        assert "deadlock" in str(err)
        # refusing it left the client healthy
        assert js.account_info().streams >= 1
        assert stream.info().state.messages == 0

    @pytest.mark.timeout(20)
    def test_close_on_the_loop_thread_raises_runtime_error_and_the_client_stays_open(self, client):
        err = call_on_loop_thread(client, client.close)
        assert isinstance(err, RuntimeError)
        assert "loop thread" in str(err)
        assert not client.is_closed
        client.flush()


# --- Ctrl-C ----------------------------------------------------------------------


class TestKeyboardInterrupt:
    @pytest.mark.timeout(30)
    def test_ctrl_c_during_consumer_next_returns_within_a_second_and_the_client_stays_usable(self, js,
                                                                                             empty_consumer):
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):  # the timer starts inside: its interrupt cannot escape the test
            timer = interrupt_main_after(0.3)
            empty_consumer.next(timeout=30)
        timer.cancel()
        assert time.monotonic() - t0 < 0.3 + 1.0
        assert js.account_info().streams >= 1
        assert js.publish(f"{empty_consumer.stream_name}.after", b"after ctrl-c").seq == 1
        js.client.publish(f"{empty_consumer.stream_name}.core", b"core")
        js.client.flush()

    @pytest.mark.timeout(30)
    def test_an_interrupted_consumer_next_leaves_no_pull_request_to_steal_the_next_message(self, js,
                                                                                           empty_consumer):
        # The interrupted pull must be abandoned (its inbox unsubscribed):
        # otherwise the server hands the next message to a dead request and
        # it sits unacknowledged for ack_wait (30 s).
        with pytest.raises(KeyboardInterrupt):
            timer = interrupt_main_after(0.3)
            empty_consumer.next(timeout=30)
        timer.cancel()
        wait_for(lambda: empty_consumer.info().num_waiting == 0, timeout=3,
                 what="the interrupted pull request to be withdrawn")
        js.publish(f"{empty_consumer.stream_name}.after", b"after ctrl-c")
        msg = empty_consumer.next(timeout=5)
        assert msg.data == b"after ctrl-c"
        msg.ack()

    @pytest.mark.timeout(30)
    def test_ctrl_c_during_a_request_nobody_answers_returns_within_a_second(self, client, peer):
        subject = unique("silent")
        peer.subscribe(subject, cb=_never_answer)
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            timer = interrupt_main_after(0.3)
            client.request(subject, b"hello?", timeout=30)
        timer.cancel()
        assert time.monotonic() - t0 < 0.3 + 1.0
        client.flush()
        client.jetstream().account_info()


async def _never_answer(msg):
    pass


# --- fork and pickle -------------------------------------------------------------


def in_forked_child(fn) -> str:
    """Run fn() in a forked child; return the text it reported through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            os.close(r)
            report = fn()
        except BaseException as exc:  # noqa: BLE001
            report, code = f"child crashed: {exc!r}", 1
        try:
            os.write(w, report.encode())
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    with os.fdopen(r, "rb") as f:
        chunks.append(f.read())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, chunks
    return b"".join(chunks).decode()


class TestForkAndPickle:
    @pytest.mark.timeout(30)
    def test_using_the_client_in_a_forked_child_raises_client_closed_error_saying_to_connect_there(self, client,
                                                                                                 js):
        name = unique("FORK")
        js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")

        def child() -> str:
            lines = []
            for label, fn in [
                ("account_info", lambda: js.account_info(timeout=2)),
                ("js_publish", lambda: js.publish(f"{name}.child", b"x", timeout=2)),
                ("client_publish", lambda: client.publish(f"{name}.child", b"x")),
                ("flush", lambda: client.flush(timeout=2)),
            ]:
                try:
                    fn()
                    lines.append(f"{label}: no error")
                except jss.ClientClosedError as exc:
                    lines.append(f"{label}: ClientClosedError: {exc}")
                except BaseException as exc:  # noqa: BLE001
                    lines.append(f"{label}: {type(exc).__name__}: {exc}")
            return "\n".join(lines)

        report = in_forked_child(child)
        lines = report.splitlines()
        assert len(lines) == 4, report
        for line in lines:
            assert ": ClientClosedError: " in line, report
            assert "connect() in this process" in line, report
        # the parent's client is untouched
        assert js.publish(f"{name}.parent", b"p").seq == 1
        assert js.stream(name).info().state.messages == 1

    @pytest.mark.timeout(30)
    def test_close_in_a_forked_child_is_a_harmless_no_op(self, client, js):
        def child() -> str:
            t0 = time.monotonic()
            client.close()
            client.close()
            elapsed = time.monotonic() - t0
            try:
                client.flush(timeout=1)
                after = "no error"
            except jss.ClientClosedError as exc:
                after = f"ClientClosedError: {exc}"
            return f"{elapsed:.3f}\n{after}"

        elapsed, after = in_forked_child(child).split("\n", 1)
        assert float(elapsed) < 1.0
        assert after.startswith("ClientClosedError: ")
        # the child did not close the parent's connection
        assert client.is_connected
        client.flush()
        js.account_info()

    def test_pickling_a_client_raises_type_error_saying_to_pass_connection_options(self, client):
        with pytest.raises(TypeError, match="connection options"):
            pickle.dumps(client)
        with pytest.raises(TypeError, match="connection options"):
            pickle.dumps({"nested": [client]})


# --- threads and foreign event loops ----------------------------------------------


class TestConcurrency:
    @pytest.mark.timeout(60)
    def test_eight_threads_publishing_and_querying_at_once_all_succeed(self, js):
        name = unique("THREADS")
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        errors: list[BaseException] = []
        seqs: list[int] = []
        barrier = threading.Barrier(8)

        def worker(i: int) -> None:
            try:
                barrier.wait(10)
                for j in range(200):
                    seqs.append(js.publish(f"{name}.t{i}", f"{i}:{j}".encode()).seq)
                    if j % 20 == 0:
                        assert stream.info().config.name == name
                        assert js.account_info().streams >= 1
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(50)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        assert sorted(seqs) == list(range(1, 1601))
        assert stream.info().state.messages == 1600

    @pytest.mark.timeout(30)
    def test_a_running_asyncio_loop_in_the_calling_thread_does_not_matter(self, nats_server):
        name = unique("JUPYTER")
        result: dict = {}

        async def notebook_cell():
            # Jupyter runs cells inside a running loop; the blocking API is called without await.
            with jss.connect(nats_server.url, timeout=5.0) as client:
                js = client.jetstream()
                stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
                try:
                    for i in range(3):
                        js.publish(f"{name}.x", f"m{i}".encode())
                    client.publish(unique("core"), b"core")
                    client.flush()
                    result["messages"] = stream.info().state.messages
                    consumer = stream.create_consumer(durable_name="cell")
                    batch = consumer.fetch(max_messages=10, expires=1.0)
                    result["fetched"] = [m.data for m in batch]
                finally:
                    js.delete_stream(name)

        asyncio.run(notebook_cell())
        assert result["messages"] == 3
        assert result["fetched"] == [b"m0", b"m1", b"m2"]


# --- close, drain, flush ----------------------------------------------------------


class TestClose:
    @pytest.mark.timeout(30)
    def test_after_close_no_thread_survives_and_every_call_raises_client_closed_error(self, nats_server):
        client = jss.connect(nats_server.url, timeout=5.0)
        js = client.jetstream()
        name = unique("CLOSED")
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        consumer = stream.create_consumer(durable_name="c")
        js.delete_stream(name)  # the server side is gone; the handles stay
        loop_thread = client._conn.loop_thread.thread
        client.close()
        assert not loop_thread.is_alive()
        assert not [t for t in threading.enumerate() if t.name.startswith("jetstream-sync")]
        assert client.is_closed
        assert not client.is_connected
        calls = {
            "account_info": lambda: js.account_info(),
            "js_publish": lambda: js.publish(f"{name}.x", b"1"),
            "publish_async": lambda: js.publish_async(f"{name}.x", b"1"),
            "client_publish": lambda: client.publish(f"{name}.x", b"1"),
            "client_request": lambda: client.request(f"{name}.x", b"1"),
            "flush": lambda: client.flush(),
            "stream_info": lambda: stream.info(),
            "consumer_next": lambda: consumer.next(timeout=1),
            "fetch": lambda: consumer.fetch(max_messages=1),
        }
        for label, fn in calls.items():
            t0 = time.monotonic()
            with pytest.raises(jss.ClientClosedError):
                fn()
            assert time.monotonic() - t0 < 0.5, label
        t0 = time.monotonic()
        client.close()
        client.drain()
        with client:
            pass
        assert time.monotonic() - t0 < 0.5

    @pytest.mark.timeout(30)
    def test_close_releases_a_call_blocked_in_another_thread_with_client_closed_error(self, nats_server, js,
                                                                                     empty_consumer):
        client = jss.connect(nats_server.url, timeout=5.0)
        consumer = client.jetstream().consumer(empty_consumer.stream_name, empty_consumer.name)
        box: dict = {}

        def blocked():
            try:
                box["result"] = consumer.next(timeout=30)
            except BaseException as exc:  # noqa: BLE001
                box["error"] = exc
            box["at"] = time.monotonic()

        t = threading.Thread(target=blocked)
        t.start()
        try:
            wait_for(lambda: empty_consumer.info().num_waiting == 1, what="the pull request to reach the server")
        finally:
            closed_at = time.monotonic()
            client.close()
        t.join(5)
        assert not t.is_alive()
        assert isinstance(box.get("error"), jss.ClientClosedError), box
        assert box["at"] - closed_at < 2.0

    @pytest.mark.timeout(30)
    def test_close_releases_a_request_blocked_in_another_thread(self, nats_server, peer):
        client = jss.connect(nats_server.url, timeout=5.0)
        subject = unique("silent")
        asked = peer.collect(subject)  # receives the request, never answers
        box: dict = {}

        def blocked():
            try:
                client.request(subject, b"?", timeout=30)
            except BaseException as exc:  # noqa: BLE001
                box["error"] = exc
            box["at"] = time.monotonic()

        t = threading.Thread(target=blocked)
        t.start()
        try:
            wait_for(lambda: asked, what="the request to reach the responder")
        finally:
            closed_at = time.monotonic()
            client.close()
        t.join(5)
        assert not t.is_alive()
        assert isinstance(box.get("error"), jss.ClientClosedError), box
        assert box["at"] - closed_at < 2.0

    @pytest.mark.timeout(20)
    def test_close_while_the_server_is_down_returns_promptly_and_raises_nothing(self, fresh_server):
        client = jss.connect(fresh_server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        try:
            client.publish("before.kill", b"x")
            client.flush()
            fresh_server.kill()
            wait_for(lambda: not client.is_connected, what="the client to notice the server is gone")
            assert not client.is_closed
            client.publish("while.down", b"buffered")
        finally:
            t0 = time.monotonic()
            client.close()
        assert time.monotonic() - t0 < 1.5
        assert client.is_closed
        assert threads_of(client) == []

    @pytest.mark.timeout(20)
    def test_the_context_manager_closes_the_client(self, nats_server):
        with jss.connect(nats_server.url) as client:
            client.flush()
            assert client.is_connected
            loop_thread = client._conn.loop_thread.thread
        assert client.is_closed
        assert not loop_thread.is_alive()
        with pytest.raises(jss.ClientClosedError):
            client.flush()

    @pytest.mark.timeout(20)
    def test_the_context_manager_closes_the_client_when_the_body_raises(self, nats_server):
        with pytest.raises(ZeroDivisionError):
            with jss.connect(nats_server.url) as client:
                1 / 0
        assert client.is_closed
        assert not client._conn.loop_thread.thread.is_alive()

    @pytest.mark.timeout(20)
    def test_drain_delivers_queued_publishes_then_closes(self, nats_server, peer):
        subject = unique("drain")
        got = peer.collect(subject)
        client = jss.connect(nats_server.url, timeout=5.0)
        for i in range(500):
            client.publish(subject, str(i).encode())
        client.drain()
        assert client.is_closed
        assert not client._conn.loop_thread.thread.is_alive()
        wait_for(lambda: len(got) == 500, what="all 500 drained messages at the peer")
        assert [m.data for m in got] == [str(i).encode() for i in range(500)]
        with pytest.raises(jss.ClientClosedError):
            client.publish(subject, b"late")

    @pytest.mark.timeout(20)
    def test_close_flushes_publishes_already_queued(self, nats_server, peer):
        subject = unique("closeflush")
        got = peer.collect(subject)
        client = jss.connect(nats_server.url, timeout=5.0)
        for i in range(200):
            client.publish(subject, str(i).encode())
        client.close()
        wait_for(lambda: len(got) == 200, what="all 200 messages at the peer")

    @pytest.mark.timeout(20)
    def test_flush_returns_once_the_server_processed_every_earlier_publish(self, client):
        # A subscription on the same connection: the server writes each MSG
        # before the PONG that ends flush(), so by then all have arrived.
        subject = unique("flush")
        got: list[bytes] = []
        sub = client._conn.call(client._conn.subscribe_raw(subject, lambda s, r, d, h: got.append(d)), 5.0)
        for i in range(1000):
            client.publish(subject, str(i).encode())
        client.flush()
        assert len(got) == 1000
        assert got[-1] == b"999"
        client._conn.call(client._conn.unsubscribe_raw(sub), 5.0)


# --- core NATS publish / request ---------------------------------------------------


class TestCoreNats:
    @pytest.mark.timeout(20)
    def test_request_returns_the_reply_data_and_headers(self, client, peer):
        subject = unique("echo")

        async def echo(msg):
            hdrs = {"Echo-Trace": (msg.headers or {}).get("Trace", "none"), "Responder": "plain-nats"}
            await peer.nc.publish(msg.reply, b"echo:" + msg.data, headers=hdrs)

        peer.subscribe(subject, cb=echo)
        reply = client.request(subject, b"ping", headers={"Trace": "t-1"}, timeout=5)
        assert reply.data == b"echo:ping"
        assert reply.headers["Echo-Trace"] == "t-1"
        assert reply.headers["Responder"] == "plain-nats"
        assert reply.subject.startswith("_INBOX.")
        reply2 = client.request(subject, "text is utf-8 ✓")
        assert reply2.data == "echo:text is utf-8 ✓".encode()
        assert reply2.headers["Echo-Trace"] == "none"

    @pytest.mark.timeout(20)
    def test_request_without_headers_in_the_reply_gives_empty_headers(self, client, peer):
        subject = unique("plain")

        async def plain(msg):
            await msg.respond(b"pong")

        peer.subscribe(subject, cb=plain)
        reply = client.request(subject, b"ping")
        assert reply.data == b"pong"
        assert dict(reply.headers) == {}

    @pytest.mark.timeout(20)
    def test_a_pull_request_by_hand_returns_the_message_with_its_stream_subject(self, client, js, name, subj):
        stream = js.create_stream(name=name, subjects=[f"{subj}.>"], storage="memory")
        stream.create_consumer(durable_name="by-hand")
        js.publish(f"{subj}.a", b"order 1")
        msg = client.request(f"$JS.API.CONSUMER.MSG.NEXT.{name}.by-hand", b"", timeout=5)
        assert (msg.subject, msg.data) == (f"{subj}.a", b"order 1")
        assert msg.reply.startswith(f"$JS.ACK.{name}.by-hand.")

    @pytest.mark.timeout(20)
    def test_request_to_a_subject_nobody_listens_on_raises_no_responders_error_at_once(self, client):
        t0 = time.monotonic()
        with pytest.raises(jss.NoRespondersError):
            client.request(unique("nobody"), b"?", timeout=10)
        assert time.monotonic() - t0 < 2.0

    @pytest.mark.timeout(20)
    def test_request_nobody_answers_raises_jss_timeout_error_after_the_timeout(self, client, peer):
        subject = unique("silent")
        peer.subscribe(subject, cb=_never_answer)
        t0 = time.monotonic()
        with pytest.raises(jss.TimeoutError) as info:
            client.request(subject, b"?", timeout=0.5)
        elapsed = time.monotonic() - t0
        assert isinstance(info.value, TimeoutError)
        assert 0.45 <= elapsed < 1.5
        client.flush()

    @pytest.mark.timeout(20)
    def test_publish_sends_data_reply_and_headers(self, client, peer):
        subject = unique("pub")
        got = peer.collect(subject)
        client.publish(subject, b"payload", reply="my.reply", headers={"Kind": "test", "Trace": "42"})
        client.publish(subject, "text")
        client.publish(subject)
        client.flush()
        wait_for(lambda: len(got) == 3, what="three messages at the peer")
        first, second, third = got
        assert first.data == b"payload"
        assert first.reply == "my.reply"
        assert first.headers == {"Kind": "test", "Trace": "42"}
        assert second.data == b"text"
        assert not second.headers
        assert third.data == b""

    @pytest.mark.parametrize("kwargs, exc, word", [
        (dict(subject="bad subject"), ValueError, "subject"),
        (dict(subject=""), ValueError, "subject"),
        (dict(subject="a..b"), ValueError, "subject"),
        (dict(subject=42), TypeError, "subject"),
        (dict(subject="ok", data=42), TypeError, "data"),
        (dict(subject="ok", reply="bad reply"), ValueError, "reply"),
    ])
    def test_publish_with_a_bad_argument_raises_naming_it(self, client, kwargs, exc, word):
        with pytest.raises(exc, match=word):
            client.publish(**kwargs)

    def test_publish_larger_than_max_payload_raises_value_error_naming_data(self, client):
        with pytest.raises(ValueError, match="data"):
            client.publish("big", b"x" * (client.max_payload + 1))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["close", "drain"])
def test_acks_written_before_close_or_drain_have_reached_the_server(nats_server, js, how):
    stream = js.create_stream(name="CLOSEACK", subjects=["closeack.>"], storage="memory")
    durable = stream.create_consumer(durable_name="d")
    for run in range(50):
        js.publish("closeack.a", b"x")
        with jss.connect(nats_server.url, name="acker") as other:
            msg = other.jetstream().consumer("CLOSEACK", "d").next(timeout=5)
            msg.ack()
            getattr(other, how)()
        # The connection is gone: an ack it had not written is lost for good and this wait fails. The
        # server applies what it read from its consumer's own queue, so info() may need a moment.
        wait_for(lambda: durable.info().num_ack_pending == 0, 2, what=f"run {run}: the ack to reach the server")


def test_an_ellipsis_timeout_still_means_the_default(client):
    # Wrappers written before the DEFAULT sentinel pass their own `timeout=...` through.
    client.flush(timeout=...)
    assert client.jetstream().account_info(timeout=...) is not None


def test_pickling_a_message_says_to_pass_connection_options(client):
    # A core request's reply is a Msg holding the connection; pickling it gets the same advice as a Client.
    echo = client._conn.call(client._conn.subscribe_raw(
        "jss.pickle.echo", lambda s, r, d, h: client._conn.write_now(b"PUB " + r + b" 2\r\nok\r\n")), 5.0)
    try:
        reply = client.request("jss.pickle.echo", b"hi", timeout=5)
        assert reply.data == b"ok"
        with pytest.raises(TypeError, match="cannot be pickled; pass the connection options"):
            pickle.dumps(reply)
    finally:
        client._conn.call(client._conn.unsubscribe_raw(echo), 5.0)


# --- core subscriptions ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_core_subscription_yields_what_is_published_from_then_on_in_order(client):
    subject = f"core.{uuid.uuid4().hex}"
    client.publish(f"{subject}.early", b"before")  # before the subscription: not seen
    client.flush()
    with client.subscribe(f"{subject}.>") as sub:
        for i in range(5):
            client.publish(f"{subject}.{i}", f"m{i}", headers={"K": str(i)})
        got = [sub.next(timeout=5) for _ in range(5)]
        assert [(m.subject, m.data, m.headers["K"]) for m in got] == [
            (f"{subject}.{i}", f"m{i}".encode(), str(i)) for i in range(5)]
        with pytest.raises(jss.TimeoutError):
            sub.next(timeout=0.2)
    with pytest.raises(StopIteration):
        sub.next(timeout=0.1)


@pytest.mark.timeout(30)
def test_a_queue_group_of_core_subscriptions_gets_each_message_once(client):
    subject = f"core.{uuid.uuid4().hex}"
    a, b = client.subscribe(subject, queue="q"), client.subscribe(subject, queue="q")
    try:
        for i in range(200):
            client.publish(subject, str(i))
        client.flush()
        got: list[bytes] = []
        for sub in (a, b):
            while True:
                try:
                    got.append(sub.next(timeout=0.5).data)
                except jss.TimeoutError:
                    break
        assert sorted(got, key=int) == [str(i).encode() for i in range(200)]
    finally:
        a.stop()
        b.stop()


def test_a_bad_core_subscription_is_refused_before_anything_is_sent(client):
    with pytest.raises(ValueError, match="subject"):
        client.subscribe("two words")
    with pytest.raises(ValueError, match="queue"):
        client.subscribe("ok", queue="a b")
    with pytest.raises(ValueError, match="pending_msgs_limit"):
        client.subscribe("ok", pending_msgs_limit=0)


@pytest.mark.timeout(30)
def test_stopping_a_core_subscription_never_answers_the_requests_it_held(client, nats_server):
    subject = f"svc.{uuid.uuid4().hex}"
    sub = client.subscribe(subject)
    answers: list[object] = []

    def ask():
        try:
            answers.append(requester.request(subject, b"ping", timeout=1.0).data)
        except jss.TimeoutError as exc:
            answers.append(exc)

    requester = jss.connect(nats_server.url)
    try:
        t = threading.Thread(target=ask)
        t.start()
        wait_for(lambda: sub._engine.buffered() == 1, 5, what="the request buffered")
        sub.stop()  # unread: a JetStream message would be NAKed; a request gets no reply from us
        t.join(5)
    finally:
        requester.close()
    assert len(answers) == 1 and isinstance(answers[0], jss.TimeoutError), answers
