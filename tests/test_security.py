# Charter: the client against real servers that require credentials or TLS: user/password, token,
# nkey, a creds file for a JWT account (operator, account and user JWTs signed here with nkeys),
# and TLS (and mutual TLS) with a CA made by the test. Wrong credentials fail fast with an
# authorization error; permission violations name the refused subject; no secret reaches a log or repr.
from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import logging
import os
import re
import socket
import ssl
import threading
import time
from pathlib import Path

import nkeys
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import jetstream_sync as jss
from jetstream_sync.errors import AuthorizationError, PermissionViolationError
from jetstream_sync.server import NatsServer

from conftest import wait_for

pytestmark = pytest.mark.security

#: Client timeout in these tests; every refusal must come well before it.
TIMEOUT = 5.0
FAST = 1.0


def fails_fast(exc_type, match, connect):
    """``connect()`` raises ``exc_type`` matching ``match`` in well under the client timeout; return it."""
    start = time.monotonic()
    with pytest.raises(exc_type, match=match) as info:
        connect()
    elapsed = time.monotonic() - start
    assert elapsed < FAST, f"took {elapsed:.2f}s to refuse (client timeout {TIMEOUT}s)"
    return info.value


def roundtrip(client: jss.Client, stream: str) -> None:
    """Create a stream, publish, fetch and ack one message: the connection does real JetStream work."""
    js = client.jetstream()
    js.create_stream(name=stream, subjects=[f"{stream.lower()}.>"], storage=jss.StorageType.MEMORY)
    ack = js.publish(f"{stream.lower()}.one", b"payload")
    assert (ack.stream, ack.seq) == (stream, 1)
    consumer = js.create_consumer(stream, durable_name="reader")
    msgs = list(consumer.fetch(1, expires=2.0))
    assert [m.data for m in msgs] == [b"payload"]
    msgs[0].double_ack()
    js.delete_stream(stream)


# --- user/password and token ------------------------------------------------------------------

USERS_CONF = """
authorization {
  users = [
    {user: alice, password: "alice-Pw-7f3a9"}
  ]
}
"""


@pytest.fixture(scope="module")
def user_server():
    with NatsServer(config_text=USERS_CONF) as server:
        yield server


@pytest.mark.timeout(30)
def test_a_user_with_the_right_password_connects_and_uses_jetstream(user_server):
    with jss.connect(user_server.url, user="alice", password="alice-Pw-7f3a9", timeout=TIMEOUT) as client:
        roundtrip(client, "USERPW")


@pytest.mark.timeout(30)
def test_credentials_in_the_url_work_too(user_server):
    url = f"nats://alice:alice-Pw-7f3a9@127.0.0.1:{user_server.port}"
    with jss.connect(url, timeout=TIMEOUT) as client:
        assert client.jetstream().account_info().streams == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("creds", [
    {"user": "alice", "password": "wrong-password"},
    {"user": "mallory", "password": "alice-Pw-7f3a9"},
    {},
], ids=["wrong password", "unknown user", "no credentials"])
def test_wrong_user_credentials_fail_fast_with_an_authorization_error(user_server, creds):
    err = fails_fast(AuthorizationError, "(?i)authorization violation",
                     lambda: jss.connect(user_server.url, timeout=TIMEOUT, **creds))
    # Still a NoServersError (and a ConnectionError) for code that catches those.
    assert isinstance(err, jss.NoServersError) and isinstance(err, ConnectionError)
    assert "wrong-password" not in str(err) and "alice-Pw-7f3a9" not in str(err)


TOKEN = "tok-0c9d1e7b2a"


@pytest.fixture(scope="module")
def token_server():
    with NatsServer(config_text=f'authorization {{ token: "{TOKEN}" }}\n') as server:
        yield server


@pytest.mark.timeout(30)
def test_a_token_connects_and_uses_jetstream(token_server):
    with jss.connect(token_server.url, token=TOKEN, timeout=TIMEOUT) as client:
        roundtrip(client, "TOKEN")
    with jss.connect(f"nats://{TOKEN}@127.0.0.1:{token_server.port}", timeout=TIMEOUT) as client:
        assert client.is_connected


@pytest.mark.timeout(30)
@pytest.mark.parametrize("creds", [{"token": "tok-wrong"}, {}], ids=["wrong token", "no token"])
def test_a_wrong_token_fails_fast_with_an_authorization_error(token_server, creds):
    err = fails_fast(AuthorizationError, "(?i)authorization violation",
                     lambda: jss.connect(token_server.url, timeout=TIMEOUT, **creds))
    assert "tok-wrong" not in str(err)


# --- nkeys ------------------------------------------------------------------------------------


def new_keypair(prefix: int) -> nkeys.KeyPair:
    return nkeys.from_seed(bytearray(nkeys.encode_seed(os.urandom(32), prefix)))


@pytest.fixture(scope="module")
def user_nkey():
    return new_keypair(nkeys.PREFIX_BYTE_USER)


@pytest.fixture(scope="module")
def nkey_server(user_nkey):
    conf = f"authorization {{ users = [ {{ nkey: {user_nkey.public_key.decode()} }} ] }}\n"
    with NatsServer(config_text=conf) as server:
        yield server


@pytest.mark.timeout(30)
def test_an_nkey_seed_connects_and_uses_jetstream(nkey_server, user_nkey, tmp_path):
    seed = user_nkey.seed.decode()
    with jss.connect(nkey_server.url, nkeys_seed_str=seed, timeout=TIMEOUT) as client:
        roundtrip(client, "NKEY")
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed + "\n")
    with jss.connect(nkey_server.url, nkeys_seed=str(seed_file), timeout=TIMEOUT) as client:
        assert client.jetstream().account_info().streams == 0


@pytest.mark.timeout(30)
def test_an_unknown_nkey_fails_fast_with_an_authorization_error(nkey_server):
    stranger = new_keypair(nkeys.PREFIX_BYTE_USER).seed.decode()
    err = fails_fast(AuthorizationError, "(?i)authorization violation",
                     lambda: jss.connect(nkey_server.url, nkeys_seed_str=stranger, timeout=TIMEOUT))
    assert stranger not in str(err)


@pytest.mark.timeout(30)
def test_a_malformed_seed_is_a_value_error_that_does_not_echo_it(nkey_server):
    bad = "SUAMALFORMEDSEEDTHATISNOTBASE32CHECKSUMMED0000000000000000"
    err = fails_fast(ValueError, "nkeys_seed", lambda: jss.connect(nkey_server.url, nkeys_seed_str=bad))
    assert bad not in str(err)


# --- JWT accounts (creds file) ------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def encode_jwt(issuer: nkeys.KeyPair, subject: str, name: str, nats: dict) -> str:
    """A NATS v2 JWT: base64url(header).base64url(claims).base64url(ed25519 signature by ``issuer``)."""
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    claims = {
        "jti": _b64(os.urandom(20)),
        "iat": int(time.time()),
        "iss": issuer.public_key.decode(),
        "name": name,
        "sub": subject,
        "nats": {**nats, "version": 2},
    }
    body = _b64(json.dumps(claims).encode())
    signature = issuer.sign(f"{header}.{body}".encode())
    return f"{header}.{body}.{_b64(signature)}"


UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
             "conn": -1, "leaf": -1}
#: Non-zero JetStream limits are what enable JetStream for a JWT account.
JETSTREAM_UNLIMITED = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


class Operator:
    """An operator with a system account and one JetStream-enabled account, as nsc would make them."""

    def __init__(self) -> None:
        self.key = new_keypair(nkeys.PREFIX_BYTE_OPERATOR)
        self.system = new_keypair(nkeys.PREFIX_BYTE_ACCOUNT)
        self.account = new_keypair(nkeys.PREFIX_BYTE_ACCOUNT)
        op_pub = self.key.public_key.decode()
        self.jwt = encode_jwt(self.key, op_pub, "TEST-OP",
                              {"type": "operator", "system_account": self.system.public_key.decode()})
        self.system_jwt = encode_jwt(self.key, self.system.public_key.decode(), "SYS",
                                     {"type": "account", "limits": UNLIMITED})
        self.account_jwt = encode_jwt(self.key, self.account.public_key.decode(), "APP",
                                      {"type": "account", "limits": {**UNLIMITED, **JETSTREAM_UNLIMITED}})

    def config(self) -> str:
        return (
            f"operator: {self.jwt}\n"
            f"system_account: {self.system.public_key.decode()}\n"
            "resolver: MEMORY\n"
            "resolver_preload: {\n"
            f"  {self.system.public_key.decode()}: {self.system_jwt}\n"
            f"  {self.account.public_key.decode()}: {self.account_jwt}\n"
            "}\n"
        )

    def user_creds(self, path: Path, signer: nkeys.KeyPair | None = None, permissions: dict | None = None) -> tuple[str, str]:
        """Write a creds file for a new user of the account (signed by ``signer``); return (jwt, seed)."""
        user = new_keypair(nkeys.PREFIX_BYTE_USER)
        claims = {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, **(permissions or {})}
        token = encode_jwt(signer or self.account, user.public_key.decode(), "app-user", claims)
        seed = user.seed.decode()
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{token}\n"
            "------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{seed}\n"
            "------END USER NKEY SEED------\n"
        )
        return token, seed


@pytest.fixture(scope="module")
def operator():
    return Operator()


@pytest.fixture(scope="module")
def jwt_server(operator):
    with NatsServer(config_text=operator.config()) as server:
        yield server


@pytest.mark.timeout(30)
def test_a_creds_file_of_a_jwt_account_connects_and_uses_jetstream(jwt_server, operator, tmp_path):
    creds = tmp_path / "app.creds"
    operator.user_creds(creds)
    with jss.connect(jwt_server.url, user_credentials=str(creds), timeout=TIMEOUT) as client:
        roundtrip(client, "JWTACC")
        assert client.jetstream().account_info().limits.max_streams == -1


@pytest.mark.timeout(30)
def test_a_user_jwt_signed_by_an_untrusted_account_fails_fast_with_an_authorization_error(
        jwt_server, operator, tmp_path):
    creds = tmp_path / "forged.creds"
    operator.user_creds(creds, signer=new_keypair(nkeys.PREFIX_BYTE_ACCOUNT))
    fails_fast(AuthorizationError, "(?i)authorization violation",
               lambda: jss.connect(jwt_server.url, user_credentials=str(creds), timeout=TIMEOUT))


@pytest.mark.timeout(30)
def test_a_creds_file_without_a_jwt_is_refused_before_connecting_instead_of_hanging(jwt_server, tmp_path):
    # nats-py alone spins forever on its event loop looking for the missing JWT block.
    seed = new_keypair(nkeys.PREFIX_BYTE_USER).seed.decode()
    creds = tmp_path / "seed-only.creds"
    creds.write_text(f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n")
    err = fails_fast(ValueError, "user_credentials",
                     lambda: jss.connect(jwt_server.url, user_credentials=str(creds), timeout=TIMEOUT))
    assert seed not in str(err)


@pytest.mark.timeout(30)
def test_a_jwt_users_publish_permissions_are_enforced_with_an_error_naming_the_subject(
        jwt_server, operator, tmp_path):
    creds = tmp_path / "readonly.creds"
    operator.user_creds(creds, permissions={"pub": {"allow": ["$JS.API.INFO", "$JS.API.STREAM.INFO.>"]}})
    with jss.connect(jwt_server.url, user_credentials=str(creds), timeout=TIMEOUT) as client:
        js = client.jetstream()
        assert js.account_info().streams >= 0
        start = time.monotonic()
        with pytest.raises(PermissionViolationError, match=re.escape("'$JS.API.STREAM.CREATE.JWTRO'")):
            js.create_stream(name="JWTRO", subjects=["jwtro.>"])
        assert time.monotonic() - start < FAST
        assert js.account_info().streams >= 0  # the connection survived the violation


# --- TLS --------------------------------------------------------------------------------------


class Pki:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        now = dt.datetime.now(dt.timezone.utc)
        self._validity = (now - dt.timedelta(minutes=5), now + dt.timedelta(hours=2))
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jetstream-sync test CA")])
        ca = (self._builder(ca_name, ca_name, ca_key.public_key())
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                           content_commitment=False, key_encipherment=False,
                                           data_encipherment=False, key_agreement=False,
                                           encipher_only=False, decipher_only=False), critical=True)
              .sign(ca_key, hashes.SHA256()))
        self.ca = self._write("ca.pem", ca)
        self.server_cert, self.server_key = self._leaf("server", ca, ca_key, ExtendedKeyUsageOID.SERVER_AUTH, [
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
        self.client_cert, self.client_key = self._leaf("client", ca, ca_key, ExtendedKeyUsageOID.CLIENT_AUTH, [
            x509.DNSName("client.test")])

    def _builder(self, subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(self._validity[0]).not_valid_after(self._validity[1]))

    def _leaf(self, name: str, ca: x509.Certificate, ca_key, usage, sans) -> tuple[str, str]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), ca.subject,
                              key.public_key())
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        key_path = self.dir / f"{name}-key.pem"
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return self._write(f"{name}.pem", cert), str(key_path)

    def _write(self, filename: str, cert: x509.Certificate) -> str:
        path = self.dir / filename
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return str(path)

    def server_config(self, verify_clients: bool = False) -> str:
        lines = [f'cert_file: "{self.server_cert}"', f'key_file: "{self.server_key}"', "timeout: 2"]
        if verify_clients:
            lines += [f'ca_file: "{self.ca}"', "verify: true"]
        return "tls {\n  " + "\n  ".join(lines) + "\n}\n"

    def client_context(self, with_cert: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)
        if with_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_server(pki):
    with NatsServer(config_text=pki.server_config()) as server:
        yield server


@pytest.mark.timeout(30)
def test_tls_with_the_tests_ca_connects_and_uses_jetstream(tls_server, pki):
    # The server requires TLS of every client (see the next test), so this is a TLS connection.
    with jss.connect(tls_server.url, tls=pki.client_context(), timeout=TIMEOUT) as client:
        roundtrip(client, "TLS")
    with jss.connect(f"tls://127.0.0.1:{tls_server.port}", tls=pki.client_context(), timeout=TIMEOUT) as client:
        assert client.is_connected


@pytest.mark.timeout(30)
def test_a_tls_connection_logs_no_asyncio_warnings_when_it_ends(pki, caplog):
    with NatsServer(config_text=pki.server_config(verify_clients=True)) as server:
        with caplog.at_level(logging.WARNING):
            with jss.connect(server.url, tls=pki.client_context(with_cert=True), timeout=TIMEOUT) as client:
                roundtrip(client, "TLSQUIET")
            with pytest.raises(jss.NoServersError):
                jss.connect(server.url, tls=pki.client_context(), timeout=TIMEOUT)
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("options", [lambda: {"tls": ssl.create_default_context()}, dict],
                         ids=["system trust store", "no tls option"])
def test_a_server_certificate_the_client_does_not_trust_fails_fast(tls_server, options):
    # Without a tls option nats-py upgrades to TLS with the system's trust store: refused the same way.
    fails_fast(jss.NoServersError, "CERTIFICATE_VERIFY_FAILED",
               lambda: jss.connect(tls_server.url, timeout=TIMEOUT, **options()))


class PlainInfoServer:
    """A TCP listener that greets like a nats-server without TLS and records what the client sends."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.thread = threading.Thread(target=self._serve, name="plain-info-server", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.sendall(b'INFO {"server_id":"FAKE","version":"2.15.1","max_payload":1048576,'
                         b'"auth_required":true,"proto":1}\r\n')
            conn.settimeout(10)
            while chunk := conn.recv(4096):
                self.received += chunk

    def close(self) -> None:
        self.thread.join(10)
        self.sock.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["ssl context", "tls:// URL"])
def test_a_client_asking_for_tls_never_sends_credentials_to_a_server_without_tls(how):
    plain = PlainInfoServer()
    try:
        url = f"tls://127.0.0.1:{plain.port}" if how == "tls:// URL" else f"nats://127.0.0.1:{plain.port}"
        options = {"tls": ssl.create_default_context()} if how == "ssl context" else {}
        fails_fast(jss.NoServersError, "does not offer it",
                   lambda: jss.connect(url, user="alice", password="alice-Pw-7f3a9", timeout=TIMEOUT, **options))
    finally:
        plain.close()
    assert b"CONNECT" not in plain.received and b"alice-Pw" not in plain.received


@pytest.mark.timeout(30)
def test_asking_for_tls_from_a_real_server_without_tls_fails_instead_of_logging_in_in_clear(user_server):
    fails_fast(jss.NoServersError, "does not offer it",
               lambda: jss.connect(user_server.url, user="alice", password="alice-Pw-7f3a9", timeout=TIMEOUT,
                                   tls=ssl.create_default_context()))


@pytest.mark.timeout(30)
def test_mutual_tls_accepts_a_client_certificate_from_the_ca_and_refuses_none(pki):
    with NatsServer(config_text=pki.server_config(verify_clients=True)) as server:
        with jss.connect(server.url, tls=pki.client_context(with_cert=True), timeout=TIMEOUT) as client:
            roundtrip(client, "MTLS")
        fails_fast(jss.NoServersError, "(?i)certificate|handshake",
                   lambda: jss.connect(server.url, tls=pki.client_context(), timeout=TIMEOUT))


# --- permissions on $JS.API ---------------------------------------------------------------------

PERMS_CONF = """
authorization {
  users = [
    {user: admin, password: "admin-pw"}
    {user: reader, password: "reader-pw", permissions: {
      publish: { allow: ["$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.CONSUMER.INFO.*.*", "$JS.ACK.>"] }
      subscribe: { allow: ["_INBOX.>"] }
    }}
    {user: noinbox, password: "noinbox-pw", permissions: {
      publish: { allow: [">"] }
      subscribe: { allow: ["other.>"] }
    }}
  ]
}
"""


@pytest.fixture(scope="module")
def perms_server():
    with NatsServer(config_text=PERMS_CONF) as server:
        with jss.connect(server.url, user="admin", password="admin-pw") as admin:
            js = admin.jetstream()
            js.create_stream(name="PERMS", subjects=["perms.>"], storage=jss.StorageType.MEMORY)
            js.create_stream(name="PERMSD", subjects=["permsd.>"], storage=jss.StorageType.MEMORY,
                             allow_direct=True)
            js.publish("perms.one", b"1")
            js.publish("permsd.one", b"1")
            js.create_consumer("PERMS", durable_name="C")
        yield server


@pytest.fixture
def reader(perms_server):
    with jss.connect(perms_server.url, user="reader", password="reader-pw", timeout=TIMEOUT) as client:
        yield client


def _denied(call, subject: str) -> PermissionViolationError:
    start = time.monotonic()
    with pytest.raises(PermissionViolationError, match=re.escape(repr(subject))) as info:
        call()
    elapsed = time.monotonic() - start
    assert elapsed < FAST, f"the refusal took {elapsed:.2f}s: it waited for a timeout"
    return info.value


REFUSED_API_CALLS = {
    "create_stream": (lambda js, c: js.create_stream(name="NEWONE", subjects=["newone.>"]),
                      "$JS.API.STREAM.CREATE.NEWONE"),
    "update_stream": (lambda js, c: js.update_stream(name="PERMS", subjects=["perms.>"], max_msgs=5),
                      "$JS.API.STREAM.UPDATE.PERMS"),
    "delete_stream": (lambda js, c: js.delete_stream("PERMS"), "$JS.API.STREAM.DELETE.PERMS"),
    "stream_names": (lambda js, c: list(js.stream_names()), "$JS.API.STREAM.NAMES"),
    "purge": (lambda js, c: js.stream("PERMS").purge(), "$JS.API.STREAM.PURGE.PERMS"),
    "get_msg": (lambda js, c: js.stream("PERMS").get_msg(1), "$JS.API.STREAM.MSG.GET.PERMS"),
    "delete_msg": (lambda js, c: js.stream("PERMS").delete_msg(1), "$JS.API.STREAM.MSG.DELETE.PERMS"),
    "create_consumer": (lambda js, c: js.create_consumer("PERMS", durable_name="MINE"),
                        "$JS.API.CONSUMER.CREATE.PERMS.MINE"),
    "delete_consumer": (lambda js, c: js.delete_consumer("PERMS", "C"), "$JS.API.CONSUMER.DELETE.PERMS.C"),
    "core request": (lambda js, c: c.request("perms.core", b"?"), "perms.core"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("call", list(REFUSED_API_CALLS), ids=list(REFUSED_API_CALLS))
def test_a_refused_api_call_fails_at_once_with_an_error_naming_the_subject(reader, call):
    fn, subject = REFUSED_API_CALLS[call]
    js = reader.jetstream()
    err = _denied(lambda: fn(js, reader), subject)
    assert isinstance(err, PermissionError)  # also the builtin, like jss.TimeoutError
    assert err.subject == subject
    # The server keeps the connection; what the user may do still works.
    assert reader.is_connected
    assert js.account_info().streams == 2
    assert js.stream("PERMS").cached_info.state.messages >= 1


@pytest.mark.timeout(30)
def test_a_refused_direct_get_fails_at_once_with_an_error_naming_the_subject(reader):
    stream = reader.jetstream().stream("PERMSD")
    _denied(lambda: stream.get_msg(1), "$JS.API.DIRECT.GET.PERMSD")


@pytest.mark.timeout(30)
def test_a_refused_pull_ends_fetch_with_an_error_naming_the_subject(reader):
    consumer = reader.jetstream().consumer("PERMS", "C")

    def fetch_all():
        return list(consumer.fetch(1, expires=3.0))

    _denied(fetch_all, "$JS.API.CONSUMER.MSG.NEXT.PERMS.C")


@pytest.mark.timeout(30)
def test_a_refused_pull_ends_next_with_an_error_naming_the_subject(reader):
    consumer = reader.jetstream().consumer("PERMS", "C")
    _denied(lambda: consumer.next(timeout=3.0), "$JS.API.CONSUMER.MSG.NEXT.PERMS.C")


@pytest.mark.timeout(30)
def test_a_refused_jetstream_publish_fails_at_once_with_an_error_naming_the_subject(reader):
    _denied(lambda: reader.jetstream().publish("perms.two", b"2"), "perms.two")


@pytest.mark.timeout(30)
def test_a_user_that_may_not_subscribe_to_its_inbox_gets_a_permission_error_not_a_timeout(perms_server):
    with jss.connect(perms_server.url, user="noinbox", password="noinbox-pw", timeout=TIMEOUT) as client:
        for call in (client.jetstream().account_info, lambda: client.request("other.service", b"?")):
            start = time.monotonic()
            with pytest.raises(PermissionViolationError, match="(?i)subscribe to '_inbox\\."):
                call()
            assert time.monotonic() - start < FAST


# --- no secret in logs or repr ------------------------------------------------------------------

LEAK_CONF = {
    "password": 'authorization { users = [ {user: alice, password: "pw-LEAK-4d1f0a"} ] }\n',
    "token": 'authorization { token: "tok-LEAK-8e2b7c" }\n',
}


def _leak_cases():
    yield "password option", "password", lambda s: {"user": "alice", "password": "pw-LEAK-4d1f0a"}, \
        {"user": "alice", "password": "pw-WRONG-93ac1"}, ["pw-LEAK-4d1f0a", "pw-WRONG-93ac1"]
    yield "password in url", "password", lambda s: {"url": f"nats://alice:pw-LEAK-4d1f0a@127.0.0.1:{s.port}"}, \
        {"user": "alice", "password": "pw-WRONG-93ac1"}, ["pw-LEAK-4d1f0a", "pw-WRONG-93ac1"]
    yield "token option", "token", lambda s: {"token": "tok-LEAK-8e2b7c"}, {"token": "tok-WRONG-5b7e"}, \
        ["tok-LEAK-8e2b7c", "tok-WRONG-5b7e"]
    yield "token in url", "token", lambda s: {"url": f"nats://tok-LEAK-8e2b7c@127.0.0.1:{s.port}"}, \
        {"token": "tok-WRONG-5b7e"}, ["tok-LEAK-8e2b7c", "tok-WRONG-5b7e"]


def _all_log_text(caplog) -> str:
    parts = [caplog.text]
    for record in caplog.records:
        parts += [record.getMessage(), repr(record.args), record.exc_text or ""]
    return "\n".join(parts)


def _exercise(server: NatsServer, caplog, good: dict, bad: dict, secrets: list[str]) -> None:
    """Connect (once refused, once accepted), work, survive a server restart, close; then look for secrets."""
    caplog.set_level(logging.DEBUG)
    good = dict(good)
    url = good.pop("url", server.url)
    with pytest.raises(AuthorizationError) as refused:
        jss.connect(server.url, timeout=TIMEOUT, **bad)
    reconnects = []
    client = jss.connect(url, timeout=TIMEOUT, reconnect_time_wait=0.05, max_reconnect_attempts=-1,
                         reconnected_cb=lambda: reconnects.append(1), **good)
    try:
        shown = [repr(client), str(client.connected_url)]
        client.jetstream().account_info()
        server.restart()
        wait_for(lambda: reconnects, timeout=10.0, what="the client to reconnect")
        wait_for(lambda: "reconnected to" in caplog.text, timeout=5.0, what="the reconnect log line")
        client.jetstream().account_info()
        shown += [repr(client), str(client.connected_url)]
    finally:
        client.close()
    shown.append(repr(client))
    text = "\n".join([_all_log_text(caplog), *shown, str(refused.value), repr(refused.value)])
    # The log did say where it connected: the check below looked at real URLs.
    assert f"127.0.0.1:{server.port}" in caplog.text
    for secret in secrets:
        assert secret not in text, f"a credential leaked: {secret!r} appears in a log line, repr or error"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(_leak_cases()), ids=[c[0] for c in _leak_cases()])
def test_no_password_or_token_appears_in_a_log_line_a_repr_or_an_error(caplog, case):
    _, conf, good, bad, secrets = case
    with NatsServer(config_text=LEAK_CONF[conf]) as server:
        _exercise(server, caplog, good(server), bad, secrets)


@pytest.mark.timeout(60)
def test_no_nkey_seed_appears_in_a_log_line_a_repr_or_an_error(caplog, user_nkey):
    conf = f"authorization {{ users = [ {{ nkey: {user_nkey.public_key.decode()} }} ] }}\n"
    stranger = new_keypair(nkeys.PREFIX_BYTE_USER).seed.decode()
    seed = user_nkey.seed.decode()
    with NatsServer(config_text=conf) as server:
        _exercise(server, caplog, {"nkeys_seed_str": seed}, {"nkeys_seed_str": stranger}, [seed, stranger])


@pytest.mark.timeout(60)
def test_no_jwt_or_seed_of_a_creds_file_appears_in_a_log_line_a_repr_or_an_error(caplog, operator, tmp_path):
    good, bad = tmp_path / "good.creds", tmp_path / "bad.creds"
    jwt, seed = operator.user_creds(good)
    bad_jwt, bad_seed = operator.user_creds(bad, signer=new_keypair(nkeys.PREFIX_BYTE_ACCOUNT))
    with NatsServer(config_text=operator.config()) as server:
        _exercise(server, caplog, {"user_credentials": str(good)}, {"user_credentials": str(bad)},
                  [jwt, seed, bad_jwt, bad_seed])
