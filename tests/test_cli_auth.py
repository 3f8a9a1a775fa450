# Charter: the CLI's credential flags (--token, --nkey, --creds, --tlsca/--tlscert/--tlskey) against real
# servers that require them, through the real console script: the right credential works (exit 0),
# a wrong one exits 4 with one line that never echoes the secret. Servers and keys come from
# tests/test_security.py.
from __future__ import annotations

import nkeys
import pytest

from jetstream_sync.server import NatsServer
from test_cli import as_json, cli, fails
from test_security import TOKEN, Pki, jwt_server, new_keypair, nkey_server, operator, token_server, user_nkey

pytestmark = [pytest.mark.security, pytest.mark.timeout(60)]

__all__ = ["jwt_server", "nkey_server", "operator", "token_server", "user_nkey"]  # fixtures used below


def test_token_flag_connects_and_a_wrong_token_exits_4_without_echoing_it(token_server):
    assert as_json(cli("--token", TOKEN, "account", "info", "--json", server=token_server))["streams"] == 0
    line = fails(cli("--token", "tok-wrong-123", "account", "info", server=token_server), 4,
                 "(?i)authorization violation")
    assert "tok-wrong-123" not in line


def test_nkey_flag_reads_a_seed_file_and_an_unknown_key_exits_4(nkey_server, user_nkey, tmp_path):
    seed = tmp_path / "user.nk"
    seed.write_text(user_nkey.seed.decode())
    assert as_json(cli("--nkey", str(seed), "account", "info", "--json", server=nkey_server))["streams"] == 0
    stranger = tmp_path / "stranger.nk"
    stranger.write_text(new_keypair(nkeys.PREFIX_BYTE_USER).seed.decode())
    line = fails(cli("--nkey", str(stranger), "account", "info", server=nkey_server), 4,
                 "(?i)authorization violation")
    assert "SU" not in line.split("error:", 1)[1]      # no seed in the message


def test_creds_flag_connects_to_a_jwt_account_and_can_manage_streams(jwt_server, operator, tmp_path):
    creds = tmp_path / "app.creds"
    operator.user_creds(creds)
    doc = as_json(cli("--creds", str(creds), "stream", "add", "JWTCLI", "--subjects", "jwtcli.>", "--json",
                      server=jwt_server))
    assert doc["config"]["name"] == "JWTCLI"
    assert "JWTCLI" in cli("--creds", str(creds), "stream", "ls", "--names", server=jwt_server).stdout


def test_mutual_tls_flags_connect_and_a_missing_client_certificate_exits_4(tmp_path):
    pki = Pki(tmp_path)
    with NatsServer(config_text=pki.server_config(verify_clients=True)) as server:
        tls = ["--tlsca", pki.ca, "--tlscert", pki.client_cert, "--tlskey", pki.client_key]
        assert as_json(cli(*tls, "account", "info", "--json", server=server))["streams"] == 0
        fails(cli("--tlsca", pki.ca, "account", "info", server=server), 4, "(?i)certificate|handshake|closed")
