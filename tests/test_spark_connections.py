# Charter: jetstream_sync.spark._connections without Spark: ConnectionOptions
# (pickle, hash, repr hiding secrets, from_paths reading files on the
# "driver"), the per-process client cache (reuse, drop, replacing a closed
# client, a forked child getting its own), against real nats-servers.
from __future__ import annotations

import logging
import os
import pickle
import select
import subprocess
import sys
import tempfile
import time

import pytest
from nats.aio.client import RawCredentials

import jetstream_sync as jss
from jetstream_sync.server import NatsServer
from jetstream_sync.spark import ConnectionOptions, client_for, drop, drop_all, jetstream_for, worker_identity

SEED = "SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU"
JWT = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.not-a-real-jwt"
CREDS = f"""-----BEGIN NATS USER JWT-----
{JWT}
------END NATS USER JWT------

-----BEGIN USER NKEY SEED-----
{SEED}
------END USER NKEY SEED------
"""


@pytest.fixture(autouse=True)
def _drop_cached_connections():
    yield
    drop_all()


def make_tls_files(directory) -> dict[str, str]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate (openssl CLI)."""
    os.makedirs(directory, exist_ok=True)
    d = str(directory)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=30)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=jss-test-ca")
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                     ("client", "extendedKeyUsage=clientAuth")):
        run("req", *ec, "-keyout", f"{who}.key", "-out", f"{who}.csr", "-subj", f"/CN=jss-test-{who}")
        with open(os.path.join(d, f"{who}.ext"), "w") as f:
            f.write(ext + "\n")
        run("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{who}.pem", "-days", "2", "-extfile", f"{who}.ext")
    return {name: os.path.join(d, name) for name in
            ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


def test_the_package_imports_and_builds_publishers_without_pyspark():
    script = (
        "import sys; sys.modules['pyspark'] = None\n"  # an import of pyspark now fails
        "import jetstream_sync.spark as s\n"
        "p = s.publisher(servers='nats://127.0.0.1:1', subject='a.b')\n"
        "try:\n"
        "    p.publish([{'data': b'x'}])\n"
        "except ValueError as e:\n"
        "    assert 'partition_id' in str(e), e\n"
        "try:\n"
        "    s.no_such_name\n"
        "except AttributeError:\n"
        "    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


# -- ConnectionOptions -----------------------------------------------------------------------------


def test_options_survive_pickling_equal_and_with_the_same_hash():
    opts = ConnectionOptions("nats://a:4222,nats://b:4222", name="etl", timeout=2.5, user="u", password="p",
                             extra={"max_reconnect_attempts": 3, "ping_interval": 10})
    back = pickle.loads(pickle.dumps(opts))
    assert back == opts and hash(back) == hash(opts)
    assert back.servers == ("nats://a:4222", "nats://b:4222")
    assert back.extra == (("max_reconnect_attempts", 3), ("ping_interval", 10))
    assert {opts: 1}[back] == 1


def test_options_differing_in_any_field_are_different_cache_keys():
    base = ConnectionOptions("nats://a:4222")
    assert base != ConnectionOptions("nats://a:4222", token="t")
    assert base != ConnectionOptions("nats://a:4222", timeout=1.0)
    assert len({base, ConnectionOptions(["nats://a:4222"]), ConnectionOptions("nats://b:4222")}) == 2


def test_repr_and_str_show_which_credentials_are_set_but_never_their_values():
    opts = ConnectionOptions("nats://alice:url-pass@127.0.0.1:4222,nats://url-token@h:4222", user="bob",
                             password="hunter2", token="tok-123", creds=CREDS, tls_ca="CA-PEM", tls_cert="CERT-PEM",
                             tls_key="KEY-PEM-SECRET")
    seed_only = ConnectionOptions("nats://h:4222", nkeys_seed_str=SEED)
    for text in (repr(opts), str(opts), repr(seed_only), repr([opts])):
        for secret in ("url-pass", "url-token", "hunter2", "tok-123", SEED, JWT, "KEY-PEM-SECRET"):
            assert secret not in text
    assert "password=<hidden>" in repr(opts) and "token=<hidden>" in repr(opts) and "creds=<hidden>" in repr(opts)
    assert "tls_key=<hidden>" in repr(opts) and "nkeys_seed_str=<hidden>" in repr(seed_only)
    assert "alice:***@127.0.0.1:4222" in repr(opts) and "user='bob'" in repr(opts)


def test_validation_errors_never_echo_a_secret():
    with pytest.raises(TypeError) as info:
        ConnectionOptions("nats://h:4222", password=b"bytes-secret")
    assert "bytes-secret" not in str(info.value) and "password" in str(info.value)
    with pytest.raises(ValueError) as info:
        ConnectionOptions("nats://h:4222", tls_cert="CERT", tls_key=None)
    assert "tls_key" in str(info.value)


def test_extra_options_must_be_plain_hashable_values_without_their_own_field():
    with pytest.raises(TypeError, match="callable"):
        ConnectionOptions("nats://h:4222", extra={"error_handler_x": print})
    with pytest.raises(ValueError, match="'token' has its own"):
        ConnectionOptions("nats://h:4222", extra={"token": "t"})
    with pytest.raises(TypeError, match="hashable"):
        ConnectionOptions("nats://h:4222", extra={"some_list": [1, 2]})


def test_from_paths_reads_credential_files_into_the_options(tmp_path):
    (tmp_path / "user.creds").write_text(CREDS)
    (tmp_path / "seed.nk").write_text(SEED + "\n")
    (tmp_path / "ca.pem").write_text("CA")
    opts = ConnectionOptions.from_paths("nats://h:4222", user_credentials=str(tmp_path / "user.creds"),
                                        tls_ca_file=tmp_path / "ca.pem", max_reconnect_attempts=5)
    seeded = ConnectionOptions.from_paths("nats://h:4222", nkeys_seed=str(tmp_path / "seed.nk"))
    for f in tmp_path.iterdir():
        f.unlink()  # what travels are the contents: the paths are gone on an executor
    assert opts.creds == CREDS and opts.tls_ca == "CA" and seeded.nkeys_seed_str == SEED + "\n"
    assert str(tmp_path) not in repr(opts)
    kwargs = seeded.to_connect_kwargs()
    assert kwargs["nkeys_seed_str"] == SEED + "\n" and "nkeys_seed" not in kwargs
    no_tls = ConnectionOptions("nats://h:4222", creds=CREDS, extra={"max_reconnect_attempts": 5})
    kwargs = no_tls.to_connect_kwargs()
    assert isinstance(kwargs["user_credentials"], RawCredentials) and kwargs["user_credentials"].data == CREDS
    assert kwargs["max_reconnect_attempts"] == 5 and kwargs["servers"] == ["nats://h:4222"]


def test_from_paths_expands_home_and_names_a_missing_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "etl.creds").write_text(CREDS)
    assert ConnectionOptions.from_paths("nats://h:4222", creds_file="~/etl.creds").creds == CREDS
    with pytest.raises(FileNotFoundError, match="missing.creds"):
        ConnectionOptions.from_paths("nats://h:4222", user_credentials=str(tmp_path / "missing.creds"))


# -- the cache ----------------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_client_for_returns_one_connection_per_process_and_options(nats_server):
    opts = ConnectionOptions(nats_server.url, name="cache-a")
    first = client_for(opts)
    assert client_for(ConnectionOptions(nats_server.url, name="cache-a")) is first
    assert client_for(pickle.loads(pickle.dumps(opts))) is first
    other = client_for(ConnectionOptions(nats_server.url, name="cache-b"))
    assert other is not first and first.is_connected and other.is_connected
    assert jetstream_for(opts) is jetstream_for(opts)
    assert jetstream_for(opts, max_pending=10) is not jetstream_for(opts)
    assert worker_identity(opts).startswith(f"{os.getpid()}:")
    assert worker_identity(opts) != worker_identity(ConnectionOptions(nats_server.url, name="cache-b"))


@pytest.mark.timeout(20)
def test_drop_closes_and_forgets_the_connection(nats_server):
    opts = ConnectionOptions(nats_server.url)
    first = client_for(opts)
    identity = worker_identity(opts)
    assert drop(opts) is True
    assert first.is_closed
    assert drop(opts) is False
    second = client_for(opts)
    assert second is not first and second.is_connected
    assert worker_identity(opts) != identity


@pytest.mark.timeout(20)
def test_a_cached_client_closed_by_someone_else_is_replaced(nats_server):
    opts = ConnectionOptions(nats_server.url)
    first = client_for(opts)
    first.close()
    second = client_for(opts)
    assert second is not first and second.is_connected


def test_client_for_accepts_only_connection_options():
    with pytest.raises(TypeError, match="ConnectionOptions"):
        client_for({"servers": "nats://h:4222"})


@pytest.mark.timeout(20)
def test_connect_logs_never_contain_secrets(caplog):
    config = 'authorization { user: "alice", password: "s3cr3t-pw" }\n'
    with NatsServer(config_text=config) as server:
        opts = ConnectionOptions(server.url, user="alice", password="s3cr3t-pw", name="logged")
        with caplog.at_level(logging.DEBUG):
            client = client_for(opts)
            client.flush()
            drop(opts)
        assert "jetstream_sync.spark" in caplog.text  # the connect was logged...
        assert "s3cr3t-pw" not in caplog.text          # ...without the password


@pytest.mark.timeout(20)
def test_user_password_and_token_auth_from_options():
    with NatsServer(config_text='authorization { user: "alice", password: "pw" }\n') as server:
        client_for(ConnectionOptions(server.url, user="alice", password="pw")).flush()
        url_auth = server.url.replace("nats://", "nats://alice:pw@")
        client_for(ConnectionOptions(url_auth)).flush()
        with pytest.raises(jss.JetStreamError):
            client_for(ConnectionOptions(server.url, user="alice", password="wrong", extra={"allow_reconnect": False}))
        drop_all()
    with NatsServer(config_text='authorization { token: "tok-42" }\n') as server:
        client_for(ConnectionOptions(server.url, token="tok-42")).flush()
        drop_all()


@pytest.mark.timeout(30)
def test_tls_client_certificate_from_files_deleted_before_connecting(tmp_path, monkeypatch):
    files = make_tls_files(tmp_path / "pki")
    config = (f'tls {{ cert_file: "{files["server.pem"]}", key_file: "{files["server.key"]}", '
              f'ca_file: "{files["ca.pem"]}", verify: true }}\n')
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with NatsServer(config_text=config) as server:
        opts = ConnectionOptions.from_paths(server.url, tls_ca_file=files["ca.pem"], tls_cert_file=files["client.pem"],
                                            tls_key_file=files["client.key"])
        key_text = open(files["client.key"]).read()
        for path in files.values():
            os.unlink(path)
        assert key_text.strip().splitlines()[1] not in repr(opts)
        client = client_for(pickle.loads(pickle.dumps(opts)))
        client.flush()
        assert client.is_connected
        # The client key was written only for the moment ssl needed a path.
        assert [p.name for p in scratch.iterdir() if p.name.startswith("jss-tls-")] == []
        drop_all()


@pytest.mark.timeout(30)
def test_a_forked_child_gets_its_own_connection_and_leaves_the_parents_alone(nats_server):
    opts = ConnectionOptions(nats_server.url, name="forky")
    parent = client_for(opts)
    parent_identity = worker_identity(opts)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe and never return into pytest
        try:
            os.close(read_end)
            child = client_for(opts)
            child.flush(timeout=5)
            verdict = "fresh" if child is not parent and worker_identity(opts) != parent_identity else "reused"
            drop(opts)
            os.write(write_end, verdict.encode())
        except BaseException as exc:  # noqa: BLE001 - anything must reach the parent
            os.write(write_end, f"error {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 20)
        verdict = os.read(read_end, 4096).decode() if ready else "child timed out"
    finally:
        os.close(read_end)
        deadline = time.monotonic() + 10
        while os.waitpid(pid, os.WNOHANG) == (0, 0) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert verdict == "fresh"
    assert client_for(opts) is parent
    parent.flush()  # the child's exit did not take the parent's connection down
