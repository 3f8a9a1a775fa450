# Charter: `jetstream-sync object add|info|ls|rm|seal|put|get` through the real console script against the
# shared server: stores and objects made as the library reads them, human and --json output, the exact
# bytes of a put and get through files, stdin and stdout, nothing replaced without -f (an object or a
# local file), errors naming the store or object (exit 3), the progress bar, Ctrl-C during a put.
from __future__ import annotations

import base64
import hashlib
import math
import os
import subprocess
import sys

import attrs
import pexpect
import pytest

import jetstream_sync as jss
from jetstream_sync.object_meta import meta_subject

from test_cli import CLI, as_json, cli, cli_env, fails, interrupted, ok, unused_url

pytestmark = pytest.mark.timeout(90)

NS = 1_000_000_000
MiB = 1024 * 1024
CHUNK = 128 * 1024

STATUS_KEYS = {"bucket", "description", "ttl", "storage", "replicas", "sealed", "size", "is_compressed", "metadata",
               "backing_store", "stream_info"}


def run(*args: str, server, cwd=None, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """The console script with binary stdin and stdout (``cli`` speaks text), in ``cwd``."""
    return subprocess.run([str(CLI), *args], input=stdin, capture_output=True, timeout=60, cwd=cwd,
                          env=cli_env(server))


def text(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """A ``run`` result as ``ok``/``fails``/``as_json`` take it."""
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode())


def digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


# --- stores -----------------------------------------------------------------------------------------------


def test_add_makes_the_store_the_flags_say_and_info_and_ls_show_it(js, nats_server):
    doc = as_json(cli("object", "add", "CLI_OBJ_ADD", "--ttl", "1h", "--max-bucket-size", "64MiB", "--storage",
                      "memory", "--compress", "--description", "model files", "--metadata", "team=ml", "--json",
                      server=nats_server))
    assert set(doc) == STATUS_KEYS
    assert (doc["bucket"], doc["description"], doc["ttl"], doc["storage"]) == \
        ("CLI_OBJ_ADD", "model files", 3600 * NS, "memory")
    assert (doc["replicas"], doc["sealed"], doc["size"], doc["is_compressed"]) == (1, False, 0, True)
    assert doc["metadata"]["team"] == "ml" and doc["stream_info"]["config"]["name"] == "OBJ_CLI_OBJ_ADD"
    status = js.object_store("CLI_OBJ_ADD").status()  # what the server really has
    assert (status.ttl, status.storage, status.is_compressed) == (3600.0, jss.StorageType.MEMORY, True)
    assert status.stream_info.config.max_bytes == 64 * MiB
    # The same settings again succeed; others are refused (exit 1).
    ok(cli("object", "add", "CLI_OBJ_ADD", "--ttl", "1h", "--max-bucket-size", "64MiB", "--storage", "memory",
           "--compress", "--description", "model files", "--metadata", "team=ml", server=nats_server))
    fails(cli("object", "add", "CLI_OBJ_ADD", "--storage", "memory", server=nats_server), 1,
          "object store 'CLI_OBJ_ADD' exists with another configuration")

    human = ok(cli("object", "add", "CLI_OBJ_ADD2", "--storage", "memory", server=nats_server))
    assert human.startswith("created object store CLI_OBJ_ADD2\n")
    assert "TTL:        unlimited" in human and "Max size:   unlimited" in human

    shown = ok(cli("object", "info", "CLI_OBJ_ADD", server=nats_server))
    for line in ("Object store: CLI_OBJ_ADD", "Description:  model files", "Stream:     OBJ_CLI_OBJ_ADD",
                 "Storage:    memory", "TTL:        1h0m0s", "Max size:   64 MiB", "Compressed: true",
                 "Sealed:     false", "Metadata:   team=ml", "Size: 0 B"):
        assert line in shown, line
    assert as_json(cli("object", "info", "CLI_OBJ_ADD", "--json", server=nats_server))["ttl"] == 3600 * NS

    js.create_stream(name="CLI_NOT_A_STORE", subjects=["cli.not.a.store"], storage="memory")
    table = ok(cli("object", "ls", server=nats_server)).splitlines()
    assert table[0].split() == ["STORE", "DESCRIPTION", "STORAGE", "REPLICAS", "SIZE", "TTL", "SEALED"]
    assert [row.split() for row in table[1:]] == [
        ["CLI_OBJ_ADD", "model", "files", "memory", "1", "0", "B", "1h0m0s", "false"],
        ["CLI_OBJ_ADD2", "-", "memory", "1", "0", "B", "unlimited", "false"]]
    assert as_json(cli("object", "ls", "--names", "--json", server=nats_server)) == ["CLI_OBJ_ADD", "CLI_OBJ_ADD2"]
    assert ok(cli("obj", "ls", "-n", server=nats_server)) == "CLI_OBJ_ADD\nCLI_OBJ_ADD2\n"
    docs = as_json(cli("object", "ls", "--json", server=nats_server))
    assert [d["bucket"] for d in docs] == ["CLI_OBJ_ADD", "CLI_OBJ_ADD2"] and set(docs[0]) == STATUS_KEYS


def test_a_bad_store_name_or_value_is_refused_before_connecting():
    # Nothing listens at the URL: connecting would be exit 4.
    nowhere = unused_url()
    fails(cli("object", "add", "bad name", server=nowhere), 2,
          "object add: invalid object store name 'bad name': use letters, digits")
    fails(cli("object", "info", "a.b", server=nowhere), 2, "invalid object store name 'a.b'")
    fails(cli("object", "add", "OK", "--ttl", "soon", server=nowhere), 2, "argument --ttl: invalid duration")
    fails(cli("object", "add", "OK", "--max-bucket-size", "0", server=nowhere), 2, "--max-bucket-size: must be above 0")
    fails(cli("object", "put", "OK", "/no/such/file", server=nowhere), 2, "argument FILE: no such file")
    fails(cli("object", "put", "OK", "-", server=nowhere), 2, r"give --name NAME for data read from stdin")
    fails(cli("object", "get", "OK", "x", "--output", "-", "--json", server=nowhere), 2,
          "--json and --output - both write to stdout")
    fails(cli("object", "get", "OK", "x", "--output", "", server=nowhere), 2, "--output must not be empty")


def test_rm_and_seal_of_a_store_need_f_without_a_terminal(js, nats_server):
    js.create_object_store("CLI_OBJ_RM", storage="memory").put("kept", b"data")
    fails(cli("object", "rm", "CLI_OBJ_RM", server=nats_server), 2,
          "object rm: delete object store CLI_OBJ_RM and every object in it needs confirming.*give -f")
    fails(cli("object", "seal", "CLI_OBJ_RM", server=nats_server), 2, "object seal: seal object store .*give -f")
    assert not js.object_store("CLI_OBJ_RM").status().sealed  # neither went ahead

    sealed = as_json(cli("object", "seal", "CLI_OBJ_RM", "-f", "--json", server=nats_server))
    assert sealed["sealed"] is True and js.object_store("CLI_OBJ_RM").status().sealed
    assert "Sealed:     true" in ok(cli("object", "info", "CLI_OBJ_RM", server=nats_server))
    fails(text(run("object", "put", "CLI_OBJ_RM", "-", "--name", "late", "-f", server=nats_server, stdin=b"x")), 1,
          "object store 'CLI_OBJ_RM' is sealed: nothing can be put")
    fails(cli("object", "rm", "CLI_OBJ_RM", "kept", "-f", server=nats_server), 1, "object store 'CLI_OBJ_RM' is sealed")
    assert js.object_store("CLI_OBJ_RM").get_bytes("kept") == b"data"

    assert as_json(cli("object", "rm", "CLI_OBJ_RM", "-f", "--json", server=nats_server)) == \
        {"bucket": "CLI_OBJ_RM", "deleted": True}
    with pytest.raises(jss.BucketNotFoundError):
        js.object_store("CLI_OBJ_RM")
    fails(cli("object", "rm", "CLI_OBJ_RM", "-f", server=nats_server), 3, "object store 'CLI_OBJ_RM' not found")


# --- objects ----------------------------------------------------------------------------------------------


def test_put_and_get_round_trip_the_exact_bytes_through_files_stdin_and_stdout(js, nats_server, tmp_path):
    store = js.create_object_store("CLI_OBJ_RT", storage="memory")
    data = os.urandom(3 * MiB + 22)
    source = tmp_path / "weights.bin"
    source.write_bytes(data)

    info = as_json(cli("object", "put", "CLI_OBJ_RT", str(source), "--description", "v1", "-H", "Content-Type:x/y",
                       "--metadata", "epoch=3", "--json", server=nats_server))
    assert (info["name"], info["bucket"], info["size"]) == ("weights.bin", "CLI_OBJ_RT", len(data))
    assert info["chunks"] == math.ceil(len(data) / CHUNK) == 25
    assert info["digest"] == digest(data) and info["description"] == "v1"
    assert info["headers"] == {"Content-Type": ["x/y"]} and info["metadata"] == {"epoch": "3"}
    assert store.get_bytes("weights.bin") == data  # the library reads what the command line stored

    # get: by default a file named after the object, in the current directory.
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    got = text(run("object", "get", "CLI_OBJ_RT", "weights.bin", server=nats_server, cwd=out_dir))
    assert ok(got) == "wrote object weights.bin (3 MiB) to weights.bin\n"
    assert (out_dir / "weights.bin").read_bytes() == data
    # --output - writes the bytes, and nothing else, to stdout.
    raw = run("object", "get", "CLI_OBJ_RT", "weights.bin", "--output", "-", server=nats_server)
    assert (raw.returncode, raw.stderr) == (0, b"")
    assert raw.stdout == data

    # put from stdin (FILE '-', --name required), then get it back through stdout.
    piped = as_json(text(run("object", "put", "CLI_OBJ_RT", "-", "--name", "models/v2/weights.bin", "--json",
                             server=nats_server, stdin=data[::-1])))
    assert (piped["size"], piped["digest"], piped["chunks"]) == (len(data), digest(data[::-1]), 25)
    assert run("object", "get", "CLI_OBJ_RT", "models/v2/weights.bin", "-O", "-", server=nats_server).stdout == \
        data[::-1]
    # A name with slashes is written under its base name; --output DIR writes into that directory.
    (out_dir / "sub").mkdir()
    doc = as_json(text(run("object", "get", "CLI_OBJ_RT", "models/v2/weights.bin", "-O", "sub", "--json",
                           server=nats_server, cwd=out_dir)))
    assert doc["path"] == os.path.join("sub", "weights.bin") and doc["digest"] == digest(data[::-1])
    assert (out_dir / "sub" / "weights.bin").read_bytes() == data[::-1]
    # An object put by the library comes out the same way; an empty object is an empty file.
    store.put("empty", b"")
    assert run("object", "get", "CLI_OBJ_RT", "empty", "-O", "-", server=nats_server).stdout == b""
    assert sorted(p.name for p in out_dir.iterdir()) == ["sub", "weights.bin"]  # no partial files left


def test_put_replaces_an_object_and_get_a_file_only_with_f(js, nats_server, tmp_path):
    store = js.create_object_store("CLI_OBJ_F", storage="memory")
    store.put("report.txt", b"first")
    new = tmp_path / "report.txt"
    new.write_bytes(b"second")
    fails(cli("object", "put", "CLI_OBJ_F", str(new), server=nats_server), 2,
          "object put: replace object report.txt of object store CLI_OBJ_F needs confirming.*give -f")
    fails(text(run("object", "put", "CLI_OBJ_F", "-", "--name", "report.txt", server=nats_server, stdin=b"x")), 2,
          "give -f")
    assert store.get_bytes("report.txt") == b"first"
    assert ok(cli("object", "put", "CLI_OBJ_F", str(new), "-f", server=nats_server)).startswith(
        "stored object report.txt in object store CLI_OBJ_F\n")
    assert store.get_bytes("report.txt") == b"second"
    store.delete("report.txt")  # a deleted object is not replaced: no -f needed
    ok(cli("object", "put", "CLI_OBJ_F", str(new), server=nats_server))

    # get: an existing file is replaced only with -f, and only by a get that read every byte.
    local = tmp_path / "local"
    local.mkdir()
    mine = local / "report.txt"
    mine.write_bytes(b"my own")
    fails(text(run("object", "get", "CLI_OBJ_F", "report.txt", server=nats_server, cwd=local)), 2,
          "object get: overwrite report.txt needs confirming and there is no terminal to ask on: give -f")
    assert mine.read_bytes() == b"my own"
    fails(cli("object", "get", "CLI_OBJ_F", "gone", "-O", str(mine), "-f", server=nats_server), 3,
          "object 'gone' not found in object store 'CLI_OBJ_F'")
    assert mine.read_bytes() == b"my own"
    mine.chmod(0o640)
    ok(text(run("object", "get", "CLI_OBJ_F", "report.txt", "-f", server=nats_server, cwd=local)))
    assert mine.read_bytes() == b"second" and mine.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in local.iterdir()) == ["report.txt"]  # no temporary file left
    # A device is written to, not replaced, and needs no -f.
    ok(cli("object", "get", "CLI_OBJ_F", "report.txt", "-O", os.devnull, server=nats_server))


def test_info_ls_and_rm_of_objects(js, nats_server):
    store = js.create_object_store("CLI_OBJ_LS", storage="memory")
    assert ok(cli("object", "ls", "CLI_OBJ_LS", server=nats_server)) == "no objects in object store CLI_OBJ_LS\n"
    assert as_json(cli("object", "ls", "CLI_OBJ_LS", "--json", server=nats_server)) == []
    b = store.put("b.csv", b"x" * 2000, description="the b table", headers={"Content-Type": "text/csv"},
                  metadata={"rows": "2000"})
    a = store.put("a.txt", b"alpha")
    store.add_link("latest", b)

    table = ok(cli("object", "ls", "CLI_OBJ_LS", server=nats_server)).splitlines()
    assert table[0].split() == ["NAME", "SIZE", "TIME", "DIGEST"]
    rows = [row.split() for row in table[1:]]
    assert [r[0] for r in rows] == ["a.txt", "b.csv", "latest"]
    assert rows[0][1:3] == ["5", "B"] and rows[0][4] == a.digest
    assert rows[1][1:3] == ["2", "KiB"] and rows[1][4] == b.digest
    assert rows[2][1] == "-" and rows[2][3:] == ["link", "to", "CLI_OBJ_LS", ">", "b.csv"]
    assert ok(cli("object", "ls", "CLI_OBJ_LS", "--names", server=nats_server)) == "a.txt\nb.csv\nlatest\n"
    docs = as_json(cli("object", "ls", "CLI_OBJ_LS", "--json", server=nats_server))
    assert [(d["name"], d.get("size"), d.get("digest")) for d in docs[:2]] == \
        [("a.txt", 5, a.digest), ("b.csv", 2000, b.digest)]
    assert docs[2]["options"]["link"] == {"bucket": "CLI_OBJ_LS", "name": "b.csv"}
    assert all(d["bucket"] == "CLI_OBJ_LS" and d["mtime"] and d["nuid"] for d in docs)

    shown = ok(cli("object", "info", "CLI_OBJ_LS", "b.csv", server=nats_server))
    for line in ("Object:              b.csv", "Store:               CLI_OBJ_LS", "Description:         the b table",
                 "Size:                2 KiB (2,000 bytes)", "Chunks:              1",
                 f"Digest:              {b.digest}", "Header Content-Type: text/csv", "Metadata rows:       2000"):
        assert line in shown, line
    doc = as_json(cli("object", "info", "CLI_OBJ_LS", "b.csv", "--json", server=nats_server))
    assert (doc["name"], doc["size"], doc["chunks"], doc["digest"], doc["nuid"]) == \
        ("b.csv", 2000, 1, b.digest, b.nuid)
    assert doc["headers"] == {"Content-Type": ["text/csv"]} and doc["metadata"] == {"rows": "2000"}
    assert "Link to:  CLI_OBJ_LS > b.csv" in ok(cli("object", "info", "CLI_OBJ_LS", "latest", server=nats_server))
    # A link is read as what it points to.
    assert run("object", "get", "CLI_OBJ_LS", "latest", "-O", "-", server=nats_server).stdout == b"x" * 2000

    fails(cli("object", "rm", "CLI_OBJ_LS", "a.txt", server=nats_server), 2,
          "object rm: delete object a.txt from object store CLI_OBJ_LS needs confirming.*give -f")
    assert store.get_bytes("a.txt") == b"alpha"
    assert ok(cli("object", "rm", "CLI_OBJ_LS", "a.txt", "-f", server=nats_server)) == \
        "deleted object a.txt from object store CLI_OBJ_LS\n"
    assert as_json(cli("object", "del", "CLI_OBJ_LS", "b.csv", "-f", "--json", server=nats_server)) == \
        {"bucket": "CLI_OBJ_LS", "name": "b.csv", "deleted": True}
    with pytest.raises(jss.ObjectNotFoundError):
        store.info("a.txt")
    assert ok(cli("object", "ls", "CLI_OBJ_LS", "-n", server=nats_server)) == "latest\n"


def test_a_get_whose_bytes_do_not_match_the_digest_fails_and_keeps_the_file_there(js, nats_server, tmp_path):
    store = js.create_object_store("CLI_OBJ_BAD", storage="memory")
    info = store.put("tampered", os.urandom(300_000))
    wrong = attrs.evolve(info, digest=digest(b"something else"), mtime=None)
    js.publish(meta_subject("CLI_OBJ_BAD", "tampered"), wrong.to_json(), headers={"Nats-Rollup": "sub"})
    (tmp_path / "tampered").write_bytes(b"mine")
    fails(text(run("object", "get", "CLI_OBJ_BAD", "tampered", "-f", server=nats_server, cwd=tmp_path)), 1,
          "object 'tampered' of store 'CLI_OBJ_BAD': the bytes read hash to SHA-256=")
    assert [p.name for p in tmp_path.iterdir()] == ["tampered"] and (tmp_path / "tampered").read_bytes() == b"mine"
    fails(text(run("object", "get", "CLI_OBJ_BAD", "tampered", "-O", "new", server=nats_server, cwd=tmp_path)), 1,
          "hash to")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("args", [
    ["info", "CLI_OBJ_NONE"], ["ls", "CLI_OBJ_NONE"], ["seal", "CLI_OBJ_NONE", "-f"], ["rm", "CLI_OBJ_NONE", "-f"],
    ["rm", "CLI_OBJ_NONE", "x", "-f"], ["info", "CLI_OBJ_NONE", "x"], ["get", "CLI_OBJ_NONE", "x", "-O", "-"],
    ["put", "CLI_OBJ_NONE", "-", "--name", "x", "-f"],
])
def test_a_missing_store_is_exit_3_naming_it(nats_server, args):
    fails(cli("object", *args, server=nats_server), 3, r"^jetstream-sync: error: object store 'CLI_OBJ_NONE' not found$")


def test_a_missing_object_is_exit_3_naming_it_and_its_store(js, nats_server, tmp_path):
    js.create_object_store("CLI_OBJ_MISS", storage="memory")
    message = r"^jetstream-sync: error: object 'nope' not found in object store 'CLI_OBJ_MISS'$"
    fails(cli("object", "info", "CLI_OBJ_MISS", "nope", server=nats_server), 3, message)
    fails(cli("object", "rm", "CLI_OBJ_MISS", "nope", "-f", server=nats_server), 3, message)
    fails(text(run("object", "get", "CLI_OBJ_MISS", "nope", server=nats_server, cwd=tmp_path)), 3, message)
    assert list(tmp_path.iterdir()) == []


def test_the_connection_name_still_works_after_other_object_commands(js, nats_server, tmp_path):
    # `object put --name` names the object; --name stays the connection name everywhere else.
    js.create_object_store("CLI_OBJ_NAME", storage="memory")
    (tmp_path / "f").write_bytes(b"1")
    assert ok(cli("--name", "uploader", "object", "put", "CLI_OBJ_NAME", str(tmp_path / "f"), "--name", "given",
                  server=nats_server)).startswith("stored object given in")
    assert ok(cli("object", "ls", "CLI_OBJ_NAME", "--name", "lister", "-n", server=nats_server)) == "given\n"
    assert ok(cli("stream", "ls", "--names", "--name", "lister", server=nats_server))


# --- progress, terminal, Ctrl-C ---------------------------------------------------------------------------


def test_progress_bar_on_stderr_only_when_asked_or_on_a_terminal_for_large_objects(js, nats_server, tmp_path):
    js.create_object_store("CLI_OBJ_BAR", storage="memory")
    small, large = tmp_path / "small", tmp_path / "large"
    small.write_bytes(b"s" * 1000)
    large.write_bytes(os.urandom(2 * MiB))
    # Not a terminal: no bar unless --progress, which draws it for any size.
    shown = text(run("object", "put", "CLI_OBJ_BAR", str(small), "--progress", server=nats_server))
    assert shown.returncode == 0 and "100%" in shown.stderr and "100%" not in shown.stdout
    ok(cli("object", "put", "CLI_OBJ_BAR", str(large), server=nats_server))
    got = run("object", "get", "CLI_OBJ_BAR", "large", "-O", "-", "--progress", server=nats_server)
    assert got.stdout == large.read_bytes() and b"100%" in got.stderr
    assert run("object", "get", "CLI_OBJ_BAR", "large", "-O", "-", server=nats_server).stderr == b""

    # On a terminal: a bar for a large object, none for a small one; --no-progress none at all.
    def on_terminal(*args: str) -> str:
        term = pexpect.spawn(str(CLI), ["object", *args], env=cli_env(nats_server), cwd=str(tmp_path),
                             encoding="utf-8", timeout=60)
        term.expect(pexpect.EOF)
        term.close()
        assert term.exitstatus == 0, term.before
        return term.before

    assert "100%" in on_terminal("put", "CLI_OBJ_BAR", str(large), "--name", "large2")
    assert "%" not in on_terminal("put", "CLI_OBJ_BAR", str(small), "--name", "small2")
    assert "100%" in on_terminal("get", "CLI_OBJ_BAR", "large2", "-O", "copy")
    assert "%" not in on_terminal("get", "CLI_OBJ_BAR", "large2", "-O", "copy2", "--no-progress")
    assert (tmp_path / "copy").read_bytes() == (tmp_path / "copy2").read_bytes() == large.read_bytes()


def test_on_a_terminal_replacing_is_asked_and_no_keeps_both(js, nats_server, tmp_path):
    store = js.create_object_store("CLI_OBJ_ASK", storage="memory")
    store.put("doc", b"stored")
    (tmp_path / "doc").write_bytes(b"local")

    def answer(args: list[str], question: str, reply: str) -> str:
        term = pexpect.spawn(str(CLI), ["object", *args], env=cli_env(nats_server), cwd=str(tmp_path),
                             encoding="utf-8", timeout=60)
        term.expect(question)
        term.sendline(reply)
        term.expect(pexpect.EOF)
        term.close()
        assert term.exitstatus == 0, term.before
        return term.before

    assert "doc not overwritten" in answer(["get", "CLI_OBJ_ASK", "doc"], r"Really overwrite doc\? \[y/N\]", "n")
    assert "object doc not replaced" in answer(["put", "CLI_OBJ_ASK", "doc"],
                                               r"Really replace object doc of object store CLI_OBJ_ASK\?", "")
    assert (tmp_path / "doc").read_bytes() == b"local" and store.get_bytes("doc") == b"stored"
    answer(["get", "CLI_OBJ_ASK", "doc"], r"Really overwrite doc\?", "y")
    assert (tmp_path / "doc").read_bytes() == b"stored"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero as an endless file")
def test_ctrl_c_during_a_put_exits_130_and_stores_no_object(js, nats_server):
    js.create_object_store("CLI_OBJ_INT", storage="memory", max_bytes=512 * MiB)
    proc, took = interrupted(["object", "put", "CLI_OBJ_INT", "/dev/zero", "--name", "endless"], nats_server,
                             lambda: js.stream_info("OBJ_CLI_OBJ_INT").state.messages >= 20, "20 chunks stored")
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "jetstream-sync: error: interrupted"
    assert took < 10
    with pytest.raises(jss.ObjectNotFoundError):  # no object was stored
        js.object_store("CLI_OBJ_INT").info("endless")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv", [["object", "put", "--help"], ["object", "get", "S"],
                                  ["object", "add", "S", "--ttl", "5x"]])
def test_object_help_and_usage_errors_load_no_client(argv):
    probe = ("import contextlib, io, sys\nfrom jetstream_sync.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
             f"    main({argv!r})\n"
             "print(' '.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=cli_env())
    assert proc.returncode == 0, proc.stderr
    assert not set(proc.stdout.split()) & {"nats", "asyncio", "attrs", "tqdm", "jetstream_sync.client"}
