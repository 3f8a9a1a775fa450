# Charter: `jetstream-sync server` through the real console script (URL first on stdout, serves
# clients, SIGINT/SIGTERM stop it with exit 0 and no nats-server left behind), and the
# connection options against a server that requires a user and password (wrong: exit 4).
from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import time

import pytest

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

from conftest import wait_for
from test_cli import CLI, as_json, cli, cli_env, fails
from test_security import Pki

USERS_CONF = """
authorization {
  users = [
    {user: alice, password: "alice-Pw-7f3a9"}
  ]
}
"""


def first_line(proc: subprocess.Popen, timeout: float) -> str:
    """The first stdout line of ``proc``, waiting at most ``timeout`` seconds for it."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output within {timeout}s"
    return proc.stdout.readline()


def gone(pid: int) -> bool:
    """True once no process ``pid`` exists (or only a zombie we cannot reap is left)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def start_server(*args: str) -> subprocess.Popen:
    return subprocess.Popen([str(CLI), "server", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=cli_env())


def stop(proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    proc.send_signal(sig)
    try:
        return proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.timeout(60)
def test_server_prints_its_url_serves_clients_and_sigint_stops_it_and_its_nats_server(tmp_path):
    proc = start_server("--json", "--store-dir", str(tmp_path / "store"))
    try:
        doc = json.loads(first_line(proc, 20))
        assert doc["url"].startswith("nats://127.0.0.1:") and doc["store_dir"] == str(tmp_path / "store")
        with jss.connect(doc["url"]) as client:
            js = client.jetstream()
            js.create_stream(name="SERVED", subjects=["served"])
            assert js.publish("served", b"x").seq == 1
    finally:
        out, err = stop(proc, signal.SIGINT)
    assert proc.returncode == 0, err
    assert err == "" and out == ""  # nothing after the first line
    wait_for(lambda: gone(doc["pid"]), timeout=10, what="the nats-server child to exit")
    assert (tmp_path / "store").is_dir()  # a given store dir is kept


@pytest.mark.timeout(60)
def test_server_first_line_is_the_url_and_sigterm_stops_it():
    proc = start_server("--no-jetstream")
    url = ""
    try:
        url = first_line(proc, 20).strip()
        assert url.startswith("nats://127.0.0.1:")
        with jss.connect(url) as client:
            assert client.is_connected
    finally:
        out, err = stop(proc, signal.SIGTERM)
    assert proc.returncode == 0, err
    port = int(url.rsplit(":", 1)[1])
    wait_for(lambda: not listening(port), timeout=10, what="the nats-server child to stop listening")


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.timeout(30)
def test_server_refuses_a_non_loopback_host():
    fails(cli("server", "--host", "0.0.0.0", timeout=20), 2, "loopback")


@pytest.fixture(scope="module")
def user_server():
    with NatsServer(config_text=USERS_CONF) as server:
        yield server


@pytest.mark.timeout(30)
@pytest.mark.security
def test_a_wrong_password_exits_4_and_the_right_one_works(user_server):
    started = time.monotonic()
    line = fails(cli("--user", "alice", "--password", "wrong-password", "account", "info", server=user_server), 4,
                 "(?i)authorization violation")
    assert time.monotonic() - started < 5.0
    assert "wrong-password" not in line
    fails(cli("account", "info", server=user_server), 4, "(?i)authorization violation")
    doc = as_json(cli("account", "info", "--json", "--user", "alice", "--password", "alice-Pw-7f3a9",
                      server=user_server))
    assert doc["streams"] == 0
    # Credentials in the URL work too, and never reach the log or the error line, even with -vv.
    url = user_server.url.replace("nats://", "nats://alice:{}@")
    assert as_json(cli("-s", url.format("alice-Pw-7f3a9"), "account", "info", "--json"))["streams"] == 0
    loud = cli("-vv", "-s", url.format("wrong-Pw-000"), "account", "info")
    assert loud.returncode == 4 and "alice:***@" in loud.stderr and "wrong-Pw-000" not in loud.stderr


@pytest.mark.timeout(30)
def test_server_refuses_the_connection_flag_instead_of_ignoring_it(nats_server):
    fails(cli("server", "-s", nats_server.url), 2, "-s/--server is for connecting")


@pytest.mark.timeout(30)
@pytest.mark.security
def test_credentials_can_come_from_the_environment_instead_of_the_command_line(user_server, tmp_path):
    env = {"NATS_USER": "alice", "NATS_PASSWORD": "alice-Pw-7f3a9"}
    doc = as_json(subprocess.run([str(CLI), "account", "info", "--json"], capture_output=True, text=True,
                                 timeout=20, env=cli_env(user_server, **env)))
    assert doc["streams"] == 0
    wrong = subprocess.run([str(CLI), "account", "info"], capture_output=True, text=True, timeout=20,
                           env=cli_env(user_server, NATS_USER="alice", NATS_PASSWORD="not-it-42"))
    assert wrong.returncode == 4 and "not-it-42" not in wrong.stderr
    missing = subprocess.run([str(CLI), "account", "info"], capture_output=True, text=True, timeout=20,
                             env=cli_env(user_server, NATS_CREDS=str(tmp_path / "nope.creds")))
    assert missing.returncode == 2
    assert missing.stderr.startswith("jetstream-sync: error: $NATS_CREDS (for --creds): no such file")


@pytest.mark.timeout(30)
@pytest.mark.security
def test_a_tls_option_against_a_server_without_tls_exits_4_without_logging_in(user_server, tmp_path):
    ca = Pki(tmp_path).ca
    line = fails(cli("--tlsca", ca, "--user", "alice", "--password", "alice-Pw-7f3a9", "account", "info",
                     server=user_server), 4, "does not offer it")
    assert "alice-Pw" not in line
    tls_url = user_server.url.replace("nats://", "tls://")
    fails(cli("-s", tls_url, "--user", "alice", "--password", "alice-Pw-7f3a9", "account", "info"), 4,
          "does not offer it")
