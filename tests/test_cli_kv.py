# Charter: `jetstream-sync kv` (docs/cli.md, "Key-value buckets") through the real console script against
# the shared server: buckets made with the flags given and shared with the library, every key command in
# human and --json form, -f refused without a terminal, errors naming the bucket or key with their exit
# codes, and `kv watch` printing the current values, then live changes, until Ctrl-C ends it within a second.
from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
import threading
import time

import pexpect
import pytest

import jetstream_sync as jss

from conftest import wait_for
from test_cli import CLI, ERROR, as_json, cli, cli_env, fails, ok

pytestmark = pytest.mark.timeout(90)

NS = 1_000_000_000


@pytest.fixture
def config(js):
    """The bucket CONFIG (history 5) with db.url at revisions 1 and 3 and app.name at revision 2."""
    kv = js.create_key_value("CONFIG", history=5, storage="memory")
    kv.put("db.url", "postgres://one")
    kv.put("app.name", "shop")
    kv.put("db.url", "postgres://two")
    return kv


# --- buckets ------------------------------------------------------------------------------------------


def test_help_lists_the_kv_command_and_its_subcommands():
    assert re.search(r"^\s+kv\s", ok(cli("--help")), re.M)
    sub = ok(cli("kv", "--help"))
    for command in ("add", "info", "ls", "del", "put", "get", "create", "update", "purge", "history", "keys",
                    "watch", "revert", "compact"):
        assert re.search(rf"^\s+{command}\b", sub, re.M), command


@pytest.mark.parametrize("argv", [["kv", "--help"], ["kv", "watch", "--help"], ["kv", "add", "--help"]])
def test_kv_help_loads_no_client(argv):
    probe = ("import contextlib, io, sys\nfrom jetstream_sync.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    assert main({argv!r}) == 0\n"
             "print(' '.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=cli_env())
    assert proc.returncode == 0, proc.stderr
    assert not set(proc.stdout.split()) & {"nats", "asyncio", "attrs", "tqdm", "jetstream_sync.client",
                                           "jetstream_sync.kv"}


def test_add_makes_the_bucket_with_every_flag_given_and_info_shows_it(js, nats_server):
    doc = as_json(cli("kv", "add", "CLI_KV_ADD", "--history", "10", "--ttl", "1h", "--max-value-size", "1KiB",
                      "--max-bucket-size", "1MiB", "--storage", "memory", "--compress", "--description", "settings",
                      "--limit-marker-ttl", "5s", "--json", server=nats_server))
    assert (doc["bucket"], doc["history"], doc["ttl"], doc["limit_marker_ttl"]) == ("CLI_KV_ADD", 10, 3600.0, 5.0)
    assert (doc["values"], doc["is_compressed"], doc["backing_store"]) == (0, True, "JetStream")
    assert doc["stream_info"]["config"]["name"] == "KV_CLI_KV_ADD"
    cfg = js.stream_info("KV_CLI_KV_ADD").config  # what the server really has: a bucket as nats.go makes it
    assert cfg.subjects == ["$KV.CLI_KV_ADD.>"]
    assert (cfg.max_msgs_per_subject, cfg.max_age, cfg.max_msg_size, cfg.max_bytes) == (10, 3600.0, 1024, 1024**2)
    assert (str(cfg.storage), str(cfg.compression), cfg.description) == ("memory", "s2", "settings")
    assert (cfg.allow_msg_ttl, cfg.subject_delete_marker_ttl) == (True, 5.0)
    assert (cfg.allow_rollup_hdrs, cfg.deny_delete, cfg.allow_direct, str(cfg.discard)) == (True, True, True, "new")
    js.key_value("CLI_KV_ADD").put("k", "v")  # the library reads it as a bucket

    human = ok(cli("kv", "info", "CLI_KV_ADD", server=nats_server))
    assert "Key-value bucket: CLI_KV_ADD" in human
    for line in ("History kept:     10", "Max age (TTL):    1h0m0s", "Limit marker TTL: 5s", "Max value size:   1 KiB",
                 "Compressed:       true", "Backing store:    JetStream stream KV_CLI_KV_ADD", "Values stored: 1"):
        assert line in human, line
    assert as_json(cli("kv", "status", "CLI_KV_ADD", "--json", server=nats_server))["values"] == 1

    # The same config again succeeds; another one fails, naming the bucket.
    assert ok(cli("kv", "add", "CLI_KV_ADD", "--history", "10", "--ttl", "1h", "--max-value-size", "1KiB",
                  "--max-bucket-size", "1MiB", "--storage", "memory", "--compress", "--description", "settings",
                  "--limit-marker-ttl", "5s", server=nats_server)).startswith("created key-value bucket CLI_KV_ADD\n")
    fails(cli("kv", "add", "CLI_KV_ADD", "--history", "2", server=nats_server), 1,
          "key-value bucket 'CLI_KV_ADD' exists with another configuration")


@pytest.mark.parametrize("args, match", [
    (["kv", "add", "bad.name"], "argument BUCKET: bucket 'bad.name' is not a valid bucket name"),
    (["kv", "add", "B", "--history", "65"], "argument --history: .*1 to 64"),
    (["kv", "add", "B", "--ttl", "5x"], "argument --ttl: invalid duration '5x'"),
    (["kv", "get", "B", "a..b"], "argument KEY: key 'a..b' is not a valid key"),
    (["kv", "put", "B", ".lead", "v"], "argument KEY: key '.lead' is not a valid key"),
    (["kv", "watch", "B", "a.>.b"], "argument KEY: key filter 'a.>.b' is not a valid key filter"),
    (["kv", "keys", "B", "a b"], "argument FILTER: key filter 'a b' is not a valid key"),
    (["kv", "watch", "B", "--history", "--updates-only"], "not allowed with argument --history"),
    (["kv", "update", "B", "k", "v"], "--last"),
    (["kv", "get", "B", "k", "--raw", "--json"], "--raw and --json are exclusive"),
])
def test_bad_names_keys_and_flags_are_refused_before_connecting(args, match):
    # No server at all: the error must come from the argument, not from connecting.
    line = fails(cli(*args, env=cli_env("nats://127.0.0.1:1")), 2, match)
    assert "connect" not in line


def test_ls_lists_buckets_as_a_table_names_and_json_and_a_bucket_s_keys(js, nats_server, config):
    js.create_key_value("CLI_KV_EMPTY", storage="memory", description="nothing yet")
    table = ok(cli("kv", "ls", server=nats_server)).splitlines()
    assert table[0].split() == ["BUCKET", "DESCRIPTION", "HISTORY", "TTL", "VALUES", "SIZE", "LAST", "UPDATE"]
    row = next(line.split() for line in table if line.startswith("CONFIG"))
    assert row[:5] == ["CONFIG", "-", "5", "-", "3"]
    assert as_json(cli("kv", "ls", "--names", "--json", server=nats_server)) == ["CLI_KV_EMPTY", "CONFIG"]
    assert ok(cli("kv", "ls", "-n", server=nats_server)) == "CLI_KV_EMPTY\nCONFIG\n"
    docs = as_json(cli("kv", "ls", "--json", server=nats_server))
    assert [(d["bucket"], d["values"]) for d in docs] == [("CLI_KV_EMPTY", 0), ("CONFIG", 3)]
    # With a bucket: its keys (each once, sorted).
    assert ok(cli("kv", "ls", "CONFIG", server=nats_server)) == "app.name\ndb.url\n"
    assert as_json(cli("kv", "ls", "CONFIG", "--json", server=nats_server)) == ["app.name", "db.url"]
    assert ok(cli("kv", "ls", "CLI_KV_EMPTY", server=nats_server)) == "no keys in bucket CLI_KV_EMPTY\n"


def test_rm_refuses_without_a_terminal_deletes_with_f_and_a_missing_bucket_exits_3(js, nats_server, config):
    fails(cli("kv", "rm", "CONFIG", server=nats_server), 2,
          "kv rm: delete key-value bucket CONFIG needs confirming and there is no terminal to ask on: give -f")
    assert "CONFIG" in list(js.key_value_names())
    assert as_json(cli("kv", "rm", "CONFIG", "-f", "--json", server=nats_server)) == {"bucket": "CONFIG",
                                                                                      "deleted": True}
    assert "CONFIG" not in list(js.key_value_names())
    fails(cli("kv", "del", "CONFIG", "-f", server=nats_server), 3, "key-value bucket 'CONFIG' not found")


@pytest.mark.parametrize("command", [["info", "NOPE"], ["ls", "NOPE"], ["get", "NOPE", "k"],
                                     ["put", "NOPE", "k", "v"], ["history", "NOPE", "k"], ["keys", "NOPE"],
                                     ["watch", "NOPE"], ["del", "NOPE", "k", "-f"]])
def test_a_missing_bucket_exits_3_naming_it(nats_server, command):
    fails(cli("kv", *command, server=nats_server), 3, "^jetstream-sync: error: key-value bucket 'NOPE' not found$")


# --- keys -------------------------------------------------------------------------------------------


def test_put_stores_the_value_given_or_stdin_and_get_prints_it_as_text_json_or_raw(js, nats_server, config):
    assert ok(cli("kv", "put", "CONFIG", "greeting", "héllo", server=nats_server)) == \
        "stored key greeting of bucket CONFIG: revision 4\n"
    assert as_json(cli("kv", "put", "CONFIG", "blob", "--json", server=nats_server, input="from stdin\n")) == \
        {"bucket": "CONFIG", "key": "blob", "revision": 5}
    assert config.get("blob").value == b"from stdin\n"
    binary = subprocess.run([str(CLI), "kv", "put", "CONFIG", "bin"], input=b"\xff\x00\x01", capture_output=True,
                            env=cli_env(nats_server), timeout=30)
    assert binary.returncode == 0, binary.stderr
    assert config.get("bin").value == b"\xff\x00\x01"

    human = ok(cli("kv", "get", "CONFIG", "greeting", server=nats_server))
    assert human.startswith("[CONFIG #4] greeting  ") and "\nhéllo\n" in human
    doc = as_json(cli("kv", "get", "CONFIG", "greeting", "--json", server=nats_server))
    assert doc.pop("created").endswith("Z")
    assert doc == {"bucket": "CONFIG", "key": "greeting", "revision": 4, "operation": "PUT", "size": 6,
                   "value": "héllo", "value_encoding": "utf-8"}
    doc = as_json(cli("kv", "get", "CONFIG", "bin", "--json", server=nats_server))
    assert doc["value_encoding"] == "base64" and base64.b64decode(doc["value"]) == b"\xff\x00\x01"
    raw = subprocess.run([str(CLI), "kv", "get", "CONFIG", "bin", "--raw"], capture_output=True,
                         env=cli_env(nats_server), timeout=30)
    assert (raw.returncode, raw.stdout, raw.stderr) == (0, b"\xff\x00\x01", b"")
    # An earlier revision, and a revision that is another key's.
    assert as_json(cli("kv", "get", "CONFIG", "db.url", "--revision", "1", "--json", server=nats_server))["value"] == \
        "postgres://one"
    fails(cli("kv", "get", "CONFIG", "db.url", "--revision", "2", server=nats_server), 3,
          "key 'db.url' not found in bucket 'CONFIG' at revision 2")
    fails(cli("kv", "get", "CONFIG", "nothing", server=nats_server), 3, "key 'nothing' not found in bucket 'CONFIG'")


def test_create_stores_only_a_new_or_deleted_key_and_a_taken_one_exits_1_naming_it(js, nats_server, config):
    assert as_json(cli("kv", "create", "CONFIG", "lock", "me", "--json", server=nats_server))["revision"] == 4
    fails(cli("kv", "create", "CONFIG", "lock", "you", server=nats_server), 1,
          "key 'lock' already exists in bucket 'CONFIG'")
    assert config.get("lock").value == b"me"
    config.delete("lock")
    assert ok(cli("kv", "create", "CONFIG", "lock", "you", server=nats_server)) == \
        "created key lock of bucket CONFIG: revision 6\n"


def test_create_and_purge_with_a_ttl_set_the_per_key_ttl(js, nats_server):
    kv = js.create_key_value("CLI_KV_TTL", storage="memory", limit_marker_ttl=60)
    rev = as_json(cli("kv", "create", "CLI_KV_TTL", "lease", "holder-1", "--ttl", "1m", "--json",
                      server=nats_server))["revision"]
    assert js.stream("KV_CLI_KV_TTL").get_msg(rev).headers["Nats-TTL"] == "60"
    kv.put("gone", "x")
    rev = as_json(cli("kv", "purge", "CLI_KV_TTL", "gone", "-f", "--ttl", "2m", "--json",
                      server=nats_server))["revision"]
    headers = js.stream("KV_CLI_KV_TTL").get_msg(rev).headers
    assert (headers["KV-Operation"], headers["Nats-Rollup"], headers["Nats-TTL"]) == ("PURGE", "sub", "120")
    fails(cli("kv", "create", "CLI_KV_TTL", "short", "x", "--ttl", "500ms", server=nats_server), 2,
          "ttl must be at least 1 second")


def test_update_stores_at_the_revision_given_and_another_one_exits_1_naming_the_key(js, nats_server, config):
    assert ok(cli("kv", "update", "CONFIG", "db.url", "postgres://three", "--last", "3", server=nats_server)) == \
        "updated key db.url of bucket CONFIG: revision 4\n"
    fails(cli("kv", "update", "CONFIG", "db.url", "postgres://four", "--last", "3", server=nats_server), 1,
          "key 'db.url' of bucket 'CONFIG' is not at the revision given")
    assert config.get("db.url").value == b"postgres://three"


def test_del_and_purge_refuse_without_a_terminal_and_with_f_leave_markers(js, nats_server, config):
    fails(cli("kv", "del", "CONFIG", "db.url", server=nats_server), 2,
          "delete key db.url of bucket CONFIG needs confirming.*give -f")
    fails(cli("kv", "purge", "CONFIG", "app.name", server=nats_server), 2,
          "purge key app.name of bucket CONFIG needs confirming.*give -f")
    assert [e.revision for e in config.history("db.url")] == [1, 3]
    assert config.get("app.name").value == b"shop"

    assert ok(cli("kv", "del", "CONFIG", "db.url", "-f", server=nats_server)) == \
        "deleted key db.url of bucket CONFIG: delete marker at revision 4\n"
    assert as_json(cli("kv", "purge", "CONFIG", "app.name", "--force", "--json", server=nats_server)) == \
        {"bucket": "CONFIG", "key": "app.name", "revision": 5, "operation": "PURGE"}
    fails(cli("kv", "get", "CONFIG", "db.url", server=nats_server), 3, "key 'db.url' of bucket 'CONFIG' was deleted")
    assert [(e.revision, str(e.operation)) for e in config.history("db.url")] == [(1, "PUT"), (3, "PUT"), (4, "DEL")]
    assert [(e.revision, str(e.operation)) for e in config.history("app.name")] == [(5, "PURGE")]
    assert ok(cli("kv", "keys", "CONFIG", server=nats_server)) == ""


def test_history_lists_every_revision_kept_with_markers(js, nats_server, config):
    config.delete("db.url")
    table = ok(cli("kv", "history", "CONFIG", "db.url", server=nats_server)).splitlines()
    assert table[0].split() == ["KEY", "REVISION", "OP", "CREATED", "LENGTH", "VALUE"]
    assert [line.split()[:3] for line in table[1:]] == [["db.url", "1", "PUT"], ["db.url", "3", "PUT"],
                                                        ["db.url", "4", "DEL"]]
    assert table[1].split()[-1] == "postgres://one"
    docs = as_json(cli("kv", "history", "CONFIG", "db.url", "--json", server=nats_server))
    assert [(d["revision"], d["operation"], d["value"]) for d in docs] == [
        (1, "PUT", "postgres://one"), (3, "PUT", "postgres://two"), (4, "DEL", "")]
    fails(cli("kv", "history", "CONFIG", "never", server=nats_server), 3, "key 'never' not found in bucket 'CONFIG'")


def test_keys_are_filtered_by_the_server_and_an_empty_bucket_has_none(js, nats_server, config):
    config.put("db.pool.size", "10")
    assert ok(cli("kv", "keys", "CONFIG", server=nats_server)) == "app.name\ndb.pool.size\ndb.url\n"
    assert as_json(cli("kv", "keys", "CONFIG", "db.*", "--json", server=nats_server)) == ["db.url"]
    assert as_json(cli("kv", "keys", "CONFIG", "db.>", "app.name", "--json", server=nats_server)) == [
        "app.name", "db.pool.size", "db.url"]
    js.create_key_value("CLI_KV_NONE", storage="memory")
    assert ok(cli("kv", "keys", "CLI_KV_NONE", server=nats_server)) == ""
    assert as_json(cli("kv", "keys", "CLI_KV_NONE", "--json", server=nats_server)) == []


def test_revert_stores_an_earlier_value_again_and_needs_f_without_a_terminal(js, nats_server, config):
    fails(cli("kv", "revert", "CONFIG", "db.url", "1", server=nats_server), 2, "needs confirming.*give -f")
    assert config.get("db.url").revision == 3
    assert as_json(cli("kv", "revert", "CONFIG", "db.url", "1", "-f", "--json", server=nats_server)) == \
        {"bucket": "CONFIG", "key": "db.url", "revision": 4, "reverted_to": 1}
    entry = config.get("db.url")
    assert (entry.revision, entry.value) == (4, b"postgres://one")
    fails(cli("kv", "revert", "CONFIG", "db.url", "2", "-f", server=nats_server), 3, "at revision 2")


def test_compact_removes_the_history_of_deleted_keys(js, nats_server, config):
    config.delete("db.url")
    fails(cli("kv", "compact", "CONFIG", server=nats_server), 2, "needs confirming.*give -f")
    # The marker is younger than the default 30 minutes: it stays, and only it.
    assert ok(cli("kv", "compact", "CONFIG", "-f", server=nats_server)) == "compacted 1 deleted key of bucket CONFIG\n"
    assert [e.revision for e in config.history("db.url")] == [4]
    assert as_json(cli("kv", "compact", "CONFIG", "-f", "--older-than", "0", "--json", server=nats_server)) == \
        {"bucket": "CONFIG", "keys_compacted": 1}
    with pytest.raises(jss.KeyNotFoundError):
        config.history("db.url")
    assert config.get("app.name").value == b"shop"


def on_a_terminal(args: list[str], server, answers: list[tuple[str, str]]) -> tuple[int, str]:
    """Run the console script on a pseudo-terminal, answering each question (a regex) as given; return
    its exit code and everything the terminal showed."""
    term = pexpect.spawn(str(CLI), args, env=cli_env(server), encoding="utf-8", timeout=30)
    try:
        for question, answer in answers:
            term.expect(question)
            term.sendline(answer)
        term.expect(pexpect.EOF)
        shown = term.before
    finally:
        term.close(force=True)
    return term.exitstatus, shown


def test_on_a_terminal_del_and_revert_ask_first_and_put_wants_a_value(js, nats_server, config):
    code, shown = on_a_terminal(["kv", "del", "CONFIG", "db.url"], nats_server,
                                [(r"Really delete key db.url of bucket CONFIG\? \[y/N\]", "n")])
    assert code == 0 and "key db.url not deleted" in shown
    assert config.get("db.url").revision == 3
    code, shown = on_a_terminal(["kv", "revert", "CONFIG", "db.url", "1"], nats_server,
                                [(r"Value at revision 1: postgres://one[\s\S]*Really revert key db.url of bucket "
                                  r"CONFIG to revision 1\?", "y")])
    assert code == 0 and "reverted key db.url of bucket CONFIG to revision 1: revision 4" in shown
    code, shown = on_a_terminal(["kv", "del", "CONFIG", "db.url"], nats_server, [(r"Really delete key db.url", "yes")])
    assert code == 0 and "deleted key db.url of bucket CONFIG" in shown
    assert [str(e.operation) for e in config.history("db.url")][-1] == "DEL"
    # Without VALUE, put reads stdin; a terminal is not read until its end, it is refused.
    code, shown = on_a_terminal(["kv", "put", "CONFIG", "app.name"], nats_server, [])
    assert code == 2 and "kv put: give VALUE, or pipe the value on stdin" in shown
    assert config.get("app.name").value == b"shop"


# --- watch ------------------------------------------------------------------------------------------


class Watching:
    """The console script running ``args``, its stdout read line by line on a thread of the test."""

    def __init__(self, args: list[str], server) -> None:
        self.proc = subprocess.Popen([str(CLI), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=cli_env(server))
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, name="test-kv-watch-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_lines(self, n: int, what: str) -> list[str]:
        wait_for(lambda: len(self.lines) >= n or self.proc.poll() is not None, timeout=15, what=what)
        assert len(self.lines) >= n, f"exit {self.proc.returncode}: {self.proc.stderr.read()}"
        return self.lines[:n]

    def interrupt(self) -> tuple[float, str]:
        """SIGINT (Ctrl-C); return how long it took to end and its stderr."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=10)
        took = time.monotonic() - started
        self._reader.join(10)
        return took, self.proc.stderr.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()
        self._reader.join(10)


def test_watch_prints_the_current_values_then_each_change_and_ctrl_c_ends_it_within_a_second(js, nats_server,
                                                                                              config):
    watching = Watching(["kv", "watch", "CONFIG"], nats_server)
    try:
        first = watching.wait_lines(2, "the current values")
        assert [re.sub(r"^\[\S+Z\] ", "", line) for line in first] == [
            "PUT CONFIG > app.name #2: shop", "PUT CONFIG > db.url #3: postgres://two"]
        config.put("db.url", "postgres://live")
        config.delete("app.name")
        live = watching.wait_lines(4, "the live changes")[2:]
        assert [re.sub(r"^\[\S+Z\] ", "", line) for line in live] == [
            "PUT CONFIG > db.url #4: postgres://live", "DEL CONFIG > app.name #5"]
        took, stderr = watching.interrupt()
    finally:
        watching.close()
    assert watching.proc.returncode == 130 and took < 1.5, took
    assert stderr.splitlines() == [f"{ERROR}interrupted"]
    assert len(watching.lines) == 4
    # Its consumer is gone from the server: nothing is left behind.
    wait_for(lambda: not list(js.consumer_names("KV_CONFIG")), timeout=5, what="the watcher's consumer deleted")


def test_watch_json_gives_one_object_per_line_with_the_filters_and_flags_given(js, nats_server, config):
    watching = Watching(["kv", "watch", "CONFIG", "db.*", "--history", "--json"], nats_server)
    try:
        docs = [json.loads(line) for line in watching.wait_lines(2, "the history of db.url")]
        assert [(d["key"], d["revision"], d["operation"], d["value"]) for d in docs] == [
            ("db.url", 1, "PUT", "postgres://one"), ("db.url", 3, "PUT", "postgres://two")]
        assert docs[0]["bucket"] == "CONFIG" and docs[0]["created"].endswith("Z")
        config.put("app.name", "not watched")
        config.purge("db.url")
        doc = json.loads(watching.wait_lines(3, "the purge")[2])
        assert (doc["key"], doc["revision"], doc["operation"]) == ("db.url", 5, "PURGE")
        took, stderr = watching.interrupt()
    finally:
        watching.close()
    assert watching.proc.returncode == 130 and took < 1.5
    assert len(watching.lines) == 3


def test_watch_updates_only_ignore_deletes_and_count(js, nats_server, config):
    proc = subprocess.Popen([str(CLI), "kv", "watch", "CONFIG", "--updates-only", "--ignore-deletes", "--count", "1",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(nats_server))
    try:
        # The watcher is up once its consumer exists; then a delete (left out) and a put (the one entry).
        wait_for(lambda: list(js.consumer_names("KV_CONFIG")), timeout=15, what="the watcher's consumer")
        config.delete("app.name")
        config.put("db.url", "postgres://new")
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, err) == (0, "")
    docs = [json.loads(line) for line in out.splitlines()]
    assert [(d["key"], d["revision"], d["operation"]) for d in docs] == [("db.url", 5, "PUT")]
